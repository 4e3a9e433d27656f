import Crypto
import Foundation
import JSON
import Synchronization

/// Why the token signing keys could not be prepared, loaded or re-encrypted. `description` is the
/// operator's message (it names kids and key-encryption-key ids, never key material).
public struct SigningKeyError: Error, CustomStringConvertible, Sendable {
    public enum Code: Sendable { case keyEncryptionKeyMissing, keyEncryptionKeyWrong, storage, conflict }
    public let code: Code
    public let description: String

    public init(code: Code, description: String) {
        self.code = code
        self.description = description
    }
}

/// One stored signing key as its store reads it back.
public enum StoredSigningKey: Sendable {
    case key(SigningKey)
    /// A key that does not open (sealed under another key-encryption key): `reason` and, when
    /// known, the id of the key-encryption key it was sealed under, for the operator.
    case unreadable(kid: String, reason: String, sealedUnder: String?)
}

/// Where the signing keys live (every instance of a deployment shares them): the server keeps
/// them sealed in PostgreSQL (`SigningKeyStore`); tests may keep them anywhere.
public protocol SigningKeySource: Sendable {
    /// Start-up: whatever the store must do before keys can be loaded (seal old rows, check that
    /// every live key opens); refuses to go on rather than lose or replace keys.
    func prepare() throws(SigningKeyError)
    /// The live keys, newest first.
    func load() throws(SigningKeyError) -> [StoredSigningKey]
    /// Seconds since the newest live key was made, on the clock that stamped it (nil: there is none).
    func newestKeyAge() throws(SigningKeyError) -> TimeInterval?
    /// Stores a new key; it becomes the newest.
    func add(_ key: SigningKey) throws(SigningKeyError)
}

/// The clock a token signer reads (the server's `Runtime`): Unix seconds for `iat`/`exp`, a
/// monotonic reading for its reload schedule.
public struct TokenClock: Sendable {
    public let now: @Sendable () -> Date
    public let unixTime: @Sendable () -> Int64
    public let uptime: @Sendable () -> Double

    public init(now: @escaping @Sendable () -> Date, unixTime: @escaping @Sendable () -> Int64, uptime: @escaping @Sendable () -> Double) {
        self.now = now
        self.unixTime = unixTime
        self.uptime = uptime
    }
}

/// Signs and checks Latchkey's JWTs (access tokens, RFC 9068; step-up tokens) with ES256 keys from
/// a `SigningKeySource`, so every instance signs with, and accepts, the same keys. It knows nothing
/// about sessions or step-ups: their claims are `AccessClaims` and `StepUpClaims`.
public final class TokenSigner: Sendable {
    public let source: any SigningKeySource
    let issuer: String
    let audience: String
    let clock: TokenClock
    /// Newest first (the first signs); the map verifies.
    private let keys = Mutex<(ordered: [SigningKey], all: [String: PublicKey], loadedAt: Double)>(([], [:], 0))
    private let reloads = Atomic<Int>(0)
    /// The monotonic time of the last reload an unknown `kid` asked for (shared by every thread).
    private let lastUnknownKidReload = Mutex<Double>(-.infinity)

    /// Key-set reads from the source so far (each parses every private key): for tests and metrics.
    public var keyReloads: Int { reloads.load(ordering: .relaxed) }

    /// Key sets are re-read every minute so a rotation done by one instance reaches the others.
    public static let reloadInterval = 60.0
    /// At most one reload per this many seconds for tokens naming a `kid` this instance does not
    /// know: a forged `kid` must not make every request read and parse every private key.
    public static let unknownKidReloadInterval = 1.0
    /// A signing key older than this is replaced at start-up (the previous one stays live).
    public static let rotationAge: TimeInterval = 30 * 24 * 3600

    public init(source: any SigningKeySource, issuer: String, audience: String, clock: TokenClock) {
        self.source = source
        self.issuer = issuer
        self.audience = audience
        self.clock = clock
    }

    /// Start-up step: the source is prepared, a signing key exists (rotating one older than
    /// `rotationAge`), then the key set is loaded.
    public func prepareKeys() throws(SigningKeyError) {
        try source.prepare()
        let age = try source.newestKeyAge()
        if age == nil || age! > Self.rotationAge {
            try source.add(SigningKey.generate())
        }
        try reloadKeys()
    }

    /// Adds a new signing key now (`latchkey keys rotate --signing-key`): it signs from the next
    /// reload on; the previous key stays live, so tokens it signed keep verifying.
    public func rotateSigningKey() throws(SigningKeyError) -> String {
        let key = SigningKey.generate()
        try source.add(key)
        try reloadKeys()
        return key.kid
    }

    public func reloadKeys() throws(SigningKeyError) {
        reloads.add(1, ordering: .relaxed)
        let loaded = try source.load()
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
        let now = clock.uptime()
        keys.withLock { $0 = (ordered, all, now) }
    }

    /// The key that signs now and every key that verifies, re-read when `reloadInterval` has passed.
    public func keySet() -> (current: SigningKey?, all: [String: PublicKey]) {
        let now = clock.uptime()
        let (current, all, due) = keys.withLock { k in
            guard now - k.loadedAt > Self.reloadInterval else { return (k.ordered.first, k.all, false) }
            k.loadedAt = now  // this caller reloads; the other threads keep the current set meanwhile
            return (k.ordered.first, k.all, true)
        }
        guard due else { return (current, all) }
        try? reloadKeys()  // the source being unreachable keeps the last key set
        let k = keys.withLock { $0 }
        return (k.ordered.first, k.all)
    }

    public var jwks: JSONValue {
        .object([("keys", .array(keySet().all.sorted { $0.key < $1.key }.map { SigningKey.jwk($0.value, kid: $0.key) }))])
    }

    /// An access token for `claims`.
    public func sign(_ claims: AccessClaims) throws(TokenError) -> String {
        guard let key = keySet().current else { throw TokenError(.unknownKey, "no signing key") }
        return JWT.sign(payload: claims.payloadBytes(issuer: issuer, audience: audience), key: key, type: AccessClaims.type)
    }

    /// A step-up token for `claims`.
    public func sign(_ claims: StepUpClaims) throws(TokenError) -> String {
        try sign(claims.payload(issuer: issuer, audience: audience), type: StepUpClaims.type)
    }

    /// Signs a payload with the current key as a compact JWS of `type`.
    public func sign(_ payload: JSONValue, type: String) throws(TokenError) -> String {
        guard let key = keySet().current else { throw TokenError(.unknownKey, "no signing key") }
        return JWT.sign(claims: payload, key: key, type: type)
    }

    /// A verified access token's claims (signature, time with `leewaySeconds` of skew, issuer, audience).
    public func accessClaims(_ token: String, leewaySeconds: Int64 = 30) throws(TokenError) -> AccessClaims {
        try AccessClaims(verified: try verify(token, type: AccessClaims.type, leewaySeconds: leewaySeconds))
    }

    /// A verified step-up token's claims, with no leeway: its lifetime is all of it.
    public func stepUpClaims(_ token: String) throws(TokenError) -> StepUpClaims {
        try StepUpClaims(verified: try verify(token, type: StepUpClaims.type, leewaySeconds: 0))
    }

    /// Verifies a bearer token of `type` (signature, time, issuer, audience); returns its claims.
    public func verify(_ token: String, type: String, leewaySeconds: Int64 = 30) throws(TokenError) -> JSONValue {
        let now = clock.unixTime()
        do {
            return try checked(token, keys: keySet().all, type: type, now: now, leeway: leewaySeconds)
        } catch where error.code == .unknownKey {
            // Perhaps a key another instance just created: reload, unless a reload ran within the last
            // second (then the key set is that fresh already; a reload loads every new key at once).
            guard claimUnknownKidReload() else { throw error }
            try? reloadKeys()
            return try checked(token, keys: keySet().all, type: type, now: now, leeway: leewaySeconds)
        }
    }

    /// True for the one caller per `unknownKidReloadInterval` that may reload.
    private func claimUnknownKidReload() -> Bool {
        let now = clock.uptime()
        return lastUnknownKidReload.withLock { last in
            guard now - last >= Self.unknownKidReloadInterval else { return false }
            last = now
            return true
        }
    }

    private func checked(_ token: String, keys: [String: PublicKey], type: String, now: Int64, leeway: Int64) throws(TokenError) -> JSONValue {
        let claims = try JWT.verify(token, keys: keys, type: type, now: now, leewaySeconds: leeway)
        guard claims["iss"]?.stringValue == issuer else { throw TokenError(.wrongIssuer, "another issuer") }
        guard claims["aud"]?.stringValue == audience else { throw TokenError(.wrongAudience, "another audience") }
        return claims
    }
}
