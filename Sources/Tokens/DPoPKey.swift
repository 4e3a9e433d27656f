import Crypto
import JSON

/// A client's DPoP key: makes proofs (RFC 9449 §4.2). Used by Latchkey's own clients and tests; the
/// server only verifies (`DPoP.verify`).
public struct DPoPKey: Sendable {
    public let privateKey: PrivateKey
    public let algorithm: DPoPAlgorithm
    /// The public JWK the proofs carry.
    public let jwk: JSONValue
    /// Its RFC 7638 thumbprint (what tokens are bound to).
    public let jkt: String

    public init(_ privateKey: PrivateKey, algorithm: DPoPAlgorithm) {
        self.privateKey = privateKey
        self.algorithm = algorithm
        let key = privateKey.publicKey
        switch algorithm {
        case .es256:
            let point = key.x963Point ?? []
            jwk = .object([("kty", "EC"), ("crv", "P-256"), ("x", .string(Base64URL.encode(Array(point.dropFirst().prefix(32))))),
                           ("y", .string(Base64URL.encode(Array(point.dropFirst(33)))))])
        case .edDSA:
            jwk = .object([("kty", "OKP"), ("crv", "Ed25519"), ("x", .string(Base64URL.encode(key.rawEd25519 ?? [])))])
        case .rs256, .ps256:
            let parts = key.rsaComponents
            jwk = .object([("kty", "RSA"), ("n", .string(Base64URL.encode(parts?.modulus ?? []))),
                           ("e", .string(Base64URL.encode(parts?.exponent ?? [])))])
        }
        jkt = DPoP.thumbprint(jwk: jwk) ?? ""
    }

    public static func generate(_ algorithm: DPoPAlgorithm = .es256) -> DPoPKey {
        switch algorithm {
        case .es256: DPoPKey(.generateEC(.p256), algorithm: .es256)
        case .edDSA: DPoPKey(.generateEd25519(), algorithm: .edDSA)
        case .rs256, .ps256: DPoPKey(.generateRSA(bits: 2048), algorithm: algorithm)
        }
    }

    /// A proof for `method` `url` (query and fragment are the caller's to leave out) at `iat`.
    public func proof(method: String, url: String, iat: Int64, jti: String = Base64URL.encode(SecureRandom.bytes(16)),
                      accessToken: String? = nil, nonce: String? = nil) -> String {
        var claims: [(key: String, value: JSONValue)] = [("jti", .string(jti)), ("htm", .string(method)), ("htu", .string(url)),
                                                         ("iat", .number(Double(iat)))]
        if let accessToken { claims.append(("ath", .string(DPoP.ath(accessToken)))) }
        if let nonce { claims.append(("nonce", .string(nonce))) }
        return sign(header: .object([("typ", .string(DPoP.type)), ("alg", .string(algorithm.rawValue)), ("jwk", jwk)]),
                    claims: .object(claims))
    }

    /// Any header and claims, signed with this key under its algorithm.
    public func sign(header: JSONValue, claims: JSONValue) -> String {
        let input = Base64URL.encode(header.serialized()) + "." + Base64URL.encode(claims.serialized())
        let message = Array(input.utf8)
        var signature = (try? privateKey.sign(message, algorithm: algorithm.signature)) ?? []
        if algorithm == .es256 { signature = (try? ECDSASignature.rawFromDER(signature, coordinateLength: 32)) ?? [] }
        return input + "." + Base64URL.encode(signature)
    }
}
