/*
 * The challenge lifecycle, as Latchkey implements it, for spin.
 *
 *   options  → ChallengeRepository.insert     INSERT … expires_at = now() + LATCHKEY_CHALLENGE_TTL
 *   verify   → ChallengeRepository.consume    one DELETE … RETURNING (kind / user filter for step-up,
 *                                              none for a registration); expired = expires_at <= now()
 *                                              computed in the statement
 * (A sign-in's challenge is sealed, not stored: Tests/Model/sealed-challenges.pml.)
 *            → CeremonyRules.live             found? not expired? this ceremony's kind and rpId?
 *   serve    → ChallengeRepository.purgeExpired  DELETE rows expired more than GRACE ago
 *
 * Every SQL statement is one atomic step (PostgreSQL runs each DELETE … RETURNING on a row under
 * its row lock: of concurrent deletes of one row exactly one returns it). Two server instances
 * share the one database; the clock moves on its own, so a consume can race with expiry and with
 * the purge. One challenge is issued, for `registration` or `stepUp` (bound to alice);
 * alice presents it on instance A and replays it on instance B, each time to either ceremony;
 * mallory, signed in as herself, presents it to step-up on B.
 *
 * Checked (assertions; spin also reports invalid end states):
 *   single use   at most one verify accepts the challenge, over both instances;
 *   binding      an accepted challenge is this ceremony's kind, this rpId, and (step-up) this user;
 *                mallory's step-up consume never finds — so never burns — alice's challenge;
 *   expiry       an accepted challenge was consumed before its expires_at;
 *   race         a presentation consumed before expiry is refused as unknown only because the
 *                other instance used the challenge first, never because the purge took it.
 *
 * -DBROKEN_CONSUME models a SELECT-then-DELETE consume (two statements): scripts/test.sh checks
 * that spin then finds the double use, so the assertions are not vacuous.
 */

#define TTL     2     /* ticks from insert to expires_at */
#define GRACE   1     /* purgeExpired: "expired over an hour ago" */
#define MAXT    4     /* the clock stops here: past expiry and the purge's grace of a challenge issued at 0 */

/* CeremonyKind */
#define NOKIND          0
#define REGISTRATION  1
#define STEPUP          2
/* users */
#define NOUSER  0
#define ALICE   1
#define MALLORY 2
/* rpIds */
#define RP      1

/* CeremonyRules.live verdicts */
#define ACCEPTED        1
#define UNKNOWN_OR_USED 2
#define EXPIRED         3
#define OTHER_CEREMONY  4

/* The challenges table: the one row a challenge hash names. */
bool row_exists = false;
byte row_kind, row_user, row_rp, row_expires;

byte now = 0;                 /* PostgreSQL's now(), in ticks */
byte issued_kind, issued_expires;
bool issued = false;
byte accepted = 0;            /* verifies that accepted the challenge */
byte consumed_by_alice = 0;   /* alice's consumes that returned the row (counted in the statement) */
bool purged = false;
byte done = 0;

/* ChallengeRepository.insert */
inline insert(kind, user) {
    atomic {
        row_exists = true; row_kind = kind; row_user = user; row_rp = RP; row_expires = now + TTL;
        issued_kind = kind; issued_expires = row_expires; issued = true
    }
}

/* ChallengeRepository.consume(hash, kind:, userId:) (a registration's: filter NOKIND, NOUSER):
 * one DELETE … WHERE hash = $1 [AND purpose = $2 AND user_id = $3] RETURNING …, expires_at <= now() */
inline consume(fkind, fuser, found, kind, user, rp, expired, at, who) {
#ifndef BROKEN_CONSUME
    atomic {
        at = now;
        if
        :: row_exists && (fkind == NOKIND || row_kind == fkind) && (fuser == NOUSER || row_user == fuser) ->
            found = true; kind = row_kind; user = row_user; rp = row_rp; expired = (row_expires <= now);
            row_exists = false;
            if :: who == ALICE -> consumed_by_alice++ :: else -> skip fi
        :: else -> found = false
        fi
    }
#else
    /* SELECT … then DELETE …: two statements, another instance may run between them */
    atomic {
        at = now;
        if
        :: row_exists && (fkind == NOKIND || row_kind == fkind) && (fuser == NOUSER || row_user == fuser) ->
            found = true; kind = row_kind; user = row_user; rp = row_rp; expired = (row_expires <= now);
            if :: who == ALICE -> consumed_by_alice++ :: else -> skip fi
        :: else -> found = false
        fi
    }
    atomic { if :: found -> row_exists = false :: else -> skip fi }
#endif
}

/* CeremonyRules.live(found, kind:, rpId:) */
inline live(found, kind, rp, expired, want, verdict) {
    if
    :: !found -> verdict = UNKNOWN_OR_USED
    :: found && expired -> verdict = EXPIRED
    :: found && !expired && (kind != want || rp != RP) -> verdict = OTHER_CEREMONY
    :: found && !expired && kind == want && rp == RP -> verdict = ACCEPTED
    fi
}

/* Alice presents the challenge on one instance, to either ceremony (the right one, or by mistake
 * the other): PasskeyService.verifyRegistration (consume: no filter, whatever the kind)
 * or StepUpService (consume filtered by kind stepUp and her user id). */
proctype AliceVerify(byte instance) {
    bool found, expired;
    byte kind, user, rp, at, verdict, want;
    issued;
    if
    :: want = REGISTRATION; consume(NOKIND, NOUSER, found, kind, user, rp, expired, at, ALICE)
    :: want = STEPUP; consume(STEPUP, ALICE, found, kind, user, rp, expired, at, ALICE)
    fi;
    live(found, kind, rp, expired, want, verdict);
    if
    :: verdict == ACCEPTED ->
        atomic { accepted++ };
        assert(accepted <= 1);                                           /* single use */
        assert(kind == issued_kind && want == issued_kind && rp == RP);  /* binding: ceremony, rpId */
        assert(issued_kind != STEPUP || user == ALICE);                  /* binding: user */
        assert(at < issued_expires)                                      /* expiry */
    :: else -> skip
    fi;
    /* race: presented to its own ceremony before expiry, yet not found → only because one of
     * alice's presentations (on the other instance) took it first, never the purge */
    assert(found || want != issued_kind || at >= issued_expires || consumed_by_alice > 0);
    atomic { done++ }
}

/* Mallory, signed in as herself, presents alice's challenge to step-up on instance B. */
proctype MalloryStepUp() {
    bool found, expired;
    byte kind, user, rp, at, verdict;
    issued;
    consume(STEPUP, MALLORY, found, kind, user, rp, expired, at, MALLORY);
    assert(!found);                                                      /* never burns alice's */
    live(found, kind, rp, expired, STEPUP, verdict);
    assert(verdict != ACCEPTED);
    atomic { done++ }
}

/* The database clock. */
proctype Clock() {
    do
    :: now < MAXT -> now++
    :: break
    od;
    atomic { done++ }
}

/* ServeCommand's maintenance loop: ChallengeRepository.purgeExpired, on either instance. */
proctype Purge() {
    byte rounds = 0;
    do
    :: rounds < 2 ->
        atomic {
            if
            :: row_exists && row_expires + GRACE < now -> row_exists = false; purged = true
            :: else -> skip
            fi
        };
        rounds++
    :: break
    od;
    atomic { done++ }
}

init {
    atomic {
        run Clock(); run Purge();
        run AliceVerify(1); run AliceVerify(2);   /* instance A, and the replay on instance B */
        run MalloryStepUp()
    };
    /* options: either ceremony, issued whenever the clock stands */
    if
    :: insert(REGISTRATION, NOUSER)
    :: insert(STEPUP, ALICE)
    fi;
    done == 5;
    assert(accepted <= 1);
    /* a challenge is gone once the ceremony is over, unless nobody used it before it expired */
    assert(!row_exists || consumed_by_alice == 0)
}
