import Crypto
import DeviceKeys
import Foundation
import JSON
@testable import LatchkeyServer
import Storage
import Synchronization
import Testing
import Tokens
import WebAuthn
import WebAuthnTesting

/// `StepUpService` and `DeviceKeyService` as the server builds them, over the in-memory stores
/// (one set of tables), with time on a `ManualClock` and seeded randomness: no socket, no
/// PostgreSQL. The collaborators that reach a database in the server are given in memory too:
/// signing keys (`MemorySigningKeys`), the revocation feed (`KnownRevocations`), the origin
/// allowlist and the attestation policy.
struct StepUpWorld {
    static let origin = "https://localhost"

    let clock = ManualClock(start: Date(timeIntervalSince1970: 1_900_000_000))
    let tables: InMemoryDeviceTables
    let configuration: Configuration
    let runtime: Runtime
    let events: OutboxEvents
    let signer: TokenSigner
    let revocations = KnownRevocations()
    let store: InMemoryStepUpStore
    let deviceKeyStore: InMemoryDeviceKeyStore
    let deviceKeys: DeviceKeyService
    let stepUp: StepUpService

    init(attestation: DeviceKeyAttestationPolicy? = nil, configure: (inout Configuration) -> Void = { _ in }) throws {
        var c = Configuration()
        c.rpId = "localhost"
        c.stepUpTTL = 60
        c.stepUpTokenTTL = 60
        configure(&c)
        configuration = c
        runtime = clock.runtime(random: SeededRandom(seed: 34).bytes)
        tables = InMemoryDeviceTables(now: clock.now)
        events = OutboxEvents(runtime: runtime, maxAgeSeconds: c.webhookMaxAge)
        signer = TokenSigner(source: MemorySigningKeys(), issuer: c.issuer, audience: c.rpId, clock: runtime.tokenClock)
        try signer.prepareKeys()
        store = InMemoryStepUpStore(tables: tables)
        deviceKeyStore = InMemoryDeviceKeyStore(tables: tables)
        let trust = FixedAttestationPolicy(value: attestation ?? DeviceKeyAttestationPolicy(trustAnchors: [], now: 1_900_000_000))
        deviceKeys = DeviceKeyService(store: deviceKeyStore, trust: trust, events: events, relyingParty: RelyingParty(c), policy: DeviceKeyPolicy(c), runtime: runtime,
                                      revoked: revocations)
        let assertion = PasskeyAssertion(accounts: store, keyCache: CredentialKeyCache(), events: events,
                                         onRegression: CredentialUse.OnRegression(c.signCountPolicy))
        stepUp = StepUpService(store: store, keys: deviceKeys, signer: signer, assertion: assertion,
                               origins: FixedOrigins(origins: [Self.origin]), events: events, revoked: revocations,
                               relyingParty: RelyingParty(c), policy: StepUpPolicy(c), runtime: runtime)
    }

    // MARK: People, passkeys, phones

    struct Person {
        let user: UserRecord
        let sessionId: String
        var id: String { user.id }
    }

    func person(_ name: String) -> Person {
        Person(user: UserRecord(id: "user-\(name)", userHandle: Array("handle-\(name)".utf8), username: name, displayName: name),
               sessionId: "session-\(name)")
    }

    /// A registered passkey of `person`, as a passkey registration stores it.
    @discardableResult
    func passkey(_ person: Person, _ authenticator: SoftAuthenticator = SoftAuthenticator(), approvesFrom: Date? = nil) -> SoftAuthenticator {
        tables.addPasskey(CredentialRecord(id: authenticator.credentialId, userId: person.id, publicKey: authenticator.publicKeyCOSE,
                                           alg: authenticator.algorithm.rawValue, signCount: Int64(authenticator.signCount),
                                           aaguid: authenticator.aaguid, transports: ["internal"], backupEligible: false, backedUp: false,
                                           attestationFormat: "none", attestationType: "none", name: "Test passkey",
                                           createdAt: clock.now(), approvesFrom: approvesFrom),
                          user: person.user)
        return authenticator
    }

    /// A phone's P-256 device key.
    struct Phone {
        let key = PrivateKey.generateEC(.p256)
        var deviceId = "phone-\(uniqueSuffix())"
        var publicKey: [UInt8] { key.publicKey.spkiDER }
        func sign(_ challenge: JSONValue?) throws -> String {
            Base64URL.encode(try key.sign(try #require(challenge?.stringValue.flatMap(Base64URL.decode)), algorithm: .ecdsa(.sha256)))
        }
    }

    // MARK: Step-up, as the routes call it

    static let transfer: JSONValue = .object([("type", "transfer"), ("amount", "200.00"), ("currency", "EUR")])

    func challenge(_ p: Person, keyId: String, action: JSONValue = StepUpWorld.transfer) throws -> JSONValue {
        StepUpRenderer.challenge(try stepUp.createChallenge(userId: p.id, body: .object([("keyId", .string(keyId)), ("action", action)])))
    }

    func verify(_ p: Person, _ challenge: JSONValue, signature: String, claimed: JSONValue? = nil) throws -> JSONValue {
        var body: [(key: String, value: JSONValue)] = [("challengeId", challenge["challengeId"]!), ("signature", .string(signature))]
        if let claimed { body.append(("action", claimed)) }
        return StepUpRenderer.verified(try stepUp.verify(userId: p.id, sessionId: p.sessionId, body: .object(body)))
    }

    /// A device-key approval of `action`: its step-up token answer.
    func approve(_ p: Person, _ phone: Phone, keyId: String, action: JSONValue = StepUpWorld.transfer) throws -> JSONValue {
        let c = try challenge(p, keyId: keyId, action: action)
        return try verify(p, c, signature: try phone.sign(c["challenge"]))
    }

    /// A passkey approval of `action` with `authenticator` (`change` edits the assertion first).
    func approveWithPasskey(_ p: Person, _ authenticator: SoftAuthenticator, action: JSONValue,
                            change: (inout AssertionBuilder) -> Void = { _ in }) throws -> JSONValue {
        let c = StepUpRenderer.challenge(try stepUp.createChallenge(userId: p.id, body: .object([("method", "passkey"), ("action", action)])))
        let bytes = try #require(c["publicKey"]?["challenge"]?.stringValue.flatMap(Base64URL.decode))
        var builder = authenticator.assertion(challenge: bytes, rpId: configuration.rpId, origin: Self.origin)
        change(&builder)
        return StepUpRenderer.verified(try stepUp.verify(userId: p.id, sessionId: p.sessionId,
                                                         body: .object([("challengeId", c["challengeId"]!), ("credential", builder.json())])))
    }

    func consume(_ token: JSONValue?, action: JSONValue) throws -> JSONValue {
        let hash = Base64URL.encode(Digest.sha256(action.canonicalized()))
        return StepUpRenderer.consumed(try stepUp.consume(token: try #require(token?.stringValue), body: .object([("actionHash", .string(hash))])))
    }

    // MARK: Device keys, as the routes call them

    /// The enrolment gate a user-verified passkey step-up for this device makes (`StepUpRule.deviceKeyEnrolment`).
    func enrolmentGate(_ p: Person, _ authenticator: SoftAuthenticator, deviceId: String) throws -> EnrolmentGate {
        let action = try StepUpAction.deviceKeyEnrolment(deviceId: deviceId)
        let answer = try approveWithPasskey(p, authenticator, action: action.value)
        let checked = try stepUp.checkedStepUp(try #require(answer["access_token"]?.stringValue), userId: p.id, action: action,
                                               changes: "device-key enrolments", session: p.sessionId)
        return .stepUp(jti: checked.jti, actionHash: action.hash)
    }

    func enrolmentBody(_ p: Person, _ phone: Phone, signedBy signer: Phone? = nil) throws -> JSONValue {
        let c = DeviceKeyRenderer.enrolmentChallenge(try deviceKeys.enrolmentChallenge(userId: p.id))
        return .object([("deviceId", .string(phone.deviceId)), ("publicKey", .string(Base64URL.encode(phone.publicKey))),
                        ("platform", "android"), ("name", "Test phone"), ("challengeId", c["challengeId"]!),
                        ("signature", .string(try (signer ?? phone).sign(c["challenge"])))])
    }

    /// Enrols `phone` behind a fresh passkey step-up; its key id.
    func enrolled(_ p: Person, _ phone: Phone, passkey: SoftAuthenticator) throws -> String {
        let gate = try enrolmentGate(p, passkey, deviceId: phone.deviceId)
        let answer = try deviceKeys.enrol(userId: p.id, body: try enrolmentBody(p, phone), gate: gate)
        return answer.id
    }
}

/// Expects `body` to throw a `ServiceError` with `code`.
func expectRefusal<T>(_ code: ServiceError.Code, _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation,
                      _ body: () throws -> T) {
    do {
        _ = try body()
        Issue.record("expected \(code.rawValue), got an answer. \(comment.map { "\($0)" } ?? "")", sourceLocation: sourceLocation)
    } catch let error as ServiceError {
        #expect(error.code == code, "\(error) \(comment.map { "\($0)" } ?? "")", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected \(code.rawValue), got \(error)", sourceLocation: sourceLocation)
    }
}

/// Seeded, reproducible randomness for a `Runtime` (never the same bytes twice in one run).
final class SeededRandom: Sendable {
    private let generator: Mutex<SplitMix64>
    init(seed: UInt64) { generator = Mutex(SplitMix64(seed: seed)) }

    var bytes: @Sendable (Int) -> [UInt8] {
        { [self] count in
            generator.withLock { g in (0..<count).map { _ in UInt8(truncatingIfNeeded: g.next()) } }
        }
    }
}

/// Signing keys kept in memory (the server keeps them sealed in PostgreSQL).
final class MemorySigningKeys: SigningKeySource, Sendable {
    private let keys = Mutex<[SigningKey]>([])
    func prepare() throws(SigningKeyError) {}
    func load() throws(SigningKeyError) -> [StoredSigningKey] { keys.withLock { $0.reversed().map { .key($0) } } }
    func newestKeyAge() throws(SigningKeyError) -> TimeInterval? { keys.withLock { $0.isEmpty ? nil : 0 } }
    func add(_ key: SigningKey) throws(SigningKeyError) { keys.withLock { $0.append(key) } }
}

/// The revocation feed as this instance knows it: sessions revoked so far, and how often a
/// revocation waited for the feed before it was answered.
final class KnownRevocations: SessionRevocations {
    private let state = Mutex<(ids: Set<String>, settled: Int)>(([], 0))
    func refuses(_ sessionId: String) throws(StorageError) -> Bool { state.withLock { $0.ids.contains(sessionId) } }
    func insert(_ sessionIds: some Sequence<String>) {
        let ids = Array(sessionIds)
        state.withLock { $0.ids.formUnion(ids); $0.settled += 1 }
    }
    var settled: Int { state.withLock { $0.settled } }
}

struct FixedOrigins: OriginAllowlist {
    let origins: [String]
    func policy() -> OriginPolicy { OriginPolicy(origins) }
}

struct FixedAttestationPolicy: AttestationPolicySource {
    let value: DeviceKeyAttestationPolicy
    func policy() throws(ServiceError) -> DeviceKeyAttestationPolicy { value }
}
