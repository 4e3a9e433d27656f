import Crypto
import Foundation
import JSON
@testable import LatchkeyServer
@testable import Storage
import Testing
import Tokens
import WebAuthn
import WebAuthnTesting

/// The passkey sign-in (`PasskeyLogin`) as the server builds it, over `InMemoryLoginStore` and the
/// in-memory sessions, with time on a `ManualClock` and seeded randomness: no socket, no
/// PostgreSQL. The ceremony-sealing key and the decoy secret come from memory (development mode:
/// no KEK), the origin allowlist is fixed and no metadata is loaded.
struct LoginWorld {
    static let rpId = "login.test"
    static let origin = "https://login.test"

    let clock = ManualClock(start: Date(timeIntervalSince1970: 1_800_000_000))
    let runtime: Runtime
    let tables: InMemoryTables
    let store: InMemoryLoginStore
    let configuration: Configuration
    let login: PasskeyLogin

    init(configure: (inout Configuration) -> Void = { _ in }) throws {
        var c = Configuration.serving(Self.rpId)
        configure(&c)
        configuration = c
        runtime = clock.runtime(random: SeededRandom(seed: 3401).bytes)
        tables = InMemoryTables(now: clock.now)
        store = InMemoryLoginStore(tables: tables)
        let sessionStore = InMemorySessionStore(tables: tables)
        let revoked = RevokedSessions(accessTokenTTL: c.accessTokenTTL, maxLag: c.revocationMaxLag, sessions: sessionStore, runtime: runtime)
        let signer = TokenSigner(source: MemorySigningKeys(), issuer: c.issuer, audience: c.rpId, clock: runtime.tokenClock)
        try signer.prepareKeys()
        let events = OutboxEvents(runtime: runtime, maxAgeSeconds: c.webhookMaxAge)
        let sessions = SessionService(sessions: sessionStore, signer: signer, lifetimes: .init(c), runtime: runtime, revoked: revoked, events: events)
        let assertion = PasskeyAssertion(accounts: store, keyCache: CredentialKeyCache(), events: events,
                                         onRegression: CredentialUse.OnRegression(c.signCountPolicy))
        let secrets = MemorySecrets()
        login = PasskeyLogin(logins: store, seal: CeremonySeal(kek: nil, keys: secrets, runtime: runtime, challengeTTL: c.challengeTTL),
                             sessions: sessions, assertion: assertion, origins: FixedOrigins(origins: [Self.origin]), metadata: NoMetadata(),
                             metrics: Metrics(), decoySecret: DeploymentSecret(name: "decoy-credentials", keys: secrets, runtime: runtime),
                             relyingParty: RelyingParty(c), policy: CeremonyPolicy(c), runtime: runtime)
    }

    /// An account with a passkey on `authenticator` (its counter as stored: the authenticator's).
    @discardableResult
    func account(_ name: String, _ authenticator: SoftAuthenticator = SoftAuthenticator()) -> (UserRecord, SoftAuthenticator) {
        let user = tables.addUser(name)
        authenticator.userHandle = user.userHandle
        let record = CredentialRecord(id: authenticator.credentialId, userId: user.id, publicKey: authenticator.publicKeyCOSE,
                                      alg: authenticator.algorithm.rawValue, signCount: Int64(authenticator.signCount),
                                      aaguid: authenticator.aaguid, transports: ["internal"], backupEligible: false, backedUp: false,
                                      attestationFormat: "none", attestationType: "none", name: "passkey", flagged: false,
                                      createdAt: clock.now(), lastUsedAt: nil, approvesFrom: nil, hardwareBound: false)
        tables.setUp { (t, _) in t.credentials.append(record) }
        return (user, authenticator)
    }

    /// The sign-in's verify body: `authenticator`'s assertion over the options' challenge.
    func assertion(_ authenticator: SoftAuthenticator, _ options: RequestOptions, change: (inout AssertionBuilder) -> Void = { _ in }) -> [UInt8] {
        var builder = authenticator.assertion(challenge: options.challenge, rpId: Self.rpId, origin: Self.origin)
        change(&builder)
        return builder.bytes()
    }

    func credential(_ id: [UInt8]) -> CredentialRecord? { tables.snapshot.credentials.first { $0.id == id } }

    /// The same sign-in over another store (one that races the verify).
    func login(over store: any LoginStore) -> PasskeyLogin {
        PasskeyLogin(logins: store, seal: login.seal, sessions: login.sessions, assertion: login.assertion, origins: login.origins,
                     metadata: login.metadata, metrics: login.metrics, decoySecret: login.decoySecret,
                     relyingParty: login.relyingParty, policy: login.policy, runtime: runtime)
    }
}

extension InMemoryTables {
    /// A test's set-up, which cannot fail.
    func setUp(_ body: (inout Tables, Date) -> Void) {
        try! change { (t: inout Tables, now: Date) throws(StorageError) in body(&t, now) }
    }
}

/// No authenticator metadata loaded: policy off, no statement descriptions or icons.
struct NoMetadata: PasskeyMetadata {
    func policy() -> MetadataPolicy { .off }
    func description(aaguid: [UInt8]) -> String? { nil }
    func icon(aaguid: [UInt8]) -> ProviderIcon? { nil }
}

extension MemorySecrets: CeremonySealKeys {
    /// No KEK rotation in memory: no retired keys.
    func retiredCeremonySealKeys(acceptedForSeconds: Int) throws(StorageError) -> [(keyId: [UInt8], sealed: [UInt8], remaining: Double)] { [] }
}

/// Passkey sign-in without a socket or PostgreSQL: options and verify, discoverable and
/// username-first, and every refusal of SPEC "Rules that must hold" → Challenges the store decides.
@Suite struct LoginServiceTests {
    @Test func discoverableSignInWritesTheSessionWithTheUse() throws {
        let w = try LoginWorld()
        let (user, authenticator) = w.account("alice", SoftAuthenticator(signCount: 7))
        let options = try w.login.authenticationOptions(username: nil)
        #expect(options.allowCredentials.isEmpty && options.rpId == LoginWorld.rpId)
        let signedIn = try w.login.verifyAuthentication(w.assertion(authenticator, options), language: "de")
        #expect(signedIn.userId == user.id)
        #expect(signedIn.user.id == user.id)
        #expect(signedIn.tokens.refreshToken.hasPrefix("lkr_"))
        let t = w.tables.snapshot
        #expect(t.usedChallenges.count == 1)
        let family = try #require(t.families.values.first)
        #expect(t.families.count == 1 && family.userId == user.id && family.credentialId == authenticator.credentialId && family.method == .passkey)
        #expect(t.refreshTokens.values.filter { $0.familyId == family.id }.count == 1)
        #expect(w.credential(authenticator.credentialId)?.signCount == 8)
        #expect(w.credential(authenticator.credentialId)?.lastUsedAt == w.clock.now())
        #expect(t.audit.map(\.action) == [AuditAction.passkeyLogin.rawValue])
        #expect(t.languages[user.id] == "de")
    }

    @Test func usernameFirstOffersTheAccountsPasskeysAndDecoysOtherwise() throws {
        let w = try LoginWorld()
        let (user, authenticator) = w.account("bob")
        let options = try w.login.authenticationOptions(username: "bob")
        #expect(options.allowCredentials.map(\.id) == [authenticator.credentialId])
        #expect(try w.login.verifyAuthentication(w.assertion(authenticator, options)).userId == user.id)
        // An unknown username: decoys, the same on every call, never an empty list.
        let first = try w.login.authenticationOptions(username: "nobody").allowCredentials
        let second = try w.login.authenticationOptions(username: "nobody").allowCredentials
        #expect(!first.isEmpty && first.map(\.id) == second.map(\.id))
        #expect(!first.contains { $0.id == authenticator.credentialId })
    }

    @Test func usernameFirstRefusesAnotherAccountsPasskey() throws {
        let w = try LoginWorld()
        w.account("carol")
        let (_, dave) = w.account("dave")
        let options = try w.login.authenticationOptions(username: "carol")
        expectRefusal(.credentialUnknown) { try w.login.verifyAuthentication(w.assertion(dave, options)) }
        // The refusal records the challenge used, and writes no session.
        #expect(w.tables.snapshot.usedChallenges.count == 1 && w.tables.snapshot.families.isEmpty)
    }

    @Test func aReplayedChallengeIsRefused() throws {
        let w = try LoginWorld()
        let (_, authenticator) = w.account("erin")
        let options = try w.login.authenticationOptions(username: nil)
        _ = try w.login.verifyAuthentication(w.assertion(authenticator, options))
        // The same challenge again, freshly signed with a higher counter: the challenge is used.
        expectRefusal(.challengeInvalid) { try w.login.verifyAuthentication(w.assertion(authenticator, options)) }
        #expect(w.tables.snapshot.families.count == 1)
    }

    @Test func aTamperedOrExpiredSealedChallengeIsRefusedWritingNothing() throws {
        let w = try LoginWorld()
        let (_, authenticator) = w.account("frank")
        let options = try w.login.authenticationOptions(username: nil)
        for i in [0, 3, 10, options.challenge.count - 1] {
            var altered = options.challenge
            altered[i] ^= 0x01
            let body = w.assertion(authenticator, options) { $0.clientData.challenge = altered }
            expectRefusal(.challengeInvalid, "byte \(i)") { try w.login.verifyAuthentication(body) }
        }
        // A random challenge of the same length, never sealed here.
        let forged = w.assertion(authenticator, options) { $0.clientData.challenge = SecureRandom.bytes(options.challenge.count) }
        expectRefusal(.challengeInvalid) { try w.login.verifyAuthentication(forged) }
        // Expired: the challenge's lifetime has passed.
        w.clock.advance(Double(w.configuration.challengeTTL) + 1)
        expectRefusal(.challengeInvalid) { try w.login.verifyAuthentication(w.assertion(authenticator, options)) }
        let t = w.tables.snapshot
        #expect(t.usedChallenges.isEmpty && t.families.isEmpty && t.audit.isEmpty)
    }

    @Test func aCounterThatGoesBackIsRefusedAndFlaggedUnderReject() throws {
        let w = try LoginWorld()
        let (user, authenticator) = w.account("grace", SoftAuthenticator(signCount: 10))
        let options = try w.login.authenticationOptions(username: nil)
        expectRefusal(.signCountRegression) { try w.login.verifyAuthentication(w.assertion(authenticator, options) { $0.signCount = 4 }) }
        let t = w.tables.snapshot
        #expect(t.usedChallenges.count == 1 && t.families.isEmpty)
        #expect(w.credential(authenticator.credentialId)?.flagged == true && w.credential(authenticator.credentialId)?.signCount == 10)
        #expect(t.events.map(\.type) == [.passkeyCloneSuspected] && t.events.first?.accountId == user.id)
    }

    @Test func aCounterThatGoesBackIsLetThroughAndFlaggedUnderFlag() throws {
        let w = try LoginWorld { $0.signCountPolicy = .flag }
        let (user, authenticator) = w.account("heidi", SoftAuthenticator(signCount: 10))
        let options = try w.login.authenticationOptions(username: nil)
        let signedIn = try w.login.verifyAuthentication(w.assertion(authenticator, options) { $0.signCount = 4 })
        #expect(signedIn.userId == user.id)
        let t = w.tables.snapshot
        #expect(t.families.count == 1 && t.usedChallenges.count == 1)
        // The stored counter never moves back; the credential is flagged as a possible clone.
        #expect(w.credential(authenticator.credentialId)?.flagged == true && w.credential(authenticator.credentialId)?.signCount == 10)
        #expect(t.events.map(\.type).contains(.passkeyCloneSuspected))
    }

    @Test func aSecondUseOfTheSameCounterIsRefused() throws {
        let w = try LoginWorld()
        let (_, authenticator) = w.account("ivan", SoftAuthenticator(signCount: 10))
        let first = try w.login.authenticationOptions(username: nil)
        let second = try w.login.authenticationOptions(username: nil)
        // Two assertions carrying the same counter (11), each on its own challenge: the first is
        // stored, the second does not advance the counter under `reject`.
        _ = try w.login.verifyAuthentication(w.assertion(authenticator, first) { $0.signCount = 11 })
        expectRefusal(.signCountRegression) { try w.login.verifyAuthentication(w.assertion(authenticator, second) { $0.signCount = 11 }) }
        let t = w.tables.snapshot
        #expect(t.families.count == 1 && t.usedChallenges.count == 2)
        #expect(w.credential(authenticator.credentialId)?.signCount == 11 && w.credential(authenticator.credentialId)?.flagged == true)
    }

    @Test func aConcurrentUseThatStoredTheSameCounterFirstLosesTheCompareAndSet() throws {
        let w = try LoginWorld()
        let (user, authenticator) = w.account("ivy", SoftAuthenticator(signCount: 10))
        // Between this verify's read (counter 10) and its write, another use stores counter 11.
        let id = authenticator.credentialId
        let racing = w.login(over: Meanwhile(inner: w.store) { t in
            if let i = t.credentials.firstIndex(where: { $0.id == id }) { t.credentials[i].signCount = 11 }
        })
        let options = try racing.authenticationOptions(username: nil)
        expectRefusal(.signCountRegression) { try racing.verifyAuthentication(w.assertion(authenticator, options) { $0.signCount = 11 }) }
        // The challenge is used, no session was written, and the credential is flagged as a possible clone.
        let t = w.tables.snapshot
        #expect(t.usedChallenges.count == 1 && t.families.isEmpty)
        #expect(w.credential(authenticator.credentialId)?.flagged == true && w.credential(authenticator.credentialId)?.signCount == 11)
        #expect(t.events.map(\.type) == [.passkeyCloneSuspected] && t.events.first?.accountId == user.id)
    }

    @Test func anUnknownCredentialIsRefusedWithTheSignal() throws {
        let w = try LoginWorld()
        w.account("judy")
        let stranger = SoftAuthenticator()
        let options = try w.login.authenticationOptions(username: nil)
        do {
            _ = try w.login.verifyAuthentication(w.assertion(stranger, options))
            Issue.record("an unknown credential signed in")
        } catch {
            #expect(error.code == .credentialUnknown)
            guard case .unknownCredential(let rpId, let credentialId)? = error.attachment else { Issue.record("no signal: \(error)"); return }
            #expect(rpId == LoginWorld.rpId && credentialId == stranger.credentialId)
        }
        let t = w.tables.snapshot
        #expect(t.usedChallenges.count == 1 && t.families.isEmpty && t.audit.isEmpty)
    }

    @Test func aRevokedCredentialIsRefused() throws {
        let w = try LoginWorld()
        let (_, authenticator) = w.account("kim")
        w.tables.setUp { (t, _) in t.revokedCredentials.insert(authenticator.credentialId) }
        let options = try w.login.authenticationOptions(username: "kim")
        // The account has no live passkey: its options are decoys, and the revoked one is refused.
        #expect(!options.allowCredentials.contains { $0.id == authenticator.credentialId })
        expectRefusal(.credentialUnknown) { try w.login.verifyAuthentication(w.assertion(authenticator, options)) }
        #expect(w.tables.snapshot.families.isEmpty)
    }

    @Test func aPasskeyRevokedAfterTheReadBeginsNoSession() throws {
        let w = try LoginWorld()
        let (_, authenticator) = w.account("lou")
        // Between this verify's read (the passkey live) and its write, the passkey is revoked.
        let id = authenticator.credentialId
        let racing = w.login(over: Meanwhile(inner: w.store) { t in t.revokedCredentials.insert(id) })
        let options = try racing.authenticationOptions(username: nil)
        do {
            _ = try racing.verifyAuthentication(w.assertion(authenticator, options))
            Issue.record("a passkey revoked meanwhile signed in")
        } catch {
            #expect(error.code == .credentialUnknown)
            guard case .unknownCredential(_, let credentialId)? = error.attachment else { Issue.record("no signal: \(error)"); return }
            #expect(credentialId == authenticator.credentialId)
        }
        let t = w.tables.snapshot
        #expect(t.usedChallenges.count == 1 && t.families.isEmpty && t.audit.isEmpty)
    }
}

/// `InMemoryLoginStore` with `change` made to the tables between a verify's read and its write:
/// another use storing its counter first (the race the compare-and-set decides), or the passkey
/// revoked (what `RevocationRaceTests` drives on PostgreSQL).
struct Meanwhile: LoginStore {
    let inner: InMemoryLoginStore
    let change: @Sendable (inout InMemoryTables.Tables) -> Void

    func account(username: String) throws(StorageError) -> (userId: String, credentials: [(id: [UInt8], transports: [String])])? {
        try inner.account(username: username)
    }

    func login(_ challenge: UsedChallenge, credentialId: [UInt8], decide: (LoginRead) -> LoginWrite) throws(StorageError) -> LoginWritten {
        try inner.login(challenge, credentialId: credentialId) { read in
            let write = decide(read)
            inner.tables.setUp { (t, _) in change(&t) }
            return write
        }
    }
}
