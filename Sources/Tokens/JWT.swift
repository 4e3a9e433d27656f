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
    public static func unverifiedClaims(_ token: String) -> JSONValue? {
        guard token.utf8.count <= 8192 else { return nil }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let bytes = Base64URL.decode(String(parts[1])), let claims = try? JSONParser.parse(bytes, maxDepth: 8),
              case .object = claims else { return nil }
        return claims
    }

    /// Verifies signature, type and time window; returns the claims. `keys` maps kid → public key.
    public static func verify(_ token: String, keys: [String: PublicKey], type: String = "at+jwt", now: Int64,
                              leewaySeconds: Int64 = 30) throws(TokenError) -> JSONValue {
        guard token.utf8.count <= 8192 else { throw TokenError(.malformed, "token too long") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(String(parts[0])),
              let claimBytes = Base64URL.decode(String(parts[1])), let sig = Base64URL.decode(String(parts[2])),
              let header = try? JSONParser.parse(headerBytes, maxDepth: 4), let claims = try? JSONParser.parse(claimBytes, maxDepth: 8),
              case .object = claims else {
            throw TokenError(.malformed, "not a compact JWS")
        }
        guard header["alg"]?.stringValue == "ES256" else { throw TokenError(.malformed, "alg must be ES256") }
        guard header["typ"]?.stringValue == type else { throw TokenError(.wrongType, "typ is not \(type)") }
        guard let kid = header["kid"]?.stringValue, let key = keys[kid] else { throw TokenError(.unknownKey, "unknown kid") }
        guard sig.count == 64, let der = try? ECDSASignature.derFromRaw(sig) else { throw TokenError(.badSignature, "bad signature") }
        let input = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard key.verify(signature: der, message: input, algorithm: .ecdsa(.sha256)) else {
            throw TokenError(.badSignature, "signature does not verify")
        }
        guard let exp = claims["exp"]?.intValue, Int64(exp) + leewaySeconds > now else { throw TokenError(.expired, "token expired") }
        if let nbf = claims["nbf"]?.intValue, Int64(nbf) - leewaySeconds > now { throw TokenError(.expired, "token not yet valid") }
        return claims
    }
}

/// Opaque bearer secrets (refresh tokens, enrolment tickets): random, and stored only as a hash.
public enum OpaqueToken {
    public static func generate(prefix: String = "") -> String { prefix + Base64URL.encode(SecureRandom.bytes(32)) }
    public static func hash(_ token: String) -> [UInt8] { Digest.sha256(Array(token.utf8)) }
}
