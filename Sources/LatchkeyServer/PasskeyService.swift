import Crypto
import Foundation
import JSON
import PostgreSQL
import Storage
import Synchronization
import WebAuthn

/// Passkey ceremonies (SPEC "HTTP contract"): options out, credential JSON in. Stateless: every
/// ceremony's state is a challenge row in PostgreSQL, so any instance can finish what another began.
public final class PasskeyService: Sendable {
    let store: Store
    let configuration: Configuration
    let tokens: TokenService
    let origins: OriginCache
    let metrics: Metrics
    let decoySecret: [UInt8]
    /// The deployment's verification policy, built once; each ceremony copies it and sets the
    /// current allowlist (and the user verification its challenge recorded).
    let policyTemplate: VerificationPolicy
    /// What every authentication challenge row records (the deployment's UV requirement).
    let authenticationChallengePolicy: String
    let keyCache = CredentialKeyCache()

    /// What the options offer (SPEC: −7, −8, −257 at least); verification refuses anything else.
    static let offeredAlgorithms: [COSEAlgorithm] = [.es256, .edDSA, .es384, .es512, .ps256, .rs256]

    public init(store: Store, configuration: Configuration, tokens: TokenService, origins: OriginCache, metrics: Metrics) throws {
        self.store = store
        self.configuration = configuration
        self.tokens = tokens
        self.origins = origins
        self.metrics = metrics
        self.decoySecret = try store.secret(named: "decoy-credentials") { SecureRandom.bytes(32) }
        var p = VerificationPolicy(rpId: configuration.rpId, origins: OriginPolicy([String]()))
        p.userVerification = configuration.userVerification
        p.signCountPolicy = configuration.signCountPolicy
        if !configuration.embeddingOrigins.isEmpty { p.crossOrigin = .allow(topOrigins: Set(configuration.embeddingOrigins)) }
        self.policyTemplate = p
        self.authenticationChallengePolicy = JSONValue.object([("uv", .string(configuration.userVerification.rawValue))]).text
    }

    // MARK: Registration

    public enum Requester: Sendable {
        case newAccount(username: String, displayName: String)
        case user(String)  // signed in (Bearer) or vouched for (enrolment ticket)
    }

    public func registrationOptions(for requester: Requester) throws(ServiceError) -> JSONValue {
        let user: UserRecord
        var newUser: UserRecord? = nil
        switch requester {
        case .newAccount(let username, let displayName):
            if try db({ try store.user(username: username) }) != nil {
                throw ServiceError("conflict", "that username is taken")
            }
            let u = UserRecord(id: Base64URL.encode(SecureRandom.bytes(16)), userHandle: SecureRandom.bytes(32),
                               username: username, displayName: displayName)
            user = u
            newUser = u
        case .user(let id):
            guard let u = try db({ try store.user(id: id) }) else { throw ServiceError.unauthorized }
            user = u
        }
        let existing = newUser == nil ? try db({ try store.credentials(userId: user.id) }) : []
        let challenge = SecureRandom.bytes(32)
        var policy: [(key: String, value: JSONValue)] = [("uv", .string(configuration.userVerification.rawValue))]
        if let n = newUser {
            policy.append(("newUser", .object([("id", .string(n.id)), ("handle", .string(Base64URL.encode(n.userHandle))),
                                                ("username", .string(n.username)), ("displayName", .string(n.displayName))])))
        }
        try db {
            try store.insertChallenge(hash: Digest.sha256(challenge), purpose: "registration", userId: newUser == nil ? user.id : nil,
                                      rpId: configuration.rpId, policy: JSONValue.object(policy).text, ttlSeconds: configuration.challengeTTL)
        }
        // PublicKeyCredentialCreationOptionsJSON (WebAuthn L3 §5.4), the bare object.
        return .object([
            ("rp", .object([("id", .string(configuration.rpId)), ("name", .string(configuration.rpName))])),
            ("user", .object([("id", .string(Base64URL.encode(user.userHandle))), ("name", .string(user.username)),
                              ("displayName", .string(user.displayName))])),
            ("challenge", .string(Base64URL.encode(challenge))),
            ("pubKeyCredParams", .array(Self.offeredAlgorithms.map { .object([("type", "public-key"), ("alg", .number(Double($0.rawValue)))]) })),
            ("timeout", .number(Double(configuration.challengeTTL * 1000))),
            ("excludeCredentials", .array(existing.map(Self.descriptor))),
            ("authenticatorSelection", .object([("residentKey", "required"), ("requireResidentKey", true),
                                                ("userVerification", .string(configuration.userVerification.rawValue))])),
            ("attestation", .string(configuration.attestation)),
            ("hints", .array([])),
            ("extensions", .object([("credProps", true)])),
        ])
    }

    static func descriptor(_ c: CredentialRecord) -> JSONValue {
        var m: [(key: String, value: JSONValue)] = [("type", "public-key"), ("id", .string(Base64URL.encode(c.id)))]
        if !c.transports.isEmpty { m.append(("transports", .array(c.transports.map { .string($0) }))) }
        return .object(m)
    }

    public func verifyRegistration(_ body: [UInt8]) throws(ServiceError) -> JSONValue {
        do {
            let result = try finishRegistration(body)
            metrics.observeCeremony("registration", outcome: "ok")
            return result
        } catch {
            metrics.observeCeremony("registration", outcome: error.code)
            throw error
        }
    }

    func finishRegistration(_ body: [UInt8]) throws(ServiceError) -> JSONValue {
        let parsed: ParsedRegistration
        do { parsed = try ParsedRegistration(bytes: body) } catch { throw ServiceError(error) }
        // SPEC: the challenge is found and consumed first; any later failure still uses it up.
        let challenge = try consume(parsed.clientData.challenge, purpose: "registration")
        let policyJSON = (try? JSONParser.parse(challenge.policy)) ?? .object([])
        var policy = basePolicy()
        if let uv = policyJSON["uv"]?.stringValue, let v = VerificationPolicy.UserVerification(rawValue: uv) { policy.userVerification = v }
        policy.allowedAlgorithms = Self.offeredAlgorithms
        let verified: VerifiedRegistration
        do {
            verified = try RegistrationVerifier.verify(parsed, expectedChallenge: parsed.clientData.challenge, policy: policy)
        } catch {
            throw ServiceError(error)
        }
        let user: UserRecord
        var newUser: UserRecord? = nil
        if let n = policyJSON["newUser"], let id = n["id"]?.stringValue, let handle = n["handle"]?.stringValue.flatMap(Base64URL.decode),
           let username = n["username"]?.stringValue, let displayName = n["displayName"]?.stringValue {
            user = UserRecord(id: id, userHandle: handle, username: username, displayName: displayName)
            newUser = user
        } else if let id = challenge.userId, let u = try db({ try store.user(id: id) }) {
            user = u
        } else {
            throw ServiceError("challenge_invalid", "the ceremony's account no longer exists")
        }
        let aaguid = formatUUID(verified.aaguid)
        let record = CredentialRecord(
            id: verified.credentialId, userId: user.id, publicKey: verified.publicKeyBytes, alg: verified.algorithm.rawValue,
            signCount: Int64(verified.signCount), aaguid: verified.aaguid, transports: verified.transports,
            backupEligible: verified.backupEligible, backedUp: verified.backedUp, attestationFormat: verified.format,
            attestationType: verified.attestationType.rawValue, name: PasskeyProviders.name(aaguid: aaguid) ?? "Passkey")
        let detail = JSONValue.object([("credentialId", .string(Base64URL.encode(verified.credentialId))), ("aaguid", .string(aaguid)),
                                       ("format", .string(verified.format)), ("origin", .string(verified.origin))]).text
        do {
            try store.register(newUser: newUser, credential: record, audit: (user.id, detail))
        } catch Store.RegistrationConflict.usernameTaken {
            throw ServiceError("conflict", "that username is taken")
        } catch Store.RegistrationConflict.credentialExists {
            throw ServiceError("credential_exists", "this passkey is already registered")
        } catch {
            throw ServiceError("internal_error", "storage unavailable")
        }
        let issued = try issueSession(userId: user.id, userVerified: verified.userVerified)
        return .object([("user", Self.userJSON(user)), ("passkey", Self.passkeyJSON(record)), ("tokens", issued.json)])
    }

    // MARK: Authentication

    public func authenticationOptions(username: String?) throws(ServiceError) -> JSONValue {
        let challenge = SecureRandom.bytes(32)
        var allow: [JSONValue] = []
        var userId: String? = nil
        if let username {
            if let user = try db({ try store.user(username: username) }) {
                userId = user.id
                allow = try db { try store.credentials(userId: user.id) }.map(Self.descriptor)
            }
            if allow.isEmpty {
                // No such account (or no passkey): a decoy list derived from the username and a
                // deployment secret, stable across calls and instances, so the answer does not
                // reveal whether the account exists.
                let id = HMAC.sha256(key: decoySecret, data: Array("decoy:\(username)".utf8))
                allow = [.object([("type", "public-key"), ("id", .string(Base64URL.encode(id))),
                                  ("transports", .array(["internal", "hybrid"]))])]
            }
        }
        try db {
            try store.insertChallenge(hash: Digest.sha256(challenge), purpose: "authentication", userId: userId,
                                      rpId: configuration.rpId, policy: authenticationChallengePolicy, ttlSeconds: configuration.challengeTTL)
        }
        // PublicKeyCredentialRequestOptionsJSON (WebAuthn L3 §5.5), the bare object; always with rpId.
        return .object([
            ("challenge", .string(Base64URL.encode(challenge))),
            ("timeout", .number(Double(configuration.challengeTTL * 1000))),
            ("rpId", .string(configuration.rpId)),
            ("allowCredentials", .array(allow)),
            ("userVerification", .string(configuration.userVerification.rawValue)),
            ("hints", .array([])),
        ])
    }

    public func verifyAuthentication(_ body: [UInt8]) throws(ServiceError) -> JSONValue {
        do {
            let result = try finishAuthentication(body)
            metrics.observeCeremony("authentication", outcome: "ok")
            return result
        } catch {
            metrics.observeCeremony("authentication", outcome: error.code)
            throw error
        }
    }

    func finishAuthentication(_ body: [UInt8]) throws(ServiceError) -> JSONValue {
        let parsed: ParsedAuthentication
        do { parsed = try ParsedAuthentication(bytes: body) } catch { throw ServiceError(error) }
        // One round trip: use the challenge up and fetch the credential (SPEC: consumed first, so any
        // later failure still uses it up; the credential is only looked at after the ceremony checks).
        let (found, login) = try db { try store.consumeChallengeForLogin(hash: Digest.sha256(parsed.clientData.challenge),
                                                                          credentialId: parsed.response.rawId) }
        let challenge = try validate(found, purpose: "authentication")
        var policy = basePolicy()
        if let uv = (try? JSONParser.parse(challenge.policy))?["uv"]?.stringValue,
           let v = VerificationPolicy.UserVerification(rawValue: uv) { policy.userVerification = v }
        // The challenge was matched by its hash in the database above; the core compares it again.
        let expected = parsed.clientData.challenge
        // SPEC order: type → origin → rpIdHash → UP → UV, then the credential.
        let checked: CeremonyCheckedAuthentication
        do { checked = try AuthenticationVerifier.checkCeremony(parsed, expectedChallenge: expected, policy: policy) } catch {
            throw ServiceError(error)
        }
        guard let (credential, user) = login else {
            throw ServiceError("credential_unknown", "no such passkey")
        }
        // Username-first: the credential must belong to the account the options were for (§7.2 step 5).
        if let bound = challenge.userId, bound != user.id { throw ServiceError("credential_unknown", "no such passkey") }
        let verified = try verifyAssertion(checked, credential: credential, user: user).verified
        let (refresh, refreshHash) = TokenService.newRefreshToken()
        let familyId = Base64URL.encode(SecureRandom.bytes(16))
        var detail: [(key: String, value: JSONValue)] = [("credentialId", .string(Base64URL.encode(credential.id))),
                                                         ("origin", .string(verified.origin))]
        if verified.backupEligibilityChanged { detail.append(("backupEligibilityChanged", true)) }
        if verified.cloneWarning { detail.append(("signCountRegression", true)) }
        try db {
            try store.recordLogin(credentialId: credential.id, userId: user.id, signCount: Int64(verified.newSignCount),
                                  backedUp: verified.backedUp, flag: verified.cloneWarning, refreshHash: refreshHash, familyId: familyId,
                                  refreshTTL: configuration.refreshTokenTTL, auditDetail: JSONValue.object(detail).text)
        }
        let issued = try tokens.issue(userId: user.id, familyId: familyId, refreshToken: refresh, userVerified: verified.userVerified)
        // The passkey as this login left it (what recordLogin just wrote).
        var updated = credential
        updated.signCount = max(credential.signCount, Int64(verified.newSignCount))
        updated.backedUp = verified.backedUp
        updated.flagged = credential.flagged || verified.cloneWarning
        updated.lastUsedAt = Date()
        return .object([("user", Self.userJSON(user)), ("passkey", Self.passkeyJSON(updated)), ("tokens", issued.json)])
    }

    // MARK: Shared

    /// §7.2 steps 6, 20 and 21 for a ceremony-checked assertion and the credential found for it:
    /// the user handle, the signature with the (cached) stored key, and the signature counter.
    /// A counter regression flags the credential as a possible clone.
    func verifyAssertion(_ checked: CeremonyCheckedAuthentication, credential: CredentialRecord,
                         user: UserRecord) throws(ServiceError) -> (verified: VerifiedAuthentication, key: COSEKey) {
        if let handle = checked.parsed.response.userHandle, !constantTimeEquals(handle, user.userHandle) {
            throw ServiceError("credential_unknown", "the user handle does not match the passkey")
        }
        let key: COSEKey
        do { key = try keyCache.key(for: credential) } catch { throw ServiceError(error) }
        let stored = StoredCredential(publicKey: key, signCount: UInt32(clamping: credential.signCount),
                                      backupEligible: credential.backupEligible)
        do {
            return (try AuthenticationVerifier.verify(checked, stored: stored), key)
        } catch {
            if error.code == .signCountRegression {
                try? store.flagCredential(id: credential.id, userId: user.id, detail: #"{"reason":"sign_count_regression"}"#)
            }
            throw ServiceError(error)
        }
    }

    func basePolicy() -> VerificationPolicy {
        var p = policyTemplate
        p.origins = origins.policy()
        return p
    }

    /// Finds and uses up the challenge; unknown, expired, used or another ceremony's → challenge_invalid.
    func consume(_ challenge: [UInt8], purpose: String) throws(ServiceError) -> ChallengeRecord {
        guard challenge.count >= 16, challenge.count <= 64 else { throw ServiceError("challenge_invalid", "unknown challenge") }
        return try validate(try db { try store.consumeChallenge(hash: Digest.sha256(challenge)) }, purpose: purpose)
    }

    /// A consumed challenge row must exist, be live, and belong to this ceremony and rpId.
    func validate(_ found: ChallengeRecord?, purpose: String) throws(ServiceError) -> ChallengeRecord {
        guard let record = found else {
            throw ServiceError("challenge_invalid", "unknown or already used challenge")
        }
        guard !record.expired else { throw ServiceError("challenge_invalid", "challenge expired") }
        guard record.purpose == purpose, record.rpId == configuration.rpId else {
            throw ServiceError("challenge_invalid", "challenge belongs to another ceremony")
        }
        return record
    }

    func issueSession(userId: String, userVerified: Bool) throws(ServiceError) -> TokenService.Issued {
        let (refresh, hash) = TokenService.newRefreshToken()
        let familyId = Base64URL.encode(SecureRandom.bytes(16))
        try db { try store.createRefreshFamily(userId: userId, familyId: familyId, hash: hash, ttlSeconds: configuration.refreshTokenTTL) }
        return try tokens.issue(userId: userId, familyId: familyId, refreshToken: refresh, userVerified: userVerified)
    }

    static func userJSON(_ u: UserRecord) -> JSONValue {
        .object([("id", .string(u.id)), ("username", .string(u.username)), ("displayName", .string(u.displayName))])
    }

    static func passkeyJSON(_ c: CredentialRecord) -> JSONValue {
        let aaguid = formatUUID(c.aaguid)
        return .object([
            ("id", .string(Base64URL.encode(c.id))), ("name", .string(c.name)),
            ("provider", PasskeyProviders.name(aaguid: aaguid).map { .string($0) } ?? .null),
            ("aaguid", .string(aaguid)), ("createdAt", .string(iso8601(c.createdAt))),
            ("lastUsedAt", c.lastUsedAt.map { .string(iso8601($0)) } ?? .null),
            ("backupEligible", .bool(c.backupEligible)), ("backedUp", .bool(c.backedUp)),
            ("transports", .array(c.transports.map { .string($0) })), ("flagged", .bool(c.flagged)),
        ])
    }

    // MARK: Passkey management

    public func listPasskeys(userId: String) throws(ServiceError) -> JSONValue {
        .object([("passkeys", .array(try db { try store.credentials(userId: userId) }.map(Self.passkeyJSON)))])
    }

    public func renamePasskey(userId: String, id: String, name: String) throws(ServiceError) -> JSONValue {
        guard let credentialId = Base64URL.decode(id), !credentialId.isEmpty else { throw ServiceError.notFound("passkey") }
        guard let record = try db({ try store.renameCredential(userId: userId, id: credentialId, name: name) }) else {
            throw ServiceError.notFound("passkey")
        }
        return Self.passkeyJSON(record)
    }

    public func revokePasskey(userId: String, id: String) throws(ServiceError) {
        guard let credentialId = Base64URL.decode(id), !credentialId.isEmpty,
              try db({ try store.revokeCredential(userId: userId, id: credentialId, actor: userId) }) else {
            throw ServiceError.notFound("passkey")
        }
        keyCache.forget(credentialId)
    }
}

/// Runs a storage call; a database failure is a 503, never a crash.
func db<T>(_ body: () throws -> T) throws(ServiceError) -> T {
    do { return try body() } catch { throw ServiceError("internal_error", "storage unavailable") }
}

func iso8601(_ date: Date) -> String {
    var t = time_t(date.timeIntervalSince1970)
    var parts = tm()
    gmtime_r(&t, &parts)
    func pad(_ v: Int32, _ n: Int = 2) -> String { let s = String(v); return String(repeating: "0", count: max(0, n - s.count)) + s }
    return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1))-\(pad(parts.tm_mday))T\(pad(parts.tm_hour)):\(pad(parts.tm_min)):\(pad(parts.tm_sec))Z"
}

/// Parsed credential keys by credential id: a login skips COSE parsing and key import. Keys never
/// change for a credential id; revocation is checked in the database on every login regardless.
final class CredentialKeyCache: Sendable {
    private let entries = Mutex<[[UInt8]: COSEKey]>([:])
    static let limit = 50_000

    func key(for credential: CredentialRecord) throws(WebAuthnError) -> COSEKey {
        if let hit = entries.withLock({ $0[credential.id] }) { return hit }
        let key = try COSEKey(bytes: credential.publicKey)
        entries.withLock { e in
            if e.count >= Self.limit { e.removeAll(keepingCapacity: true) }
            e[credential.id] = key
        }
        return key
    }

    func forget(_ id: [UInt8]) { entries.withLock { _ = $0.removeValue(forKey: id) } }
}

/// The origin allowlist from PostgreSQL. Invalidated at once by this instance's own changes and by
/// NOTIFY from any other (AppService's ConfigWatcher), and re-read at least every second anyway, so
/// an admin change applies on every instance within one second even without the change feed.
public final class OriginCache: Sendable {
    let store: Store
    private let cache = RefreshingCache<OriginPolicy>(maxAge: 1)
    public init(store: Store) { self.store = store }

    /// The allowlist (≤ 1 s old); the last one read when the database is unreachable.
    public func policy() -> OriginPolicy {
        (try? cache.get { () throws -> OriginPolicy in OriginPolicy(try store.origins().map(\.origin)) })
            ?? cache.stale ?? OriginPolicy([String]())
    }

    public func invalidate() { cache.invalidate() }
}
