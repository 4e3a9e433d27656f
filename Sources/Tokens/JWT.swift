import Crypto
import JSON

/// Why a token was refused. Codes are stable; `reason` never contains the token.
public struct TokenError: Error, Hashable, CustomStringConvertible, Sendable {
    public enum Code: String, Sendable { case malformed, unknownKey, badSignature, expired, wrongType, wrongAudience, wrongIssuer }
    public let code: Code
    public let reason: String
    public init(_ code: Code, _ reason: String) { self.code = code; self.reason = reason }
    public var description: String { "\(code.rawValue): \(reason)" }
    public static func == (l: TokenError, r: TokenError) -> Bool { l.code == r.code }
    public func hash(into h: inout Hasher) { h.combine(code) }
}

/// An ES256 signing key with its key id (RFC 7638 JWK thumbprint).
public struct SigningKey: Sendable {
    public let privateKey: PrivateKey
    public let publicKey: PublicKey
    public let kid: String
    /// The encoded JOSE header of an access token (`typ` `at+jwt`) under this key, written once:
    /// every login signs one.
    let accessTokenHeader: String

    public init(_ privateKey: PrivateKey) {
        self.privateKey = privateKey
        self.publicKey = privateKey.publicKey
        self.kid = SigningKey.thumbprint(publicKey)
        self.accessTokenHeader = JWT.encodedHeader(kid: kid, type: AccessClaims.type)
    }

    public static func generate() -> SigningKey { SigningKey(.generateEC(.p256)) }

    /// The public JWK (RFC 7517/7518) for the JWKS.
    public static func jwk(_ key: PublicKey, kid: String) -> JSONValue {
        guard case .object(let members) = requiredMembers(key) else { return .object([]) }
        return .object(members + [("use", "sig"), ("alg", "ES256"), ("kid", .string(kid))])
    }

    /// RFC 7638: SHA-256 over the canonical required members {crv, kty, x, y}.
    public static func thumbprint(_ key: PublicKey) -> String {
        guard let required = requiredMembers(key) else { return "" }
        return Base64URL.encode(Digest.sha256(required.canonicalized()))
    }

    /// The members RFC 7518 §6.2.1 requires of a P-256 public JWK.
    static func requiredMembers(_ key: PublicKey) -> JSONValue? {
        guard let point = key.x963Point, point.count == 65 else { return nil }
        return .object([("crv", "P-256"), ("kty", "EC"), ("x", .string(Base64URL.encode(Array(point[1...32])))),
                        ("y", .string(Base64URL.encode(Array(point[33...64]))))])
    }
}

/// Compact JWS with ES256 (RFC 7515/7518), as RFC 9068 access tokens use.
public enum JWT {
    public static func sign(claims: JSONValue, key: SigningKey, type: String = "at+jwt") -> String {
        sign(payload: claims.serialized(), key: key, type: type)
    }

    /// `payload`: the claims' JSON text (the bytes the token's second part encodes).
    public static func sign(payload: [UInt8], key: SigningKey, type: String = "at+jwt") -> String {
        var input = type == AccessClaims.type ? key.accessTokenHeader : encodedHeader(kid: key.kid, type: type)
        input += "."
        input += Base64URL.encode(payload)
        let der = try! key.privateKey.sign(Array(input.utf8), algorithm: .ecdsa(.sha256))
        let raw = try! ECDSASignature.rawFromDER(der, coordinateLength: 32)
        input += "."
        input += Base64URL.encode(raw)
        return input
    }

    /// The base64url JOSE header (RFC 7515 §4): ES256, `type`, `kid`.
    static func encodedHeader(kid: String, type: String) -> String {
        var header = JSONObjectWriter(capacity: 96)
        header.member("alg", string: "ES256")
        header.member("typ", string: type)
        header.member("kid", string: kid)
        return Base64URL.encode(header.finish())
    }

    /// The claims of a compact JWS, nothing checked: only to key a read that is used once the token
    /// has been verified (`verify`) and found to carry the same claim. Nil when it is not one.
    public static func unverifiedClaims(_ token: String) -> JSONValue? { CompactJWS(token)?.claims }

    /// Verifies signature, type and time window; returns the claims. `keys` maps kid → public key.
    public static func verify(_ token: String, keys: [String: PublicKey], type: String = "at+jwt", now: Int64,
                              leewaySeconds: Int64 = 30) throws(TokenError) -> JSONValue {
        guard token.utf8.count <= CompactJWS.maximumLength else { throw TokenError(.malformed, "token too long") }
        guard let jws = CompactJWS(token) else { throw TokenError(.malformed, "not a compact JWS") }
        let claims = jws.claims
        guard jws.alg == "ES256" else { throw TokenError(.malformed, "alg must be ES256") }
        guard jws.type == type else { throw TokenError(.wrongType, "typ is not \(type)") }
        guard let kid = jws.kid, let key = keys[kid] else { throw TokenError(.unknownKey, "unknown kid") }
        guard jws.signature.count == 64 else { throw TokenError(.badSignature, "bad signature") }
        guard jws.verifies(with: key, algorithm: .ecdsa(.sha256)) else { throw TokenError(.badSignature, "signature does not verify") }
        guard let exp = claims["exp"]?.intValue, Int64(exp) + leewaySeconds > now else { throw TokenError(.expired, "token expired") }
        if let nbf = claims["nbf"]?.intValue, Int64(nbf) - leewaySeconds > now { throw TokenError(.expired, "token not yet valid") }
        return claims
    }

    /// An RS256 JWS (RFC 7518 §3.3) signed by `key`, named by `kid` in its header: the claims when
    /// the signature verifies. Nothing else is checked (the caller checks what its use needs).
    public static func verifyRS256(_ token: String, key: PublicKey, kid: String) -> JSONValue? {
        guard let jws = CompactJWS(token), jws.alg == "RS256", jws.kid == kid, jws.verifies(with: key, algorithm: .rsaPKCS1(.sha256)) else {
            return nil
        }
        return jws.claims
    }
}

/// A compact JWS (RFC 7515 §7.1) split and decoded, nothing judged: the one parser of the JWTs
/// Latchkey reads (its own tokens, RS256 id_token hints, clients' `private_key_jwt` assertions).
public struct CompactJWS: Sendable {
    /// Longer tokens are not read at all.
    public static let maximumLength = 8192

    public let header: JSONValue
    /// A JSON object.
    public let claims: JSONValue
    /// The bytes the signature covers (RFC 7515 §5.2: the first two parts and their dot).
    public let signingInput: [UInt8]
    public let signature: [UInt8]

    public var alg: String? { header["alg"]?.stringValue }
    public var kid: String? { header["kid"]?.stringValue }
    public var type: String? { header["typ"]?.stringValue }

    /// Nil unless `token` is three base64url parts, a JSON header and a JSON object of claims
    /// (nested at most `claimsDepth` deep), within `maximumLength`.
    public init?(_ token: String, claimsDepth: Int = 8) {
        guard token.utf8.count <= Self.maximumLength else { return nil }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let h = Base64URL.decode(String(parts[0])), let c = Base64URL.decode(String(parts[1])),
              let signature = Base64URL.decode(String(parts[2])), let header = try? JSONParser.parse(h, maxDepth: 4),
              let claims = try? JSONParser.parse(c, maxDepth: claimsDepth), case .object = claims else { return nil }
        self.header = header
        self.claims = claims
        self.signature = signature
        signingInput = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
    }

    /// Whether the signature verifies with `key` under `algorithm`; an ECDSA signature is JOSE's
    /// R || S (RFC 7518 §3.4), which must be 64 bytes (P-256).
    public func verifies(with key: PublicKey, algorithm: SignatureAlgorithm) -> Bool {
        if case .ecdsa = algorithm {
            guard signature.count == 64, let der = try? ECDSASignature.derFromRaw(signature) else { return false }
            return key.verify(signature: der, message: signingInput, algorithm: algorithm)
        }
        return key.verify(signature: signature, message: signingInput, algorithm: algorithm)
    }
}

/// Opaque bearer secrets (refresh tokens, enrolment tickets): random, and stored only as a hash.
public enum OpaqueToken {
    public static func generate(prefix: String = "") -> String { prefix + Base64URL.encode(SecureRandom.bytes(32)) }
    public static func hash(_ token: String) -> [UInt8] { Digest.sha256(Array(token.utf8)) }
}
