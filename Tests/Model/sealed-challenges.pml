/*
 * A sealed sign-in challenge's single use, as Latchkey implements it, for spin.
 *
 *   options  → nothing written: the state (its expiry among it) is sealed into the challenge
 *   verify   → LoginRepository.login, one transaction on one connection:
 *              round trip 1  BEGIN; SELECT id IN used_challenges AS used, expires_at > now() AS live
 *              (used or not live: COMMIT, challenge_invalid, nothing written)
 *              round trip 2  INSERT INTO used_challenges SELECT id, expires_at
 *                            WHERE expires_at > statement_timestamp() ON CONFLICT (id) DO NOTHING
 *                            RETURNING id (with the session, only when that returned a row); COMMIT
 *   serve    → ChallengeRepository.purgeExpired  DELETE used ids expired more than GRACE ago
 *
 * The INSERT is atomic per id: of two concurrent inserts of one id, the second waits for the
 * first's transaction and then does nothing (PostgreSQL's speculative insertion). The clock moves on
 * its own, so a verify can read before the expiry, stall, and write after it, while the purge runs.
 * Three presentations of one challenge (the browser's, a replay on another instance, a third) race.
 *
 * Checked (assertions; spin also reports invalid end states):
 *   single use   at most one verify starts a session with the challenge;
 *   expiry       a verify that starts a session wrote before the challenge's expiry;
 *   liveness     a presentation refused although it read the challenge unused and live, and wrote
 *                before its expiry, was refused only because another verify recorded it first.
 *
 * -DBROKEN_SWEEP models a write that does not re-check the expiry (the read's check alone): spin then
 * finds a replay that stalled past the expiry and the purge's grace recording the id a second time.
 */

#define TTL     2     /* ticks from the options to the expiry */
#define GRACE   1     /* purgeExpired: "expired over a minute ago" */
#define MAXT    5

byte now = 0;
byte expires = TTL;           /* sealed at 0 */
bool row = false;             /* the id is in used_challenges */
byte sessions = 0;            /* verifies whose statement recorded the id */
byte done = 0;

proctype Verify() {
    bool used, live, fresh;
    byte wrote;
    /* round trip 1 */
    atomic { used = row; live = (expires > now) };
    if
    :: used || !live -> skip
    :: else ->
        /* the decision; the clock may move meanwhile; round trip 2 */
        atomic {
            wrote = now;
#ifndef BROKEN_SWEEP
            fresh = !row && expires > now;
#else
            fresh = !row;
#endif
            if :: fresh -> row = true; sessions++ :: else -> skip fi
        };
        if
        :: fresh ->
            assert(sessions <= 1);                  /* single use */
            assert(wrote < expires)                 /* expiry */
        :: else ->
            /* liveness: refused while live only because another verify recorded it */
            assert(wrote >= expires || sessions > 0)
        fi
    fi;
    atomic { done++ }
}

proctype Clock() {
    do
    :: now < MAXT -> now++
    :: break
    od;
    atomic { done++ }
}

proctype Purge() {
    byte rounds = 0;
    do
    :: rounds < 3 ->
        atomic { if :: row && expires + GRACE < now -> row = false :: else -> skip fi };
        rounds++
    :: break
    od;
    atomic { done++ }
}

init {
    atomic { run Clock(); run Purge(); run Verify(); run Verify(); run Verify() };
    done == 5;
    assert(sessions <= 1)
}
