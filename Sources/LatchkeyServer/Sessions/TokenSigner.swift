import Crypto
import Foundation
import JSON
import Storage
import Synchronization
import Tokens

/// Signs and checks Latchkey's JWTs (access tokens, RFC 9068; step-up tokens) with ES256 keys that
/// live in PostgreSQL, so every instance signs with, and accepts, the same keys. Shared by the
/// session and step-up services; it knows nothing about sessions.
public final class TokenSigner: Sendable {
    let store: SigningKeyStore
    let configuration: Configuration
    let runtime: Runtime
    /// Newest first (the first signs); the map verifies.
    private let keys = Mutex<(ordered: [SigningKey], all: [String: PublicKey], loadedAt: Double)>(([], [:], 0))
    private let reloads = Atomic<Int>(0)

    /// Key-set reads from the database so far (each parses every private key): for tests and metrics.
    public var keyReloads: Int { reloads.load(ordering: .relaxed) }

    /// The monotonic time of the last reload an unknown `kid` asked for (shared by every thread).
    private let lastUnknownKidReload = Mutex<Double>(-.infinity)

    /// Key sets are re-read every minute so a rotation done by one instance reaches the others.
    static let reloadInterval = 60.0
    /// At most one reload per this many seconds for tokens naming a `kid` this instance does not
    /// know: a forged `kid` must not make every request read and parse every private key.
    static let unknownKidReloadInterval = 1.0

    init(store: SigningKeyStore, configuration: Configuration, runtime: Runtime) {
        self.store = store
        self.configuration = configuration
        self.runtime = runtime
    }

    /// Start-up step: the keys open under the KEK (plaintext rows from before are sealed first;
    /// without a KEK, or with a wrong one, this refuses), a signing key exists (rotating one older
    /// than 30 days), then the key set is loaded.
    public func prepareKeys() throws(SigningKeyError) {
        try store.prepare()
        let existing: [KeyRepository.StoredSigningKey]
        do { existing = try store.keys.signingKeys() } catch { throw SigningKeyError.storage(error) }
        if existing.isEmpty || runtime.now().timeIntervalSince(existing[0].createdAt) > 30 * 24 * 3600 {
            try store.add(SigningKey.generate())
        }
        try reloadKeys()
    }

    /// Adds a new signing key now (`latchkey keys rotate --signing-key`): it signs from the next
    /// reload on; the previous key stays live, so tokens it signed keep verifying.
    public func rotateSigningKey() throws(SigningKeyError) -> String {
        let key = SigningKey.generate()
        try store.add(key)
        try reloadKeys()
        return key.kid
    }

    func reloadKeys() throws(SigningKeyError) {
        reloads.add(1, ordering: .relaxed)
        let loaded = try store.load()
        let previous = keys.withLock { Dictionary($0.ordered.map { ($0.kid, $0) }, uniquingKeysWith: { a, _ in a }) }
        var ordered: [SigningKey] = []
        for entry in loaded {
            switch entry {
            case .key(let key): ordered.append(key)
            // Unreadable now but opened before (another instance re-encrypted under a new KEK while
            // this one runs with the old): keep what is in memory until this instance restarts.
            case .unreadable(let kid, _, _): if let known = previous[kid] { ordered.append(known) }
            }
        }
        var all: [String: PublicKey] = [:]
        for key in ordered { all[key.kid] = key.publicKey }
        let now = runtime.uptime()
        keys.withLock { $0 = (ordered, all, now) }
    }

    func keySet() -> (current: SigningKey?, all: [String: PublicKey]) {
        let now = runtime.uptime()
        let (current, all, due) = keys.withLock { k in
            guard now - k.loadedAt > Self.reloadInterval else { return (k.ordered.first, k.all, false) }
            k.loadedAt = now  // this caller reloads; the other threads keep the current set meanwhile
            return (k.ordered.first, k.all, true)
        }
        guard due else { return (current, all) }
        try? reloadKeys()  // the database being down keeps the last key set
        let k = keys.withLock { $0 }
        return (k.ordered.first, k.all)
    }

    public var jwks: JSONValue {
        .object([("keys", .array(keySet().all.sorted { $0.key < $1.key }.map { SigningKey.jwk($0.value, kid: $0.key) }))])
    }

    /// Signs `claims` with the current key as a compact JWS of `type`.
    func sign(_ claims: JSONValue, type: String) throws(ServiceError) -> String {
        guard let key = keySet().current else { throw ServiceError(.internalError, "no signing key") }
        return JWT.sign(claims: claims, key: key, type: type)
    }

    /// Verifies a bearer token of `type` (signature, time, issuer, audience); returns its claims.
    /// `leewaySeconds`: clock skew allowed on `exp`/`nbf` (step-up tokens take none: their TTL is all of it).
    func verify(_ token: String, type: String, leewaySeconds: Int64 = 30) throws(ServiceError) -> JSONValue {
        let now = runtime.unixTime
        do {
            return try checked(token, keys: keySet().all, type: type, now: now, leeway: leewaySeconds)
        } catch let e as TokenError where e.code == .unknownKey {
            // Perhaps a key another instance just created: reload, unless a reload ran within the last
            // second (then the key set is that fresh already; a reload loads every new key at once).
            guard claimUnknownKidReload() else { throw ServiceError.unauthorized }
            try? reloadKeys()
            guard let claims = try? checked(token, keys: keySet().all, type: type, now: now, leeway: leewaySeconds) else {
                throw ServiceError.unauthorized
            }
            return claims
        } catch {
            throw ServiceError.unauthorized
        }
    }

    /// True for the one caller per `unknownKidReloadInterval` that may reload.
    private func claimUnknownKidReload() -> Bool {
        let now = runtime.uptime()
        return lastUnknownKidReload.withLock { last in
            guard now - last >= Self.unknownKidReloadInterval else { return false }
            last = now
            return true
        }
    }

    private func checked(_ token: String, keys: [String: PublicKey], type: String, now: Int64, leeway: Int64) throws -> JSONValue {
        let claims = try JWT.verify(token, keys: keys, type: type, now: now, leewaySeconds: leeway)
        guard claims["iss"]?.stringValue == configuration.issuer, claims["aud"]?.stringValue == configuration.rpId else {
            throw ServiceError.unauthorized
        }
        return claims
    }
}

/// Opaque bearer secrets (refresh tokens, tickets): prefix + 32 random bytes, stored only as SHA-256.
struct OpaqueSecret {
    let token: String
    var hash: [UInt8] { OpaqueToken.hash(token) }

    init(prefix: String, runtime: Runtime) { token = prefix + Base64URL.encode(runtime.random(32)) }
    static func hash(_ presented: String) -> [UInt8] { OpaqueToken.hash(presented) }
}
