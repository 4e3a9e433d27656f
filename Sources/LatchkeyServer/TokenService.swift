import Crypto
import Foundation
import JSON
import Storage
import Synchronization
import Tokens
import WebAuthn

/// Issues and checks ES256 access tokens (RFC 9068) and rotating refresh tokens. Signing keys live
/// in PostgreSQL so every instance signs with, and accepts, the same keys.
public final class TokenService: Sendable {
    let store: Store
    let configuration: Configuration
    private let keys = Mutex<(current: SigningKey?, all: [String: PublicKey], loadedAt: Double)>((nil, [:], 0))

    public init(store: Store, configuration: Configuration) {
        self.store = store
        self.configuration = configuration
    }

    /// Makes sure a signing key exists (rotating one older than 30 days) and loads the key set.
    public func prepareKeys() throws {
        let existing = try store.signingKeys()
        if existing.isEmpty || existing[0].createdAt.timeIntervalSinceNow < -30 * 24 * 3600 {
            let key = SigningKey.generate()
            try store.insertSigningKey(kid: key.kid, pem: key.privateKey.pkcs8PEM)
        }
        try reloadKeys()
    }

    func reloadKeys() throws {
        let rows = try store.signingKeys()
        var all: [String: PublicKey] = [:]
        var current: SigningKey? = nil
        for row in rows {
            guard let pk = try? PrivateKey(pkcs8PEM: row.pem) else { continue }
            let key = SigningKey(pk)
            all[key.kid] = key.publicKey
            if current == nil { current = key }
        }
        let now = monotonicNow()
        keys.withLock { $0 = (current, all, now) }
    }

    /// Keys are re-read every minute so a rotation done by one instance reaches the others.
    func keySet() -> (current: SigningKey?, all: [String: PublicKey]) {
        let (current, all, loadedAt) = keys.withLock { $0 }
        if monotonicNow() - loadedAt > 60 { try? reloadKeys(); let k = keys.withLock { $0 }; return (k.current, k.all) }
        return (current, all)
    }

    public var jwks: JSONValue {
        .object([("keys", .array(keySet().all.sorted { $0.key < $1.key }.map { SigningKey.jwk($0.value, kid: $0.key) }))])
    }

    public struct Issued: Sendable {
        public let accessToken: String
        public let refreshToken: String
        public let expiresIn: Int
        public var json: JSONValue {
            .object([("access_token", .string(accessToken)), ("token_type", "Bearer"), ("expires_in", .number(Double(expiresIn))),
                     ("refresh_token", .string(refreshToken))])
        }
    }

    /// Signs `claims` with the current key as a compact JWS of `type`.
    func sign(_ claims: JSONValue, type: String) throws(ServiceError) -> String {
        guard let key = keySet().current else { throw ServiceError("internal_error", "no signing key") }
        return JWT.sign(claims: claims, key: key, type: type)
    }

    /// An RFC 9068 access token for `userId`, tied to refresh family `sessionId`.
    public func accessToken(userId: String, sessionId: String, authTime: Int64, userVerified: Bool) throws(ServiceError) -> String {
        let now = Int64(Date().timeIntervalSince1970)
        return try sign(.object([
            ("iss", .string(configuration.issuer)), ("sub", .string(userId)), ("aud", .string(configuration.rpId)),
            ("client_id", "latchkey"), ("iat", .number(Double(now))), ("exp", .number(Double(now + Int64(configuration.accessTokenTTL)))),
            ("jti", .string(Base64URL.encode(SecureRandom.bytes(16)))), ("auth_time", .number(Double(authTime))),
            ("sid", .string(sessionId)),
            ("acr", .string(userVerified ? "urn:latchkey:acr:passkey-uv" : "urn:latchkey:acr:passkey")),
            ("amr", .array(userVerified ? ["pop", "user", "mfa"] : ["pop"])),
        ]), type: "at+jwt")
    }

    /// The token response for a session: a fresh access token beside the session's new refresh token.
    func issue(userId: String, familyId: String, refreshToken: String, userVerified: Bool) throws(ServiceError) -> Issued {
        let access = try accessToken(userId: userId, sessionId: familyId, authTime: Int64(Date().timeIntervalSince1970),
                                     userVerified: userVerified)
        return Issued(accessToken: access, refreshToken: refreshToken, expiresIn: configuration.accessTokenTTL)
    }

    /// Verifies a bearer token of `type` (signature, time, issuer, audience); returns its claims.
    public func verify(_ token: String, type: String = "at+jwt") throws(ServiceError) -> JSONValue {
        let now = Int64(Date().timeIntervalSince1970)
        do {
            return try checked(token, keys: keySet().all, type: type, now: now)
        } catch let e as TokenError where e.code == .unknownKey {
            // A key another instance just created: reload once.
            try? reloadKeys()
            guard let claims = try? checked(token, keys: keySet().all, type: type, now: now) else { throw ServiceError.unauthorized }
            return claims
        } catch {
            throw ServiceError.unauthorized
        }
    }

    private func checked(_ token: String, keys: [String: PublicKey], type: String, now: Int64) throws -> JSONValue {
        let claims = try JWT.verify(token, keys: keys, type: type, now: now)
        guard claims["iss"]?.stringValue == configuration.issuer, claims["aud"]?.stringValue == configuration.rpId else {
            throw ServiceError.unauthorized
        }
        return claims
    }

    /// A new refresh token (opaque, stored hashed) and its hash.
    public static func newRefreshToken() -> (token: String, hash: [UInt8]) {
        let token = OpaqueToken.generate(prefix: "lkr_")
        return (token, OpaqueToken.hash(token))
    }
}

/// Seconds on the monotonic clock (cache ages, latencies; never wall-clock time).
public func monotonicNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}
