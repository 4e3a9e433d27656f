/// Signature schemes by what OpenSSL must do, independent of COSE or JOSE numbering.
public enum SignatureAlgorithm: Sendable, Hashable {
    case ecdsa(HashFunction)      // DER-encoded ECDSA signature
    case ed25519
    case rsaPKCS1(HashFunction)
    case rsaPSS(HashFunction)     // salt length = hash length (RFC 8230 §2)
}

public enum EllipticCurve: String, Sendable, Hashable {
    case p256 = "P-256", p384 = "P-384", p521 = "P-521"

    var openSSLName: String {
        switch self { case .p256: "prime256v1"; case .p384: "secp384r1"; case .p521: "secp521r1" }
    }
    public var coordinateLength: Int {
        switch self { case .p256: 32; case .p384: 48; case .p521: 66 }
    }
}

public enum KeyType: Sendable, Hashable {
    case ec(EllipticCurve), ed25519, rsa(bits: Int), other
}
