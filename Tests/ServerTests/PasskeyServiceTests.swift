import Crypto
import Foundation
import JSON
@testable import LatchkeyServer
@testable import Storage
import Testing
import WebAuthn
import WebAuthnTesting

/// `PasskeyService` as the server builds it, over `InMemoryPasskeyStore` and `InMemoryLoginStore`
/// and the in-memory sessions and recovery of `ServiceFixture` (mail on, a recovery delay of an
/// hour), with time on its `ManualClock`: no socket, no PostgreSQL. Registration is driven by the
/// software authenticator over the options' own challenge.
struct PasskeyWorld {
    static let origin = "https://" + ServiceFixture.rpId

    let f: ServiceFixture
    let store: InMemoryPasskeyStore
    let passkeys: PasskeyService

    init(configure: (inout Configuration) -> Void = { _ in }) throws {
        f = try ServiceFixture(configure: configure)
        let c = f.configuration
        store = InMemoryPasskeyStore(tables: f.tables)
        let logins = InMemoryLoginStore(tables: f.tables)
        let events = OutboxEvents(runtime: f.runtime, maxAgeSeconds: c.webhookMaxAge)
        let assertion = PasskeyAssertion(accounts: logins, keyCache: f.keyCache, events: events,
                                         onRegression: CredentialUse.OnRegression(c.signCountPolicy))
        let secrets = MemorySecrets()
        passkeys = PasskeyService(store: store, logins: logins,
                                  seal: CeremonySeal(kek: nil, keys: secrets, runtime: f.runtime, challengeTTL: c.challengeTTL),
                                  sessions: f.sessions, assertion: assertion, origins: FixedOrigins(origins: [Self.origin]), metrics: Metrics(),
                                  metadata: NoMetadata(), decoySecret: DeploymentSecret(name: "decoy-credentials", keys: secrets, runtime: f.runtime),
                                  events: events, recovery: f.recovery, mail: f.mail, relyingParty: RelyingParty(c), policy: CeremonyPolicy(c),
                                  runtime: f.runtime)
    }

    var tables: InMemoryTables { f.tables }
    var t: InMemoryTables.Tables { f.tables.snapshot }

    /// The verify body `authenticator` makes for `options`.
    func response(_ authenticator: SoftAuthenticator, _ options: CreationOptions, change: (inout RegistrationBuilder) -> Void = { _ in }) -> [UInt8] {
        authenticator.userHandle = options.user.id
        var builder = authenticator.registration(challenge: options.challenge, rpId: ServiceFixture.rpId, origin: Self.origin)
        change(&builder)
        return builder.bytes()
    }

    /// A new account made by a registration, with its passkey on the returned authenticator.
    @discardableResult
    func signUp(_ username: String, _ authenticator: SoftAuthenticator = SoftAuthenticator()) throws -> (userId: String, authenticator: SoftAuthenticator) {
        let options = try passkeys.registrationOptions(for: .newAccount(username: username, displayName: username))
        let signedIn = try passkeys.verifyRegistration(response(authenticator, options))
        return (signedIn.userId, authenticator)
    }

    /// An account set up directly, with a verified address when given and these passkeys (oldest first).
    func account(_ name: String, email: String? = nil, passkeys ids: [[UInt8]] = []) -> UserRecord {
        let user = tables.addUser(name, email: email)
        for (n, id) in ids.enumerated() {
            tables.setUp { (t, now) in
                t.credentials.append(Self.credential(id: id, userId: user.id, name: "key \(n)", createdAt: now.addingTimeInterval(Double(n - ids.count))))
            }
        }
        return user
    }

    static func credential(id: [UInt8], userId: String, name: String, createdAt: Date) -> CredentialRecord {
        CredentialRecord(id: id, userId: userId, publicKey: [], alg: -7, signCount: 0, aaguid: Array(repeating: 0, count: 16), transports: ["usb"],
                         backupEligible: false, backedUp: false, attestationFormat: "none", attestationType: "none", name: name, flagged: false,
                         createdAt: createdAt, lastUsedAt: nil, approvesFrom: nil, hardwareBound: false)
    }

    /// A live session the passkey `credentialId` began.
    func session(_ id: String, of user: UserRecord, passkey credentialId: [UInt8]?) {
        tables.setUp { (t, now) in
            t.families[id] = InMemoryTables.Family(id: id, userId: user.id, method: .passkey, credentialId: credentialId, authTime: now,
                                                   createdAt: now, lastUsedAt: now, browser: false)
        }
    }

    /// A recovery of `user`, pending, whose delay has passed.
    func dueRecovery(_ id: String, of user: UserRecord) -> RecoveryRecord {
        let now = f.clock.now()
        let record = RecoveryRecord(id: id, userId: user.id, method: .email, notBefore: now.addingTimeInterval(-60),
                                    expiresAt: now.addingTimeInterval(3600), status: .pending)
        tables.setUp { (t, now) in t.recoveries[id] = InMemoryTables.Recovery(record: record, tokenHash: Array(id.utf8), createdAt: now) }
        return record
    }

    func live(_ userId: String) -> [[UInt8]] { InMemoryLoginStore.live(of: userId, in: t).map(\.id) }

    /// The answer's `signalAllAcceptedCredentials` ids.
    static func accepted(_ signedIn: PasskeyService.SignedIn) -> [String]? {
        signedIn.signals.credentialIds.map(Base64URL.encode)
    }
}

@Suite struct PasskeyServiceTests {
    // MARK: Registration: a new account

    @Test func aSignUpWritesNothingUntilItsVerifyThenTheAccountPasskeyAndSessionInOneChange() throws {
        let w = try PasskeyWorld()
        let authenticator = SoftAuthenticator()
        let options = try w.passkeys.registrationOptions(for: .newAccount(username: "alice", displayName: "Alice A."))
        #expect(options.user.name == "alice" && options.user.displayName == "Alice A." && options.user.id.count == 32)
        #expect(options.excludeCredentials.isEmpty && options.rp.id == ServiceFixture.rpId)
        // Options write nothing: the account exists only in the sealed challenge.
        #expect(w.t.users.isEmpty && w.t.usedChallenges.isEmpty)
        let signedIn = try w.passkeys.verifyRegistration(w.response(authenticator, options), language: "de")
        let t = w.t
        let user = try #require(t.users[signedIn.userId])
        #expect(user.username == "alice" && user.displayName == "Alice A." && user.userHandle == options.user.id)
        #expect(w.live(user.id) == [authenticator.credentialId])
        #expect(t.registrationDigests[authenticator.credentialId] != nil)
        #expect(t.usedChallenges.count == 1)
        let family = try #require(t.families.values.first)
        #expect(t.families.count == 1 && family.userId == user.id && family.credentialId == authenticator.credentialId && family.method == .passkey)
        #expect(t.audit.map(\.action) == [AuditAction.passkeyRegistered.rawValue])
        #expect(t.events.map(\.type) == [.userCreated, .passkeyCreated])
        #expect(t.languages[user.id] == "de")
        // A new account has no verified address: no notice.
        #expect(t.mail.isEmpty)
        #expect(signedIn.user.username == "alice")
        #expect(signedIn.tokens.refreshToken.hasPrefix("lkr_"))
        #expect(signedIn.signals.credentialIds == [authenticator.credentialId])
    }

    @Test func optionsForATakenUsernameAreRefused() throws {
        let w = try PasskeyWorld()
        try w.signUp("bob")
        expectRefusal(.conflict) { try w.passkeys.registrationOptions(for: .newAccount(username: "bob", displayName: "bob")) }
    }

    @Test func ofTwoSignUpsForOneUsernameOpenedTogetherTheSecondLosesAtItsVerify() throws {
        let w = try PasskeyWorld()
        let first = try w.passkeys.registrationOptions(for: .newAccount(username: "carol", displayName: "carol"))
        let second = try w.passkeys.registrationOptions(for: .newAccount(username: "carol", displayName: "carol"))
        _ = try w.passkeys.verifyRegistration(w.response(SoftAuthenticator(), first))
        let late = SoftAuthenticator()
        expectRefusal(.conflict) { try w.passkeys.verifyRegistration(w.response(late, second)) }
        // The losing verify used its challenge up and wrote nothing else.
        let t = w.t
        #expect(t.users.count == 1 && t.usedChallenges.count == 2 && !t.credentials.contains { $0.id == late.credentialId })
    }

    @Test func aUsernameTakenBetweenTheReadAndTheWriteRollsBackToTheChallengesUseAlone() throws {
        let w = try PasskeyWorld()
        let options = try w.passkeys.registrationOptions(for: .newAccount(username: "dora", displayName: "dora"))
        let challenge = try w.passkeys.openRegistration(options.challenge)
        // The store's own rule, as the unique constraint: the statement is undone, the challenge recorded used.
        w.tables.addUser("dora")
        let registration = NewRegistration(
            newUser: UserRecord(id: "usr_other", userHandle: options.user.id, username: "dora", displayName: "dora"),
            credential: PasskeyWorld.credential(id: [9, 9], userId: "usr_other", name: "k", createdAt: w.f.clock.now()),
            session: w.f.sessions.prepare(userId: "usr_other", credentialId: [9, 9]).record,
            audit: AuditRecord(.passkeyRegistered, actor: "usr_other", subject: "usr_other", detail: []))
        #expect(throws: StorageError.conflict(.usernameTaken)) {
            try w.store.finishRegistration(UsedChallenge(id: challenge.id, expiresAt: challenge.expiresAt), .register(registration))
        }
        let t = w.t
        #expect(t.usedChallenges[challenge.id] != nil && t.users["usr_other"] == nil && t.credentials.isEmpty && t.families.isEmpty)
    }

    // MARK: Registration: the challenge

    @Test func aChallengeIsSingleUseAndItsOwnResponseRetriedIsNamedNotRegisteredTwice() throws {
        let w = try PasskeyWorld()
        let authenticator = SoftAuthenticator()
        let options = try w.passkeys.registrationOptions(for: .newAccount(username: "erin", displayName: "erin"))
        let body = w.response(authenticator, options)
        _ = try w.passkeys.verifyRegistration(body)
        // The very same response again (an answer lost after commit): 409 naming the stored passkey, no second session.
        do {
            _ = try w.passkeys.verifyRegistration(body)
            Issue.record("a retried registration registered again")
        } catch {
            #expect(error.code == .credentialExists)
            guard case .savedPasskey(let passkey)? = error.attachment else { Issue.record("no passkey named: \(error)"); return }
            #expect(passkey.record.id == authenticator.credentialId)
        }
        // Another authenticator's response over the used challenge: challenge_invalid.
        expectRefusal(.challengeInvalid) { try w.passkeys.verifyRegistration(w.response(SoftAuthenticator(), options)) }
        let t = w.t
        #expect(t.users.count == 1 && t.credentials.count == 1 && t.families.count == 1 && t.usedChallenges.count == 1)
    }

    @Test func anExpiredOrForgedChallengeIsRefusedWritingNothing() throws {
        let w = try PasskeyWorld()
        let options = try w.passkeys.registrationOptions(for: .newAccount(username: "fay", displayName: "fay"))
        let forged = w.response(SoftAuthenticator(), options) { $0.clientData.challenge = SecureRandom.bytes(options.challenge.count) }
        expectRefusal(.challengeInvalid) { try w.passkeys.verifyRegistration(forged) }
        w.f.clock.advance(Double(w.f.configuration.challengeTTL) + 1)
        expectRefusal(.challengeInvalid) { try w.passkeys.verifyRegistration(w.response(SoftAuthenticator(), options)) }
        let t = w.t
        #expect(t.usedChallenges.isEmpty && t.users.isEmpty && t.credentials.isEmpty && t.audit.isEmpty)
    }

    @Test func aResponseTheCeremonyRefusesUsesTheChallengeUpAndStoresNothing() throws {
        let w = try PasskeyWorld()
        let options = try w.passkeys.registrationOptions(for: .newAccount(username: "gus", displayName: "gus"))
        let body = w.response(SoftAuthenticator(), options) { $0.clientData.origin = "https://elsewhere.example" }
        expectRefusal(.originNotAllowed) { try w.passkeys.verifyRegistration(body) }
        let t = w.t
        #expect(t.usedChallenges.count == 1 && t.users.isEmpty && t.credentials.isEmpty && t.families.isEmpty)
        // The challenge is spent: a correct response afterwards is refused too.
        expectRefusal(.challengeInvalid) { try w.passkeys.verifyRegistration(w.response(SoftAuthenticator(), options)) }
    }

    // MARK: Registration: another passkey for an account

    @Test func anotherPasskeyExcludesTheAccountsOwnAndTellsTheVerifiedAddress() throws {
        let w = try PasskeyWorld()
        let user = w.account("hana", email: "hana@example.org", passkeys: [[1, 1], [2, 2]])
        w.tables.setUp { (t, _) in t.languages[user.id] = "fr" }
        let options = try w.passkeys.registrationOptions(for: .user(user.id, held: .notHeld, redeeming: nil))
        #expect(options.excludeCredentials.map(\.id) == [[1, 1], [2, 2]])
        #expect(options.user.id == user.userHandle)
        let authenticator = SoftAuthenticator()
        let signedIn = try w.passkeys.verifyRegistration(w.response(authenticator, options))
        #expect(signedIn.userId == user.id)
        #expect(w.live(user.id) == [[1, 1], [2, 2], authenticator.credentialId])
        let notice = try #require(w.f.mail.last(.passkeyAdded, to: "hana@example.org"))
        #expect(notice.userId == user.id)
        #expect(w.t.mail.map(\.recipient) == ["hana@example.org"])
        // Not held: no hold, no cancel link.
        #expect(w.t.credentials.last?.approvesFrom == nil && w.t.cancelTokens.isEmpty)
        // The signals list every live id, the new one last.
        #expect(PasskeyWorld.accepted(signedIn) == [[1, 1], [2, 2], authenticator.credentialId].map(Base64URL.encode))
    }

    @Test func anExcludedCredentialIsRefusedAndARevokedIdCannotComeBack() throws {
        let w = try PasskeyWorld()
        let (userId, authenticator) = try w.signUp("ines")
        let options = try w.passkeys.registrationOptions(for: .user(userId, held: .notHeld, redeeming: nil))
        #expect(options.excludeCredentials.map(\.id) == [authenticator.credentialId])
        expectRefusal(.credentialExists) { try w.passkeys.verifyRegistration(w.response(authenticator, options)) }
        #expect(w.t.credentials.count == 1 && w.t.usedChallenges.count == 2)
        // Revoked, the id is still known: it cannot be registered again.
        w.tables.setUp { (t, _) in t.revokedCredentials.insert(authenticator.credentialId) }
        let again = try w.passkeys.registrationOptions(for: .user(userId, held: .notHeld, redeeming: nil))
        #expect(again.excludeCredentials.isEmpty)
        expectRefusal(.credentialExists) { try w.passkeys.verifyRegistration(w.response(authenticator, again)) }
        #expect(w.t.credentials.count == 1)
    }

    @Test func aHeldPasskeyApprovesFromItsHoldAndItsNoticeCarriesTheCancelLink() throws {
        let w = try PasskeyWorld()
        let user = w.account("jack", email: "jack@example.org", passkeys: [[3, 3]])
        let options = try w.passkeys.registrationOptions(for: .user(user.id, held: .held, redeeming: nil))
        let authenticator = SoftAuthenticator()
        _ = try w.passkeys.verifyRegistration(w.response(authenticator, options))
        let stored = try #require(w.t.credentials.first { $0.id == authenticator.credentialId })
        let hold = w.f.clock.now().addingTimeInterval(3600)
        #expect(stored.approvesFrom.map { abs($0.timeIntervalSince(hold)) < 1 } == true)
        let token = try #require(w.t.cancelTokens.first)
        #expect(w.t.cancelTokens.count == 1 && token.credentialId == authenticator.credentialId && token.userId == user.id)
        #expect(try #require(w.f.mail.last(.passkeyAdded, to: "jack@example.org")).text.contains("cancel="))
    }

    @Test func aFullAccountGetsNoOptions() throws {
        let w = try PasskeyWorld { $0.maxPasskeys = 2 }
        let user = w.account("kate", passkeys: [[4, 4], [5, 5]])
        expectRefusal(.conflict) { try w.passkeys.registrationOptions(for: .user(user.id, held: .notHeld, redeeming: nil)) }
        expectRefusal(.unauthorized) { try w.passkeys.registrationOptions(for: .user("usr_gone", held: .notHeld, redeeming: nil)) }
    }

    @Test func anAccountGoneBetweenOptionsAndVerifyRegistersNothing() throws {
        let w = try PasskeyWorld()
        let user = w.account("leo", passkeys: [[6, 6]])
        let options = try w.passkeys.registrationOptions(for: .user(user.id, held: .notHeld, redeeming: nil))
        w.tables.setUp { (t, _) in t.users[user.id] = nil }
        expectRefusal(.challengeInvalid) { try w.passkeys.verifyRegistration(w.response(SoftAuthenticator(), options)) }
        #expect(w.t.credentials.count == 1 && w.t.usedChallenges.count == 1 && w.t.families.isEmpty)
    }

    // MARK: Registration: the step-up, the ticket, the recovery

    @Test func theStepUpTheOptionsCheckedIsRedeemedByTheVerifyOnce() throws {
        let w = try PasskeyWorld()
        let user = w.account("mia", passkeys: [[7, 7]])
        let stepUp = StepUpRedemption(jti: "jti-add", userId: user.id, actionHash: Array(repeating: 1, count: 32))
        w.tables.addReceipt(stepUp, approver: [7, 7])
        let options = try w.passkeys.registrationOptions(for: .user(user.id, held: .notHeld, redeeming: stepUp))
        // Checked, not redeemed, by the options.
        #expect(w.t.receipts["jti-add"]?.consumed == false)
        _ = try w.passkeys.verifyRegistration(w.response(SoftAuthenticator(), options))
        #expect(w.t.receipts["jti-add"]?.consumed == true && w.live(user.id).count == 2)
        // Used: new options presenting it are refused.
        expectRefusal(.stepUpRequired) { try w.passkeys.registrationOptions(for: .user(user.id, held: .notHeld, redeeming: stepUp)) }
    }

    @Test func aStepUpUsedBetweenOptionsAndVerifyLeavesOnlyTheChallengesUse() throws {
        let w = try PasskeyWorld()
        let user = w.account("ned", passkeys: [[8, 8]])
        let stepUp = StepUpRedemption(jti: "jti-race", userId: user.id, actionHash: Array(repeating: 2, count: 32))
        w.tables.addReceipt(stepUp)
        let first = try w.passkeys.registrationOptions(for: .user(user.id, held: .notHeld, redeeming: stepUp))
        let second = try w.passkeys.registrationOptions(for: .user(user.id, held: .notHeld, redeeming: stepUp))
        _ = try w.passkeys.verifyRegistration(w.response(SoftAuthenticator(), first))
        let late = SoftAuthenticator()
        expectRefusal(.stepUpRequired) { try w.passkeys.verifyRegistration(w.response(late, second)) }
        #expect(!w.t.credentials.contains { $0.id == late.credentialId } && w.t.usedChallenges.count == 2 && w.t.families.count == 1)
    }

    @Test func aStepUpWhoseApprovingPasskeyWasRevokedApprovesNothing() throws {
        let w = try PasskeyWorld()
        let user = w.account("olga", passkeys: [[10, 10], [11, 11]])
        let stepUp = StepUpRedemption(jti: "jti-dead", userId: user.id, actionHash: Array(repeating: 3, count: 32))
        w.tables.addReceipt(stepUp, approver: [10, 10])
        w.tables.setUp { (t, _) in t.revokedCredentials.insert([10, 10]) }
        expectRefusal(.stepUpRequired) { try w.passkeys.registrationOptions(for: .user(user.id, held: .notHeld, redeeming: stepUp)) }
        // Another user's step-up is not this account's either.
        let other = StepUpRedemption(jti: "jti-other", userId: "usr_someone", actionHash: Array(repeating: 3, count: 32))
        w.tables.addReceipt(other)
        expectRefusal(.stepUpRequired) { try w.passkeys.registrationOptions(for: .user(user.id, held: .notHeld, redeeming: other)) }
    }

    @Test func anEnrolmentTicketIsUsedUpByTheVerifyAndHoldsWhenTheAccountHasAPasskey() throws {
        let w = try PasskeyWorld()
        let fresh = w.account("pia")
        let ticket = EnrolmentTicket(hash: Array(repeating: 5, count: 32), userId: fresh.id, holds: false)
        w.tables.addTicket(ticket, expiresAt: w.f.clock.now().addingTimeInterval(600))
        let first = try w.passkeys.registrationOptions(for: .ticket(ticket))
        let second = try w.passkeys.registrationOptions(for: .ticket(ticket))
        let authenticator = SoftAuthenticator()
        _ = try w.passkeys.verifyRegistration(w.response(authenticator, first))
        // An account without a passkey: not held.
        #expect(w.t.credentials.first { $0.id == authenticator.credentialId }?.approvesFrom == nil)
        #expect(w.t.tickets.first?.used == true)
        // Used: the other ceremony it started registers nothing.
        let late = SoftAuthenticator()
        expectRefusal(.challengeInvalid) { try w.passkeys.verifyRegistration(w.response(late, second)) }
        #expect(!w.t.credentials.contains { $0.id == late.credentialId })
        // A ticket for an account that has a passkey holds the new one.
        let ticket2 = EnrolmentTicket(hash: Array(repeating: 6, count: 32), userId: fresh.id, holds: false)
        w.tables.addTicket(ticket2, expiresAt: w.f.clock.now().addingTimeInterval(600))
        let held = SoftAuthenticator()
        _ = try w.passkeys.verifyRegistration(w.response(held, try w.passkeys.registrationOptions(for: .ticket(ticket2))))
        #expect(w.t.credentials.first { $0.id == held.credentialId }?.approvesFrom != nil)
    }

    @Test func aRecoveryRegistrationCompletesTheRecoveryEndingEverySessionAndOtherRecoveries() throws {
        let w = try PasskeyWorld()
        let user = w.account("quin", email: "quin@example.org", passkeys: [[12, 12]])
        w.session("fam_old", of: user, passkey: [12, 12])
        let recovery = w.dueRecovery("rec_1", of: user)
        _ = w.dueRecovery("rec_2", of: user)
        let options = try w.passkeys.registrationOptions(for: .recovery(recovery))
        let authenticator = SoftAuthenticator()
        let signedIn = try w.passkeys.verifyRegistration(w.response(authenticator, options))
        let t = w.t
        #expect(t.recoveries["rec_1"]?.record.status == .completed && t.recoveries["rec_2"]?.record.status == .cancelled)
        #expect(t.families["fam_old"]?.revokedAt != nil)
        let new = try #require(t.families.values.first { $0.credentialId == authenticator.credentialId })
        #expect(new.method == .recovery && new.revokedAt == nil)
        // LATCHKEY_RECOVERY_REVOKES=new (the default): the old passkey stays.
        #expect(w.live(user.id) == [[12, 12], authenticator.credentialId])
        #expect(t.events.map(\.type).contains(.recoveryCompleted) && t.events.map(\.type).contains(.recoveryCancelled))
        #expect(t.events.contains { $0.type == .sessionRevoked && $0.key == "fam_old" })
        #expect(t.audit.map(\.action).contains(AuditAction.recoveryCompleted.rawValue))
        #expect(signedIn.userId == user.id)
    }

    @Test func underRecoveryRevokesAllTheOldPasskeysGoWithTheCompletion() throws {
        let w = try PasskeyWorld { $0.recoveryRevokesPasskeys = true }
        let user = w.account("rosa", passkeys: [[13, 13], [14, 14]])
        let options = try w.passkeys.registrationOptions(for: .recovery(w.dueRecovery("rec_all", of: user)))
        let authenticator = SoftAuthenticator()
        let signedIn = try w.passkeys.verifyRegistration(w.response(authenticator, options))
        #expect(w.live(user.id) == [authenticator.credentialId])
        #expect(w.t.revokedCredentials == [[13, 13], [14, 14]])
        // The signals name only what is left: the new passkey.
        #expect(PasskeyWorld.accepted(signedIn) == [Base64URL.encode(authenticator.credentialId)])
    }

    @Test func aRecoveryCancelledBeforeTheVerifyRegistersNothing() throws {
        let w = try PasskeyWorld()
        let user = w.account("sam", passkeys: [[15, 15]])
        w.session("fam_keep", of: user, passkey: [15, 15])
        let recovery = w.dueRecovery("rec_gone", of: user)
        let options = try w.passkeys.registrationOptions(for: .recovery(recovery))
        w.tables.setUp { (t, _) in t.recoveries["rec_gone"]?.record = recovery.with(status: .cancelled) }
        let late = SoftAuthenticator()
        expectRefusal(.unauthorized) { try w.passkeys.verifyRegistration(w.response(late, options)) }
        let t = w.t
        #expect(!t.credentials.contains { $0.id == late.credentialId } && t.families["fam_keep"]?.revokedAt == nil && t.usedChallenges.count == 1)
    }

    // MARK: The list and rename

    @Test func theListShowsTheLivePasskeysOldestFirstWithTheSignals() throws {
        let w = try PasskeyWorld()
        let user = w.account("tom", passkeys: [[16, 16], [17, 17], [18, 18]])
        w.tables.setUp { (t, _) in t.revokedCredentials.insert([17, 17]) }
        let list = try w.passkeys.listPasskeys(userId: user.id)
        #expect(list.passkeys.map(\.record.id) == [[16, 16], [18, 18]])
        #expect(list.signals.credentialIds == [[16, 16], [18, 18]] && list.signals.user.id == user.id && list.signals.rpId == ServiceFixture.rpId)
        expectRefusal(.unauthorized) { try w.passkeys.listPasskeys(userId: "usr_nobody") }
    }

    @Test func aRenameChangesOneLivePasskeyOfTheCallerAndReportsIt() throws {
        let w = try PasskeyWorld()
        let user = w.account("vic", passkeys: [[19, 19], [20, 20]])
        let other = w.account("wes", passkeys: [[21, 21]])
        let renamed = try w.passkeys.renamePasskey(userId: user.id, credentialId: [20, 20], name: "Laptop")
        #expect(renamed.passkey.record.name == "Laptop" && renamed.signals.credentialIds == [[19, 19], [20, 20]])
        #expect(w.t.credentials.first { $0.id == [20, 20] }?.name == "Laptop")
        #expect(w.t.events.map(\.type) == [.passkeyRenamed])
        // Another account's passkey, or a revoked one: not found, nothing written.
        expectRefusal(.notFound) { try w.passkeys.renamePasskey(userId: user.id, credentialId: [21, 21], name: "mine") }
        w.tables.setUp { (t, _) in t.revokedCredentials.insert([19, 19]) }
        expectRefusal(.notFound) { try w.passkeys.renamePasskey(userId: user.id, credentialId: [19, 19], name: "old") }
        #expect(w.t.credentials.first { $0.id == [21, 21] }?.name == "key 0" && w.t.events.count == 1)
        _ = other
    }

    // MARK: Revocation

    @Test func aRevocationEndsTheSessionsItBeganTellsTheAddressAndAnswersWhatRemains() throws {
        let w = try PasskeyWorld()
        let user = w.account("xena", email: "xena@example.org", passkeys: [[22, 22], [23, 23]])
        w.tables.setUp { (t, _) in t.languages[user.id] = "de" }
        w.session("fam_a", of: user, passkey: [22, 22])
        w.session("fam_b", of: user, passkey: [23, 23])
        let loaded = try w.passkeys.refuseLastWayIn(userId: user.id, credentialId: [22, 22])
        #expect(loaded.read.ways.known && loaded.read.ways.otherPasskey && loaded.read.email == "xena@example.org" && loaded.read.language == "de")
        let remaining = try w.passkeys.revokePasskey(userId: user.id, credentialId: [22, 22], loaded: loaded)
        #expect(remaining.credentialIds == [[23, 23]] && remaining.user.id == user.id)
        let t = w.t
        #expect(t.revokedCredentials == [[22, 22]])
        #expect(t.families["fam_a"]?.revokedAt != nil && t.families["fam_b"]?.revokedAt == nil)
        #expect(t.audit.map(\.action) == [AuditAction.passkeyRevoked.rawValue])
        #expect(t.events.filter { $0.type == .passkeyRevoked }.count == 1)
        #expect(t.events.contains { $0.type == .sessionRevoked && $0.key == "fam_a" })
        #expect(!t.events.contains { $0.type == .sessionRevoked && $0.key == "fam_b" })
        // The notice goes to the verified address in the account's language (German, not English).
        let notice = try #require(w.f.mail.last(.passkeyRevoked, to: "xena@example.org"))
        #expect(notice.subject != MailCatalog(language: nil)[.revokedSubject] && notice.subject == MailCatalog(language: "de")[.revokedSubject])
        #expect(t.mail.map(\.recipient) == ["xena@example.org"])
    }

    @Test func theLastWayInIsRefusedBeforeTheStepUpAndByTheStatement() throws {
        let w = try PasskeyWorld()
        let user = w.account("yara", passkeys: [[24, 24]])
        w.session("fam_y", of: user, passkey: [24, 24])
        expectRefusal(.lastPasskey) { try w.passkeys.refuseLastWayIn(userId: user.id, credentialId: [24, 24]) }
        // Even without the guard's check, the statement refuses it.
        expectRefusal(.lastPasskey) { try w.passkeys.revokePasskey(userId: user.id, credentialId: [24, 24]) }
        let t = w.t
        #expect(t.revokedCredentials.isEmpty && t.families["fam_y"]?.revokedAt == nil && t.audit.isEmpty && t.events.isEmpty && t.mail.isEmpty)
    }

    @Test func aRecoveryCodeOrAnAddressWithMailKeepsAWayIn() throws {
        // An unused recovery code is a way in.
        let w = try PasskeyWorld()
        let coded = w.account("zoe", passkeys: [[25, 25]])
        w.tables.setUp { (t, _) in t.recoveryCodes.append(InMemoryTables.RecoveryCode(userId: coded.id, hash: [1], usedAt: nil)) }
        _ = try w.passkeys.revokePasskey(userId: coded.id, credentialId: [25, 25], loaded: try w.passkeys.refuseLastWayIn(userId: coded.id, credentialId: [25, 25]))
        #expect(w.t.revokedCredentials == [[25, 25]])
        // A used one is not.
        let used = w.account("abe", passkeys: [[26, 26]])
        w.tables.setUp { (t, now) in t.recoveryCodes.append(InMemoryTables.RecoveryCode(userId: used.id, hash: [2], usedAt: now)) }
        expectRefusal(.lastPasskey) { try w.passkeys.revokePasskey(userId: used.id, credentialId: [26, 26]) }
        // A verified address counts while mail is on...
        let mailed = w.account("bea", email: "bea@example.org", passkeys: [[27, 27]])
        _ = try w.passkeys.revokePasskey(userId: mailed.id, credentialId: [27, 27])
        #expect(w.t.revokedCredentials.contains([27, 27]))
        // ...and not in a deployment without email recovery.
        let off = try PasskeyWorld { $0.smtpURL = nil }
        let unmailed = off.account("cal", email: "cal@example.org", passkeys: [[28, 28]])
        expectRefusal(.lastPasskey) { try off.passkeys.refuseLastWayIn(userId: unmailed.id, credentialId: [28, 28]) }
        expectRefusal(.lastPasskey) { try off.passkeys.revokePasskey(userId: unmailed.id, credentialId: [28, 28]) }
        #expect(off.t.revokedCredentials.isEmpty)
    }

    @Test func anUnknownRevokedOrAnotherAccountsPasskeyIsNotFound() throws {
        let w = try PasskeyWorld()
        let user = w.account("dan", passkeys: [[29, 29], [30, 30]])
        _ = w.account("eve", passkeys: [[31, 31], [32, 32]])
        expectRefusal(.notFound) { try w.passkeys.revokePasskey(userId: user.id, credentialId: [99]) }
        expectRefusal(.notFound) { try w.passkeys.revokePasskey(userId: user.id, credentialId: [31, 31]) }
        _ = try w.passkeys.revokePasskey(userId: user.id, credentialId: [29, 29])
        expectRefusal(.notFound) { try w.passkeys.revokePasskey(userId: user.id, credentialId: [29, 29]) }
        // An unknown passkey is no last way in: the guard lets it through to the 404.
        #expect(try !w.passkeys.refuseLastWayIn(userId: user.id, credentialId: [99]).read.ways.known)
        #expect(w.t.revokedCredentials == [[29, 29]] && w.t.audit.count == 1)
    }

    @Test func aRevocationsStepUpIsRedeemedOnceAndOnlyWithTheRevocation() throws {
        let w = try PasskeyWorld()
        let user = w.account("fin", passkeys: [[33, 33], [34, 34], [35, 35]])
        let stepUp = StepUpRedemption(jti: "jti-rev", userId: user.id, actionHash: Array(repeating: 4, count: 32))
        w.tables.addReceipt(stepUp, approver: [33, 33])
        // A refused revocation (no such passkey) leaves the step-up unused.
        expectRefusal(.notFound) { try w.passkeys.revokePasskey(userId: user.id, credentialId: [98], redeeming: stepUp) }
        #expect(w.t.receipts["jti-rev"]?.consumed == false)
        // The approving passkey may revoke itself: judged live as it was before the change.
        _ = try w.passkeys.revokePasskey(userId: user.id, credentialId: [33, 33], redeeming: stepUp)
        #expect(w.t.receipts["jti-rev"]?.consumed == true && w.t.revokedCredentials == [[33, 33]])
        // Used: a second change with it is refused, and writes nothing.
        expectRefusal(.stepUpRequired) { try w.passkeys.revokePasskey(userId: user.id, credentialId: [34, 34], redeeming: stepUp) }
        #expect(w.t.revokedCredentials == [[33, 33]] && w.t.audit.count == 1)
    }

    @Test func aStepUpMadeByAPasskeyRevokedSinceApprovesNoRevocation() throws {
        let w = try PasskeyWorld()
        let user = w.account("gil", passkeys: [[36, 36], [37, 37], [38, 38]])
        let stepUp = StepUpRedemption(jti: "jti-stale", userId: user.id, actionHash: Array(repeating: 5, count: 32))
        w.tables.addReceipt(stepUp, approver: [36, 36])
        _ = try w.passkeys.revokePasskey(userId: user.id, credentialId: [36, 36])
        expectRefusal(.stepUpRequired) { try w.passkeys.revokePasskey(userId: user.id, credentialId: [37, 37], redeeming: stepUp) }
        #expect(w.t.revokedCredentials == [[36, 36]] && w.t.receipts["jti-stale"]?.consumed == false)
    }

    @Test func anAdminsRevocationIsAuditedAsTheAdminAndRedeemsTheAdminsApproval() throws {
        let w = try PasskeyWorld()
        let user = w.account("hal", email: "hal@example.org", passkeys: [[39, 39], [40, 40]])
        let approval = StepUpRedemption(jti: "jti-admin", userId: "usr_admin", actionHash: Array(repeating: 6, count: 32))
        w.tables.addReceipt(approval)
        let admin = AdminCaller(actor: "usr_admin", approval: AdminApproval(redemption: approval, receiptId: "rcp_1", actionHash: approval.actionHash))
        _ = try w.passkeys.revokePasskey(userId: user.id, credentialId: [40, 40], by: admin)
        let t = w.t
        #expect(t.receipts["jti-admin"]?.consumed == true && t.revokedCredentials == [[40, 40]])
        #expect(t.audit.first?.actor == "usr_admin" && t.audit.first?.subject == user.id)
        #expect(w.f.mail.last(.passkeyRevoked, to: "hal@example.org")?.text == MailCatalog(language: nil)[.revokedByAdminBody])
    }

    @Test func theGuardsReadIsTheOneTheRevocationUses() throws {
        let w = try PasskeyWorld()
        let user = w.account("ida", passkeys: [[41, 41], [42, 42]])
        // What the guard read reaches the notice without a second read: an address the tables do not
        // hold (the read is taken as it was) gets the mail.
        let loaded = LoadedRevocation(userId: user.id, credentialId: [41, 41], read: PasskeyRevocationRead(
            ways: WaysIn(known: true, otherPasskey: true, recoveryCode: false, verifiedAddress: true), email: "ida@example.org", language: nil))
        _ = try w.passkeys.revokePasskey(userId: user.id, credentialId: [41, 41], loaded: loaded)
        #expect(w.t.mail.map(\.recipient) == ["ida@example.org"])
        // A read for another passkey is not used: the revocation reads its own (no address: no mail).
        let stale = LoadedRevocation(userId: user.id, credentialId: [41, 41], read: loaded.read)
        w.tables.setUp { (t, _) in t.credentials.append(PasskeyWorld.credential(id: [43, 43], userId: user.id, name: "n", createdAt: t.credentials[0].createdAt)) }
        _ = try w.passkeys.revokePasskey(userId: user.id, credentialId: [42, 42], loaded: stale)
        #expect(w.t.mail.count == 1)
    }
}
