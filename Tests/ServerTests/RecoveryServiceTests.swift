import Foundation
import JSON
@testable import LatchkeyServer
@testable import Storage
import Testing
import Tokens

/// `RecoveryService`'s decisions over the in-memory store (no socket, no PostgreSQL): one-time
/// codes (right, wrong, out of attempts, expired, replayed), recovery for a known and an unknown
/// account, the recovery's delay, its cancellation, recovery codes, email sign-in. RecoveryTests
/// keeps the same flows over HTTP and PostgreSQL.
@Suite struct RecoveryServiceTests {
    static func body(_ members: [(String, String)]) -> JSONValue { .object(members.map { ($0.0, .string($0.1)) }) }

    /// A code that is not `code` (same length).
    static func wrong(_ code: String) -> String {
        String(code.dropLast()) + String((Int(String(code.last!))! + 1) % 10)
    }

    @Test("verifying an address: a wrong code is code_invalid and counts; the right one verifies once; a replay is challenge_invalid")
    func emailVerification() throws {
        let f = try ServiceFixture()
        let alice = f.tables.addUser("alice")
        let caller = SessionService.Caller(userId: alice.id, sessionId: "s1")
        let started = try f.recovery.startVerification(caller, body: Self.body([("email", " Alice@Example.ORG ")]), redeeming: nil)
        let id = started.id
        #expect(started.expiresAt == f.clock.now().addingTimeInterval(Double(f.configuration.otpTTL)))
        // The address is normalised (domain lower-cased) and the code goes there, written with the challenge.
        let code = try f.mailedCode(.emailVerify, to: "Alice@example.org")
        #expect(f.tables.snapshot.mail.map(\.recipient) == ["Alice@example.org"])

        #expect(refusal { _ = try f.recovery.verifyEmail(caller, body: Self.body([("challengeId", id), ("code", Self.wrong(code))])) } == .codeInvalid)
        #expect(f.tables.snapshot.audit.contains { $0.action == "otp.rejected" })
        let verified = try f.recovery.verifyEmail(caller, body: Self.body([("challengeId", id), ("code", code)]))
        #expect(verified.email == "Alice@example.org")
        #expect(RecoveryRenderer.verified(verified) == .object([("email", "Alice@example.org"), ("verified", true)]))
        #expect(try f.recovery.verifiedAddress(userId: alice.id)?.value == "Alice@example.org")
        #expect(f.tables.snapshot.events.contains { $0.type == .emailVerified && $0.accountId == alice.id })
        #expect(refusal { _ = try f.recovery.verifyEmail(caller, body: Self.body([("challengeId", id), ("code", code)])) } == .challengeInvalid)
    }

    @Test("a challenge takes 5 attempts: after 5 wrong codes the right one is challenge_invalid")
    func attemptsRunOut() throws {
        let f = try ServiceFixture()
        let alice = f.tables.addUser("alice")
        let caller = SessionService.Caller(userId: alice.id, sessionId: "s1")
        let id = try f.recovery.startVerification(caller, body: Self.body([("email", "a@example.org")]), redeeming: nil).id
        let code = try f.mailedCode(.emailVerify, to: "a@example.org")
        for _ in 0..<OneTimeCode.maxAttempts {
            #expect(refusal { _ = try f.recovery.verifyEmail(caller, body: Self.body([("challengeId", id), ("code", Self.wrong(code))])) } == .codeInvalid)
        }
        #expect(refusal { _ = try f.recovery.verifyEmail(caller, body: Self.body([("challengeId", id), ("code", code)])) } == .challengeInvalid)
        #expect(try f.recovery.verifiedAddress(userId: alice.id) == nil)
    }

    @Test("a code is good until its challenge expires, and challenge_invalid from then on")
    func codesExpire() throws {
        let f = try ServiceFixture()
        let alice = f.tables.addUser("alice")
        let caller = SessionService.Caller(userId: alice.id, sessionId: "s1")
        let id = try f.recovery.startVerification(caller, body: Self.body([("email", "a@example.org")]), redeeming: nil).id
        let code = try f.mailedCode(.emailVerify, to: "a@example.org")
        f.clock.advance(Double(f.configuration.otpTTL))
        #expect(refusal { _ = try f.recovery.verifyEmail(caller, body: Self.body([("challengeId", id), ("code", code)])) } == .challengeInvalid)
        #expect(try f.recovery.verifiedAddress(userId: alice.id) == nil)
    }

    @Test("recovery start answers a known and an unknown username alike; only the known account's address gets a code")
    func recoveryStartTellsNothing() throws {
        let f = try ServiceFixture()
        let alice = f.tables.addUser("alice", email: "alice@example.org")
        _ = f.tables.addUser("bob")  // no verified address
        var answers: [JSONValue] = []
        for username in ["alice", "bob", "nobody"] {
            answers.append(RecoveryRenderer.challenge(try f.recovery.startRecovery(body: Self.body([("username", username)]))))
        }
        #expect(Set(answers.map { $0.objectMembers?.map(\.key) ?? [] }) == [["challengeId", "expiresAt"]])
        #expect(Set(answers.map { $0["expiresAt"]?.stringValue }).count == 1)
        // A mail is composed for everyone (the same work either way); only the known one's is stored.
        #expect(f.tables.snapshot.mail.map(\.recipient) == ["alice@example.org"])
        let t = f.tables.snapshot
        #expect(t.challenges.count == 3)
        #expect(t.audit.filter { $0.action == "recovery.challenge_started" }.count == 3)
        // The unknown account's challenge matches no code.
        let ids = answers.compactMap { $0["challengeId"]?.stringValue }
        for id in ids.dropFirst() {
            #expect(refusal { _ = try f.recovery.verifyRecovery(body: Self.body([("challengeId", id), ("code", "000000")])) } == .codeInvalid)
        }
        // By address: the same answer whether or not the address is anyone's.
        let byAddress = RecoveryRenderer.challenge(try f.recovery.startRecovery(body: Self.body([("email", "ALICE@example.org")])))
        let byNobody = RecoveryRenderer.challenge(try f.recovery.startRecovery(body: Self.body([("email", "nobody@example.org")])))
        #expect(byAddress.objectMembers?.map(\.key) == byNobody.objectMembers?.map(\.key))
        #expect(f.tables.snapshot.mail.map(\.event.accountId) == [alice.id])
    }

    @Test("three code mails an hour per username; past that 429 with Retry-After, whether or not it is anyone's")
    func recoveryStartLimit() throws {
        let f = try ServiceFixture()
        _ = f.tables.addUser("alice", email: "alice@example.org")
        for username in ["alice", "nobody"] {
            for _ in 0..<RecoveryService.challengesPerHour { _ = try f.recovery.startRecovery(body: Self.body([("username", username)])) }
            #expect(refusal { _ = try f.recovery.startRecovery(body: Self.body([("username", username)])) } == .rateLimited)
        }
        f.clock.advance(3600)
        _ = try f.recovery.startRecovery(body: Self.body([("username", "alice")]))
    }

    @Test("a mailed recovery code starts a recovery held for the delay; then it may register; the owner is told with a cancel link")
    func recoveryByEmail() throws {
        let f = try ServiceFixture()
        let alice = f.tables.addUser("alice", email: "alice@example.org")
        let id = try f.recovery.startRecovery(body: Self.body([("username", "alice")])).id
        let code = try f.mailedCode(.recoveryCode, to: "alice@example.org")
        let started = try f.recovery.verifyRecovery(body: Self.body([("challengeId", id), ("code", code)]))
        let token = started.token
        let recoveryId = started.recoveryId
        #expect(started.notBefore == f.clock.now().addingTimeInterval(3600))
        #expect(started.expiresIn == 3600 + f.configuration.recoveryTokenTTL)
        #expect(RecoveryRenderer.recovery(started).objectMembers?.map(\.key) == ["recoveryToken", "expiresIn", "notBefore", "recoveryId"])
        // The code was used up with it.
        #expect(refusal { _ = try f.recovery.verifyRecovery(body: Self.body([("challengeId", id), ("code", code)])) } == .challengeInvalid)
        #expect(try f.cancelToken(to: "alice@example.org").hasPrefix("lkcan_rec_"))
        #expect(f.tables.snapshot.events.contains { $0.type == .recoveryStarted && $0.accountId == alice.id })

        // The settings page shows it pending.
        let state = try f.recovery.accountState(SessionService.Caller(userId: alice.id, sessionId: "s"))
        #expect(state.pending.first?.id == recoveryId)
        #expect(state.email == "alice@example.org")
        #expect(RecoveryRenderer.accountState(state)["pendingRecoveries"]?.arrayValue?.first?["recoveryId"]?.stringValue == recoveryId)

        #expect(refusal { _ = try f.recovery.authorizeRegistration(token: token) } == .recoveryPending)
        f.clock.advance(3600)
        let due = try f.recovery.authorizeRegistration(token: token)
        #expect(due.id == recoveryId && due.userId == alice.id && due.method == .email)
        #expect(f.recovery.completion(of: due).recoveryId == recoveryId)
        // Past its lifetime the token registers nothing.
        f.clock.advance(Double(f.configuration.recoveryTokenTTL))
        #expect(refusal { _ = try f.recovery.authorizeRegistration(token: token) } == .unauthorized)
        #expect(refusal { _ = try f.recovery.authorizeRegistration(token: "lkrec_unknown") } == .unauthorized)
    }

    @Test("the mailed cancel link cancels the recovery once; the owner's session cancels another; nobody else's does")
    func cancellation() throws {
        let f = try ServiceFixture()
        let alice = f.tables.addUser("alice", email: "alice@example.org")
        let codes = try f.recovery.createRecoveryCodes(SessionService.Caller(userId: alice.id, sessionId: "s"),
                                                       redeeming: Self.receipt(f, userId: alice.id))
        let list = codes.codes

        let first = try f.recovery.verifyRecovery(body: Self.body([("username", "alice"), ("recoveryCode", list[0])]))
        let link = try f.cancelToken(to: "alice@example.org")
        try f.recovery.cancel(token: .object([("cancelToken", .string(link))]))
        #expect(refusal { try f.recovery.cancel(token: .object([("cancelToken", .string(link))])) } == .notFound)
        f.clock.advance(3600)
        #expect(refusal { _ = try f.recovery.authorizeRegistration(token: first.token) } == .unauthorized)
        #expect(f.tables.snapshot.events.contains { $0.type == .recoveryCancelled && $0.key == first.recoveryId })
        #expect(refusal { try f.recovery.cancel(token: .object([("cancelToken", "lkcan_rec_unknown")])) } == .notFound)
        #expect(refusal { try f.recovery.cancel(token: .object([("cancelToken", "not-a-link")])) } == .notFound)
        #expect(refusal { try f.recovery.cancel(token: .object([("cancel", "x")])) } == .invalidRequest)

        let second = try f.recovery.verifyRecovery(body: Self.body([("username", "alice"), ("recoveryCode", list[1])]))
        let secondId = second.recoveryId
        let bob = SessionService.Caller(userId: f.tables.addUser("bob").id, sessionId: "sb")
        #expect(refusal { try f.recovery.cancel(bob, recoveryId: secondId) } == .notFound)
        try f.recovery.cancel(SessionService.Caller(userId: alice.id, sessionId: "s"), recoveryId: secondId)
        #expect(refusal { try f.recovery.cancel(SessionService.Caller(userId: alice.id, sessionId: "s"), recoveryId: secondId) } == .notFound)
        #expect(refusal { _ = try f.recovery.authorizeRegistration(token: second.token) } == .unauthorized)
        // A cancelled recovery's link undoes nothing more.
        #expect(refusal { try f.recovery.cancel(token: .object([("cancelToken", .string(try f.cancelToken(to: "alice@example.org")))])) } == .notFound)
    }

    @Test("a held passkey's cancel link revokes it and ends the sessions it began, while the hold lasts")
    func heldPasskeyCancelLink() throws {
        let f = try ServiceFixture()
        let alice = f.tables.addUser("alice")
        let now = f.clock.now()
        f.tables.addCredential(id: [1, 2, 3], userId: alice.id, approvesFrom: now.addingTimeInterval(3600))
        f.tables.addCredential(id: [4, 5, 6], userId: alice.id, approvesFrom: now.addingTimeInterval(60))
        let store = InMemorySessionStore(tables: f.tables)
        let held = f.sessions.prepare(userId: alice.id, credentialId: [1, 2, 3])
        try store.start(session: held.record, audit: [], language: nil)
        let other = f.sessions.prepare(userId: alice.id, credentialId: nil, method: .email)
        try store.start(session: other.record, audit: [], language: nil)
        f.tables.addCancelToken(hash: OpaqueSecret.hash("lkcan_pk_one"), userId: alice.id, credentialId: [1, 2, 3], expiresAt: now.addingTimeInterval(3600))
        f.tables.addCancelToken(hash: OpaqueSecret.hash("lkcan_pk_two"), userId: alice.id, credentialId: [4, 5, 6], expiresAt: now.addingTimeInterval(3600))

        try f.recovery.cancel(token: .object([("cancelToken", "lkcan_pk_one")]))
        let t = f.tables.snapshot
        #expect(t.revokedCredentials == [[1, 2, 3]])
        #expect(t.families[held.record.familyId]?.revokedAt != nil && t.families[other.record.familyId]?.revokedAt == nil)
        #expect(f.revoked.contains(held.record.familyId))
        #expect(t.events.filter { $0.type == .sessionRevoked }.map(\.key) == [held.record.familyId])
        #expect(t.audit.last?.action == "passkey.revoked")
        #expect(refusal { try f.recovery.cancel(token: .object([("cancelToken", "lkcan_pk_one")])) } == .notFound)

        // The second passkey's hold is over: its link undoes nothing, and is left unused.
        f.clock.advance(61)
        #expect(refusal { try f.recovery.cancel(token: .object([("cancelToken", "lkcan_pk_two")])) } == .notFound)
        #expect(f.tables.snapshot.cancelTokens.first { $0.credentialId == [4, 5, 6] }?.usedAt == nil)
        #expect(!f.tables.snapshot.revokedCredentials.contains([4, 5, 6]))
    }

    @Test("recovery codes: ten, shown once, each good once, behind a step-up that is used up")
    func recoveryCodes() throws {
        let f = try ServiceFixture()
        let alice = f.tables.addUser("alice")
        let caller = SessionService.Caller(userId: alice.id, sessionId: "s")
        let approval = Self.receipt(f, userId: alice.id)
        let codes = try f.recovery.createRecoveryCodes(caller, redeeming: approval).codes
        #expect(codes.count == 10 && Set(codes).count == 10)
        #expect(codes.allSatisfy { $0.wholeMatch(of: #/[a-z2-9]{4}-[a-z2-9]{4}-[a-z2-9]{4}/#) != nil })
        #expect(try f.recovery.accountState(caller).recoveryCodesLeft == 10)
        // The approval is used up: the same one again changes nothing.
        #expect(refusal { _ = try f.recovery.createRecoveryCodes(caller, redeeming: approval) } == .stepUpRequired)
        #expect(f.tables.snapshot.recoveryCodes.count == 10)

        // Typed in upper case with spaces: still the code.
        let started = try f.recovery.verifyRecovery(body: Self.body([("username", "alice"), ("recoveryCode", codes[3].uppercased().replacingOccurrences(of: "-", with: " "))]))
        #expect(started.token.hasPrefix("lkrec_"))
        #expect(refusal { _ = try f.recovery.verifyRecovery(body: Self.body([("username", "alice"), ("recoveryCode", codes[3])])) } == .codeInvalid)
        #expect(try f.recovery.accountState(caller).recoveryCodesLeft == 9)
        // Another account's code, or an unknown username: the same refusal.
        _ = f.tables.addUser("bob")
        #expect(refusal { _ = try f.recovery.verifyRecovery(body: Self.body([("username", "bob"), ("recoveryCode", codes[4])])) } == .codeInvalid)
        #expect(refusal { _ = try f.recovery.verifyRecovery(body: Self.body([("username", "nobody"), ("recoveryCode", codes[4])])) } == .codeInvalid)
        // No address: no notice, no cancel link, and the recovery still starts.
        #expect(f.mail.all.isEmpty)

        // New codes replace the old ones.
        let fresh = try f.recovery.createRecoveryCodes(caller, redeeming: Self.receipt(f, userId: alice.id, jti: "second")).codes
        #expect(fresh.count == 10)
        #expect(refusal { _ = try f.recovery.verifyRecovery(body: Self.body([("username", "alice"), ("recoveryCode", codes[5])])) } == .codeInvalid)
    }

    @Test("ten wrong recovery codes a day per username; a right one gives its count back")
    func wrongRecoveryCodesLimit() throws {
        let f = try ServiceFixture()
        let alice = f.tables.addUser("alice")
        let codes = try f.recovery.createRecoveryCodes(SessionService.Caller(userId: alice.id, sessionId: "s"),
                                                       redeeming: Self.receipt(f, userId: alice.id)).codes
        let wrong = Self.body([("username", "alice"), ("recoveryCode", "aaaa-aaaa-aaaa")])
        for _ in 0..<(RecoveryService.wrongRecoveryCodesPerDay - 1) { #expect(refusal { _ = try f.recovery.verifyRecovery(body: wrong) } == .codeInvalid) }
        _ = try f.recovery.verifyRecovery(body: Self.body([("username", "alice"), ("recoveryCode", codes[0])]))
        #expect(refusal { _ = try f.recovery.verifyRecovery(body: wrong) } == .codeInvalid)
        // Past the limit even a right code is refused, until the day's window ends.
        #expect(refusal { _ = try f.recovery.verifyRecovery(body: Self.body([("username", "alice"), ("recoveryCode", codes[1])])) } == .rateLimited)
        f.clock.advance(86400)
        _ = try f.recovery.verifyRecovery(body: Self.body([("username", "alice"), ("recoveryCode", codes[1])]))
    }

    @Test("email sign-in: a known address gets a code that starts an email session; an unknown one the same answer and no mail")
    func emailSignIn() throws {
        let f = try ServiceFixture()
        let alice = f.tables.addUser("alice", email: "alice@example.org")
        let known = try f.recovery.startEmailSignIn(body: Self.body([("email", "alice@example.org")]))
        let unknown = try f.recovery.startEmailSignIn(body: Self.body([("email", "nobody@example.org")]))
        #expect(RecoveryRenderer.challenge(known).objectMembers?.map(\.key) == RecoveryRenderer.challenge(unknown).objectMembers?.map(\.key))
        #expect(known.expiresAt == unknown.expiresAt)
        #expect(f.tables.snapshot.mail.map(\.recipient) == ["alice@example.org"])
        let code = try f.mailedCode(.emailSignIn, to: "alice@example.org")
        // A recovery code's challenge is not a sign-in one.
        let id = known.id
        #expect(refusal { _ = try f.recovery.verifyRecovery(body: Self.body([("challengeId", id), ("code", code)])) } == .challengeInvalid)

        let signedIn = try f.recovery.verifyEmailSignIn(body: Self.body([("challengeId", id), ("code", code)]))
        #expect(signedIn.user.id == alice.id)
        let access = signedIn.tokens.accessToken
        #expect(RecoveryRenderer.signIn(signedIn)["tokens"]?["access_token"]?.stringValue == access)
        let caller = try f.sessions.session(accessToken: access)
        #expect(caller.userId == alice.id && caller.acr == AuthenticationClaims.emailOTP.acr)
        #expect(try f.sessions.list(caller).sessions.first?.method == .email)
        #expect(refusal { _ = try f.recovery.verifyEmailSignIn(body: Self.body([("challengeId", id), ("code", code)])) } == .challengeInvalid)
        // Switched off: 404.
        let off = try ServiceFixture { $0.emailSignIn = false }
        #expect(refusal { _ = try off.recovery.startEmailSignIn(body: Self.body([("email", "alice@example.org")])) } == .notFound)
    }

    @Test("verifying a new address uses up the sign-in codes mailed to the old one and tells the old one")
    func addressChangeEndsOldCodes() throws {
        let f = try ServiceFixture()
        let alice = f.tables.addUser("alice", email: "old@example.org")
        let caller = SessionService.Caller(userId: alice.id, sessionId: "s")
        let signIn = try f.recovery.startEmailSignIn(body: Self.body([("email", "old@example.org")])).id
        let oldCode = try f.mailedCode(.emailSignIn, to: "old@example.org")
        let id = try f.recovery.startVerification(caller, body: Self.body([("email", "new@example.org")]), redeeming: nil).id
        _ = try f.recovery.verifyEmail(caller, body: Self.body([("challengeId", id), ("code", try f.mailedCode(.emailVerify, to: "new@example.org"))]))
        #expect(f.mail.last(.emailChanged, to: "old@example.org") != nil)
        #expect(f.tables.snapshot.mail.contains { $0.recipient == "old@example.org" && $0.id == f.mail.last(.emailChanged, to: "old@example.org")?.id })
        #expect(refusal { _ = try f.recovery.verifyEmailSignIn(body: Self.body([("challengeId", signIn), ("code", oldCode)])) } == .challengeInvalid)

        // An address another account has verified is a conflict, and nothing changes.
        let bob = SessionService.Caller(userId: f.tables.addUser("bob").id, sessionId: "sb")
        let taken = try f.recovery.startVerification(bob, body: Self.body([("email", "new@example.org")]), redeeming: nil).id
        let code = try f.mailedCode(.emailVerify, to: "new@example.org")
        #expect(refusal { _ = try f.recovery.verifyEmail(bob, body: Self.body([("challengeId", taken), ("code", code)])) } == .conflict)
        #expect(try f.recovery.verifiedAddress(userId: bob.userId) == nil)
    }

    /// A step-up approval the store will redeem once.
    static func receipt(_ f: ServiceFixture, userId: String, jti: String = "first") -> StepUpRedemption {
        let r = StepUpRedemption(jti: jti, userId: userId, actionHash: Array("latchkey.recovery-codes.create".utf8))
        f.tables.addReceipt(r)
        return r
    }
}
