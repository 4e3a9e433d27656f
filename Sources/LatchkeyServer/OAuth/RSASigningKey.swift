import Crypto
import JSON
import Storage
import Synchronization
import Tokens

/// The deployment's RS256 key for id_tokens of clients that registered `RS256` (OpenID Discovery
/// §3 requires RS256 listed). Made once by whichever instance needs it first, sealed under the KEK
/// like the ES256 keys, shared through PostgreSQL, and published in the JWKS beside them.
final class RSASigningKey: Sendable {
    let keys: any RSAKeySource
    let sealer: SecretSealer
    /// The key, its kid and its public JWK for the JWKS, made once from what the store holds.
    private let cached = Mutex<(key: PrivateKey, kid: String, jwk: JSONValue)?>(nil)
    static let name = "oidc-rs256-signing-key"

    init(keys: any RSAKeySource, sealer: SecretSealer) {
        self.keys = keys
        self.sealer = sealer
    }

    func key() throws(ServiceError) -> (key: PrivateKey, kid: String) {
        let (key, kid, _) = try loaded()
        return (key, kid)
    }

    private func loaded() throws(ServiceError) -> (key: PrivateKey, kid: String, jwk: JSONValue) {
        if let hit = cached.withLock({ $0 }) { return hit }
        let sealed: [UInt8]
        do {
            let stored = try keys.secret(named: Self.name, candidate: [])
            if stored.isEmpty {
                let fresh = PrivateKey.generateRSA(bits: 2048)
                let candidate = try sealer.seal(Array(fresh.pkcs8PEM.utf8), purpose: "oidc-rs256", id: Self.name)
                try keys.replaceEmptySecret(named: Self.name, with: candidate)
                sealed = try keys.secret(named: Self.name, candidate: [])
            } else {
                sealed = stored
            }
        } catch let e as StorageError { throw ServiceError(e) } catch let e as ServiceError { throw e } catch {
            throw ServiceError(.internalError, "the RS256 key could not be made")
        }
        let pem = try sealer.open(sealed, purpose: "oidc-rs256", id: Self.name)
        guard let key = try? PrivateKey(pkcs8PEM: String(decoding: pem, as: UTF8.self)), let jwk = Self.required(key.publicKey) else {
            throw ServiceError(.internalError, "the RS256 key is unreadable")
        }
        let kid = Base64URL.encode(Digest.sha256(jwk.canonicalized()))
        guard case .object(let members) = jwk else { throw ServiceError(.internalError, "the RS256 key is unreadable") }
        let entry = (key, kid, JSONValue.object(members + [("use", "sig"), ("alg", "RS256"), ("kid", .string(kid))]))
        cached.withLock { $0 = entry }
        return entry
    }

    /// RFC 7638 §3.2: the required members of an RSA public JWK, {e, kty, n}.
    static func required(_ key: PublicKey) -> JSONValue? {
        guard let (n, e) = key.rsaComponents else { return nil }
        return .object([("e", .string(Base64URL.encode(e))), ("kty", "RSA"), ("n", .string(Base64URL.encode(n)))])
    }

    /// The public JWK for the JWKS: nil only where no RS256 key can exist (no KEK to seal it under);
    /// a key that cannot be read or made fails, so no JWKS is served without it.
    func jwk() throws(ServiceError) -> JSONValue? {
        guard sealer.isAvailable else { return nil }
        return try loaded().jwk
    }

    /// An id_token, RS256 (signed in Tokens).
    func sign(_ claims: IDTokenClaims) throws(ServiceError) -> String {
        let (key, kid) = try key()
        do { return try JWT.signRS256(claims: claims.payload, key: key, kid: kid) } catch {
            throw ServiceError(.internalError, "RS256 signing failed")
        }
    }
}

/// Where the sealed RS256 key is kept (`KeyRepository`'s `server_secrets`, or a test's memory): a
/// secret created empty by the first `secret(named:candidate: [])`, then filled once.
protocol RSAKeySource: DeploymentSecretSource {
    /// Sets the secret `name` to `value` only while it is still empty: the first instance to fill it wins.
    func replaceEmptySecret(named name: String, with value: [UInt8]) throws(StorageError)
}

extension KeyRepository: RSAKeySource {}
