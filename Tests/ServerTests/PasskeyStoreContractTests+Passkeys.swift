import Foundation
import Crypto
@testable import LatchkeyServer
@testable import Storage
import Testing

extension PasskeyStoreContractTests {
    /// What each call of the passkey script answered.
    static let expectedPasskey = [
        "user alice: nil",
        "read new: used=false live=true registered=nil known=false taken=false account=nil language=nil email=nil accepted=[] recovery=nil",
        "read expired: used=false live=false registered=nil known=false taken=false account=nil language=nil email=nil accepted=[] recovery=nil",
        "register alice: registered",
        "register alice, same challenge: challengeUnusable",
        "read retry: used=true live=true registered=A1/usr_alice known=true taken=true account=nil language=nil email=nil accepted=[] recovery=nil",
        "read other digest: used=true live=true registered=nil known=true taken=true account=nil language=nil email=nil accepted=[] recovery=nil",
        "user alice: usr_alice, session live, audit 1",
        "register bob as alice: conflict(usernameTaken)",
        "after: used=true live=true registered=nil known=false taken=false account=nil language=nil email=nil accepted=[] recovery=nil, user bob nil, session none",
        "register bob with A1: conflict(credentialExists)",
        "after: used=true live=true registered=nil known=true taken=false account=nil language=nil email=nil accepted=[] recovery=nil, user bob nil, session none",
        "register bob: registered",
        "audit 2",
        "register carol, expired: challengeUnusable",
        "after: used=false live=false registered=nil known=false taken=false account=nil language=nil email=nil accepted=[] recovery=nil, user carol nil",
        "refused: refused, again: challengeUnusable, read: used=true live=true registered=nil known=false taken=false account=nil language=nil email=nil accepted=[] recovery=nil",
        "dave, bound: registered, session f-D1 live",
        "erin, the proof again: proofReplayed, user erin nil, session f-E1 none, read: used=true live=true registered=nil known=false taken=false account=nil language=nil email=nil accepted=[] recovery=nil",
        "alice adds A2: registered",
        "read: used=true live=true registered=nil known=true taken=false account=alice language=de email=nil accepted=[A1,A2] recovery=nil",
        "account alice: alice [A1,A2] redeemable=true, nobody: nil",
        "list alice: alice [A1,A2]",
        "ticket: registered",
        "ticket again: ticketUsed, read: used=true live=true registered=nil known=false taken=false account=alice language=de email=nil accepted=[A1,A2,A3] recovery=nil",
        "bob's ticket: ticketUsed",
        "list alice: alice [A1,A2,A3], session f-A4 none, audit 5",
        "step-up: alice [A1,A2,A3] redeemable=true, other action alice [A1,A2,A3] redeemable=false, other user bob [B1] redeemable=false",
        "step-up register: registered, then alice [A1,A2,A3,A4] redeemable=false",
        "step-up again: stepUpUsed",
        "revoke A3: ended [\"f-A3\"] left [A1,A2,A4]",
        "step-up by a revoked passkey: alice [A1,A2,A4] redeemable=false, register: stepUpUsed",
        "step-up by bob's passkey: alice [A1,A2,A4] redeemable=false, by an unknown one: alice [A1,A2,A4] redeemable=false",
        "recover: registered sessions=[\"f-A1\", \"f-A2\", \"f-A4\"] passkeys=[]",
        "recovery rec-1: used=false live=true registered=nil known=false taken=false account=alice language=de email=nil accepted=[A1,A2,A4,A5] recovery=completed, rec-2: used=false live=true registered=nil known=false taken=false account=alice language=de email=nil accepted=[A1,A2,A4,A5] recovery=cancelled",
        "sessions: f-A1 ended f-A5 live, audit 1 1",
        "recover again: recoveryEnded",
        "not yet due: recoveryEnded",
        "expired: recoveryEnded",
        "bob's: recoveryEnded",
        "read: rec-3 used=false live=true registered=nil known=false taken=false account=alice language=de email=nil accepted=[A1,A2,A4,A5] recovery=pending, rec-5 as alice's used=false live=true registered=nil known=false taken=false account=alice language=de email=nil accepted=[A1,A2,A4,A5] recovery=nil, as bob's used=false live=true registered=nil known=false taken=false account=bob language=nil email=nil accepted=[B1] recovery=pending",
        "recover with a used ticket: ticketUsed",
        "then: used=false live=true registered=nil known=false taken=false account=alice language=de email=nil accepted=[A1,A2,A4,A5] recovery=completed, session f-A5 ended",
        "recover, revoking passkeys: registered sessions=[] passkeys=[A1,A2,A4,A5]",
        "list alice: alice [A7], audit 8",
        "rename own: A7=Laptop of alice [A7], bob's: nil, revoked: nil, nobody's: nil",
        "list: alice [A7] A7=Laptop; bob [B1]; nil",
        "read bob B1: known=true other=false code=false address=false email=nil language=nil, alice A7: known=true other=false code=false address=false email=nil language=de, bob A7: known=false other=true code=false address=false email=nil language=nil",
        "revoke bob's as alice: nil, list bob [B1]",
        "last way in: conflict(lastWayIn), audit 1",
        "with an address: known=true other=false code=false address=true email=bob@example.test language=nil; not counting: conflict(lastWayIn)",
        "bob adds B2: registered",
        "revoke B1: ended [\"f-B1\"] left [B2], sessions f-B1 ended f-B2 live",
        "again: nil, audit 2",
        "read B2: known=true other=false code=true address=true email=bob@example.test language=nil",
        "revoke B2 by its own step-up, a code left: ended [\"f-B2\"] left [], step-up bob [] redeemable=false",
        "carol: registered",
        "carol's last: conflict(lastWayIn), step-up carol [C1] redeemable=true",
        "bob's step-up: conflict(stepUpUsed), unknown passkey: nil, step-up carol [C1] redeemable=true",
        "revoke C1: ended [\"f-C1\"] left [], again: conflict(stepUpUsed), list carol []",
        "audit 4",
    ]

    /// Registration's reads and its one write (a new account, an existing one, a challenge used
    /// twice, a username or credential id taken, an enrolment ticket, a step-up redeemed once and
    /// only while its passkey is live, a recovery completed once), the list, the rename and the
    /// revocation (another's, the last way in, the sessions it ends, the step-up it spends). The
    /// passkey limit is not the store's: the service decides it from the read's `accepted`.
    static func passkeyScript(_ store: some PasskeyStore, _ rows: some ContractRows) throws -> [String] {
        var out: [String] = []
        var n = 0
        func challenge(_ expiresAt: Date = Contract.live) -> UsedChallenge {
            n += 1
            return UsedChallenge(id: Array("challenge-\(n)".utf8), expiresAt: expiresAt)
        }
        let (alice, bob, carol) = (Contract.user("alice"), Contract.user("bob"), Contract.user("carol"))
        let audit = { (user: UserRecord) in AuditRecord(actor: user.id, action: "passkey.registered", subject: user.id) }
        func registration(_ user: UserRecord, new: Bool = false, _ label: String, createdAt: Date = Contract.stamp, digest: String? = nil,
                          ticket: [UInt8]? = nil, redeeming: StepUpRedemption? = nil, completing: RecoveryCompletion? = nil,
                          language: String? = nil) -> RegistrationWrite {
            .register(NewRegistration(newUser: new ? user : nil, credential: Contract.credential(label, of: user.id, createdAt: createdAt),
                                      session: Contract.session("f-" + label, user: user.id, credential: label), audit: audit(user),
                                      completing: completing, registrationDigest: digest.map { Array($0.utf8) }, ticketHash: ticket,
                                      redeeming: redeeming, language: language))
        }
        func register(_ c: UsedChallenge, _ write: RegistrationWrite) -> String {
            Contract.outcome({ try store.finishRegistration(c, write) }, Contract.written)
        }
        func read(_ c: UsedChallenge, account: String? = nil, username: String? = nil, credential: String = "none", digest: String = "",
                  recovery: String? = nil) throws -> String {
            let r = try store.registrationRead(c, account: account, username: username, credentialId: Contract.id(credential),
                                               digest: Array(digest.utf8), recoveryId: recovery)
            return "used=\(r.used) live=\(r.live) registered=\(r.registered.map { Contract.label($0.id) + "/" + $0.userId } ?? "nil")"
                + " known=\(r.credentialKnown) taken=\(r.usernameTaken) account=\(r.account?.username ?? "nil")"
                + " language=\(r.language ?? "nil") email=\(r.email ?? "nil") accepted=\(Contract.labels(r.accepted))"
                + " recovery=\(r.recovery?.status.rawValue ?? "nil")"
        }
        func user(_ name: String) throws -> String { try store.user(username: name)?.id ?? "nil" }
        func list(_ userId: String) throws -> String { try listed(store, userId) }
        func account(_ id: String, _ redeeming: StepUpRedemption? = nil) throws -> String {
            guard let a = try store.registrationAccount(id: id, redeeming: redeeming) else { return "nil" }
            return "\(a.user.username) \(Contract.labels(a.credentials.map(\.id))) redeemable=\(a.stepUpRedeemable)"
        }

        // A new account: its reads, its one write, the same challenge again.
        let c1 = challenge()
        out.append("user alice: \(try user("alice"))")
        out.append("read new: \(try read(c1, username: "alice", credential: "A1", digest: "d-A1"))")
        out.append("read expired: \(try read(challenge(Contract.expired), username: "alice", credential: "A1"))")
        out.append("register alice: " + register(c1, registration(alice, new: true, "A1", digest: "d-A1")))
        out.append("register alice, same challenge: " + register(c1, registration(alice, new: true, "A1", digest: "d-A1")))
        out.append("read retry: \(try read(c1, username: "alice", credential: "A1", digest: "d-A1"))")
        out.append("read other digest: \(try read(c1, username: "alice", credential: "A1", digest: "d-other"))")
        out.append("user alice: \(try user("alice")), session \(try rows.session("f-A1")), audit \(try rows.audit("passkey.registered"))")

        // Taken: a username, a credential id (live or revoked) — the challenge is recorded used on its own.
        let c2 = challenge()
        let bobAsAlice = UserRecord(id: bob.id, userHandle: bob.userHandle, username: "alice", displayName: "bob")
        out.append("register bob as alice: " + register(c2, registration(bobAsAlice, new: true, "B0")))
        out.append("after: \(try read(c2, username: "bob", credential: "B0")), user bob \(try user("bob")), session \(try rows.session("f-B0"))")
        let c3 = challenge()
        out.append("register bob with A1: " + register(c3, .register(NewRegistration(
            newUser: bob, credential: Contract.credential("A1", of: bob.id), session: Contract.session("f-B0", user: bob.id, credential: "A1"),
            audit: audit(bob)))))
        out.append("after: \(try read(c3, username: "bob", credential: "A1")), user bob \(try user("bob")), session \(try rows.session("f-B0"))")
        out.append("register bob: " + register(challenge(), registration(bob, new: true, "B1")))
        out.append("audit \(try rows.audit("passkey.registered"))")

        // Expired: nothing written. Refused: the challenge alone.
        let c5 = challenge(Contract.expired)
        out.append("register carol, expired: " + register(c5, registration(carol, new: true, "C1")))
        out.append("after: \(try read(c5, username: "carol", credential: "C1")), user carol \(try user("carol"))")
        let c6 = challenge()
        out.append("refused: " + register(c6, .refused) + ", again: " + register(c6, .refused) + ", read: \(try read(c6))")

        // A DPoP proof binds the session; seen before, it is a gate: no account, passkey or session, the challenge used.
        let proof = DPoPBinding(replay: DPoPReplayKey(Digest32.random()), jkt: Base64URL.encode(Digest32.random()))
        func bound(_ user: UserRecord, _ label: String) -> RegistrationWrite {
            var session = Contract.session("f-" + label, user: user.id, credential: label)
            session.dpop = proof
            return .register(NewRegistration(newUser: user, credential: Contract.credential(label, of: user.id), session: session, audit: audit(user)))
        }
        let (dave, erin) = (Contract.user("dave"), Contract.user("erin"))
        out.append("dave, bound: " + register(challenge(), bound(dave, "D1")) + ", session f-D1 \(try rows.session("f-D1"))")
        let c6b = challenge()
        out.append("erin, the proof again: " + register(c6b, bound(erin, "E1")) + ", user erin \(try user("erin")), session f-E1 "
                   + "\(try rows.session("f-E1")), read: \(try read(c6b, username: "erin", credential: "E1"))")

        // An existing account adds a passkey; the order of passkeys is the database's.
        let c7 = challenge()
        out.append("alice adds A2: " + register(c7, registration(alice, "A2", createdAt: Date(timeIntervalSince1970: 1_000_000), language: "de")))
        out.append("read: \(try read(c7, account: alice.id, credential: "A2"))")
        out.append("account alice: \(try account(alice.id)), nobody: \(try account("usr_nobody"))")
        out.append("list alice: \(try list(alice.id))")

        // An enrolment ticket: used up once, the account's own.
        let t1 = Digest32.random(), t2 = Digest32.random()
        try rows.addTicket(hash: t1, userId: alice.id)
        try rows.addTicket(hash: t2, userId: bob.id)
        out.append("ticket: " + register(challenge(), registration(alice, "A3", ticket: t1)))
        let c8 = challenge()
        out.append("ticket again: " + register(c8, registration(alice, "A4", ticket: t1)) + ", read: \(try read(c8, account: alice.id, credential: "A4"))")
        out.append("bob's ticket: " + register(challenge(), registration(alice, "A4", ticket: t2)))
        out.append("list alice: \(try list(alice.id)), session f-A4 \(try rows.session("f-A4")), audit \(try rows.audit("passkey.registered"))")

        // A step-up: redeemed once, for the account and action, while the passkey that made it is live.
        let addHash = [UInt8](repeating: 7, count: 32)
        let s1 = StepUpRedemption(jti: "jti-1", userId: alice.id, actionHash: addHash)
        try rows.addReceipt(s1, approver: Contract.id("A1"))
        out.append("step-up: \(try account(alice.id, s1)), other action \(try account(alice.id, StepUpRedemption(jti: "jti-1", userId: alice.id, actionHash: Digest32.random())))"
                   + ", other user \(try account(bob.id, StepUpRedemption(jti: "jti-1", userId: bob.id, actionHash: addHash)))")
        out.append("step-up register: " + register(challenge(), registration(alice, "A4", redeeming: s1)) + ", then \(try account(alice.id, s1))")
        out.append("step-up again: " + register(challenge(), registration(alice, "A5", redeeming: s1)))
        let s2 = StepUpRedemption(jti: "jti-2", userId: alice.id, actionHash: addHash)
        try rows.addReceipt(s2, approver: Contract.id("A3"))
        let plain = AuditRecord(actor: alice.id, action: "passkey.revoked", subject: alice.id)
        out.append("revoke A3: " + Contract.outcome({ try store.revokePasskey(userId: alice.id, credentialId: Contract.id("A3"), audit: plain, redeeming: nil,
                                                                              keeping: nil, mail: [], revokedEvent: nil, sessionEvent: nil) }, revoked))
        out.append("step-up by a revoked passkey: \(try account(alice.id, s2)), register: " + register(challenge(), registration(alice, "A5", redeeming: s2)))
        let s3 = StepUpRedemption(jti: "jti-3", userId: alice.id, actionHash: addHash)
        try rows.addReceipt(s3, approver: Contract.id("B1"))
        let s4 = StepUpRedemption(jti: "jti-4", userId: alice.id, actionHash: addHash)
        try rows.addReceipt(s4, approver: Contract.id("nobody"))
        out.append("step-up by bob's passkey: \(try account(alice.id, s3)), by an unknown one: \(try account(alice.id, s4))")

        // A recovery: completed once, while pending and due, the account's own.
        try rows.addRecovery(id: "rec-1", userId: alice.id, due: true, expired: false)
        try rows.addRecovery(id: "rec-2", userId: alice.id, due: false, expired: false)
        out.append("recover: " + register(challenge(), registration(alice, "A5", completing: completion("rec-1", revokePasskeys: false))))
        let c9 = challenge()
        out.append("recovery rec-1: \(try read(c9, account: alice.id, recovery: "rec-1")), rec-2: \(try read(c9, account: alice.id, recovery: "rec-2"))")
        out.append("sessions: f-A1 \(try rows.session("f-A1")) f-A5 \(try rows.session("f-A5")), audit \(try rows.audit("recovery.completed"))"
                   + " \(try rows.audit("recovery.cancelled"))")
        out.append("recover again: " + register(challenge(), registration(alice, "A6", completing: completion("rec-1", revokePasskeys: false))))
        try rows.addRecovery(id: "rec-3", userId: alice.id, due: false, expired: false)
        out.append("not yet due: " + register(challenge(), registration(alice, "A6", completing: completion("rec-3", revokePasskeys: false))))
        try rows.addRecovery(id: "rec-4", userId: alice.id, due: true, expired: true)
        out.append("expired: " + register(challenge(), registration(alice, "A6", completing: completion("rec-4", revokePasskeys: false))))
        try rows.addRecovery(id: "rec-5", userId: bob.id, due: true, expired: false)
        out.append("bob's: " + register(challenge(), registration(alice, "A6", completing: completion("rec-5", revokePasskeys: false))))
        let c10 = challenge()
        out.append("read: rec-3 \(try read(c10, account: alice.id, recovery: "rec-3")), rec-5 as alice's \(try read(c10, account: alice.id, recovery: "rec-5"))"
                   + ", as bob's \(try read(c10, account: bob.id, recovery: "rec-5"))")
        try rows.addRecovery(id: "rec-6", userId: alice.id, due: true, expired: false)
        out.append("recover with a used ticket: " + register(challenge(), registration(alice, "A6", ticket: t1, completing: completion("rec-6", revokePasskeys: false))))
        out.append("then: \(try read(challenge(), account: alice.id, recovery: "rec-6")), session f-A5 \(try rows.session("f-A5"))")
        try rows.addRecovery(id: "rec-7", userId: alice.id, due: true, expired: false)
        out.append("recover, revoking passkeys: " + register(challenge(), registration(alice, "A7", completing: completion("rec-7", revokePasskeys: true))))
        out.append("list alice: \(try list(alice.id)), audit \(try rows.audit("passkey.registered"))")

        // The list and the rename: a live passkey of the account's own.
        func rename(_ userId: String, _ label: String, _ name: String) throws -> String {
            try store.rename(userId: userId, credentialId: Contract.id(label), name: name, renamedEvent: nil)
                .map { "\(Contract.label($0.renamed.id))=\($0.renamed.name) of \($0.account.user.username) \(Contract.labels($0.account.credentials.map(\.id)))" } ?? "nil"
        }
        out.append("rename own: \(try rename(alice.id, "A7", "Laptop")), bob's: \(try rename(alice.id, "B1", "Mine")), revoked: \(try rename(alice.id, "A1", "Old"))"
                   + ", nobody's: \(try rename("usr_nobody", "A7", "X"))")
        out.append("list: \(try list(alice.id)); \(try list(bob.id)); \(try list("usr_nobody"))")

        // Revocation: the account's own live passkey, never its last way in, with the sessions it began.
        func revocationRead(_ userId: String, _ label: String) throws -> String {
            let r = try store.revocationRead(userId: userId, credentialId: Contract.id(label))
            return "known=\(r.ways.known) other=\(r.ways.otherPasskey) code=\(r.ways.recoveryCode) address=\(r.ways.verifiedAddress)"
                + " email=\(r.email ?? "nil") language=\(r.language ?? "nil")"
        }
        func revoke(_ user: UserRecord, _ label: String, keeping: LastWayInRule? = nil, redeeming: StepUpRedemption? = nil) -> String {
            Contract.outcome({
                try store.revokePasskey(userId: user.id, credentialId: Contract.id(label),
                                        audit: AuditRecord(actor: user.id, action: "passkey.revoked", subject: user.id), redeeming: redeeming,
                                        keeping: keeping, mail: [], revokedEvent: nil, sessionEvent: nil)
            }, revoked)
        }
        out.append("read bob B1: \(try revocationRead(bob.id, "B1")), alice A7: \(try revocationRead(alice.id, "A7")), bob A7: \(try revocationRead(bob.id, "A7"))")
        out.append("revoke bob's as alice: \(revoke(alice, "B1")), list \(try list(bob.id))")
        out.append("last way in: \(revoke(bob, "B1", keeping: LastWayInRule(addressCounts: true))), audit \(try rows.audit("passkey.revoked"))")
        try rows.addEmail("bob@example.test", userId: bob.id)
        out.append("with an address: \(try revocationRead(bob.id, "B1")); not counting: \(revoke(bob, "B1", keeping: LastWayInRule(addressCounts: false)))")
        out.append("bob adds B2: " + register(challenge(), registration(bob, "B2")))
        out.append("revoke B1: \(revoke(bob, "B1", keeping: LastWayInRule(addressCounts: false))), sessions f-B1 \(try rows.session("f-B1")) f-B2 \(try rows.session("f-B2"))")
        out.append("again: \(revoke(bob, "B1")), audit \(try rows.audit("passkey.revoked"))")
        let s5 = StepUpRedemption(jti: "jti-5", userId: bob.id, actionHash: addHash)
        try rows.addReceipt(s5, approver: Contract.id("B2"))
        try rows.addRecoveryCode(userId: bob.id)
        out.append("read B2: \(try revocationRead(bob.id, "B2"))")
        out.append("revoke B2 by its own step-up, a code left: \(revoke(bob, "B2", keeping: LastWayInRule(addressCounts: false), redeeming: s5))"
                   + ", step-up \(try account(bob.id, s5))")
        out.append("carol: " + register(challenge(), registration(carol, new: true, "C1")))
        let s6 = StepUpRedemption(jti: "jti-6", userId: carol.id, actionHash: addHash)
        try rows.addReceipt(s6, approver: Contract.id("C1"))
        out.append("carol's last: \(revoke(carol, "C1", keeping: LastWayInRule(addressCounts: true), redeeming: s6)), step-up \(try account(carol.id, s6))")
        out.append("bob's step-up: \(revoke(carol, "C1", redeeming: s5)), unknown passkey: \(revoke(carol, "nobody", redeeming: s6))"
                   + ", step-up \(try account(carol.id, s6))")
        out.append("revoke C1: \(revoke(carol, "C1", redeeming: s6)), again: \(revoke(carol, "C1", redeeming: s6)), list \(try list(carol.id))")
        out.append("audit \(try rows.audit("passkey.revoked"))")
        return out
    }

    /// The passkey list: ids oldest first, names other than the default, the flagged and the used ones.
    static func listed(_ store: some PasskeyStore, _ userId: String) throws -> String {
        guard let a = try store.passkeys(userId: userId) else { return "nil" }
        return a.user.username + " " + Contract.labels(a.credentials.map(\.id))
            + a.credentials.filter { $0.name != "Passkey" }.map { " \(Contract.label($0.id))=\($0.name)" }.joined()
            + a.credentials.filter { $0.flagged }.map { " \(Contract.label($0.id)):flagged" }.joined()
            + a.credentials.filter { $0.lastUsedAt != nil }.map { " \(Contract.label($0.id)):used" }.joined()
    }

    static func revoked(_ r: RevokedPasskey?) -> String {
        r.map { "ended \($0.ended.sorted()) left \(Contract.labels($0.account.credentials.map(\.id)))" } ?? "nil"
    }

    static func completion(_ recoveryId: String, revokePasskeys: Bool) -> RecoveryCompletion {
        func template(_ type: EventType) -> EventTemplate {
            EventTemplate(idPrefix: "evt_", seed: recoveryId + type.rawValue, type: type, maxAgeSeconds: 3600, createdAt: Contract.stamp)
        }
        return RecoveryCompletion(recoveryId: recoveryId, revokePasskeys: revokePasskeys,
                                  audit: AuditRecord(actor: "usr_alice", action: "recovery.completed", subject: "usr_alice"), events: [],
                                  sessionRevoked: template(.sessionRevoked), deviceKeyRevoked: template(.deviceKeyRevoked),
                                  passkeyRevoked: template(.passkeyRevoked), otherCancelledAudit: AuditTemplate(actor: nil, action: "recovery.cancelled"),
                                  otherCancelledEvent: template(.recoveryCancelled))
    }
}
