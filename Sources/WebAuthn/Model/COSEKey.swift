import CBOR
import Crypto

/// COSE algorithm identifiers (IANA COSE registry; RFC 9053, RFC 8230, RFC 8812).
public struct COSEAlgorithm: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int
    public init(_ rawValue: Int) { self.rawValue = rawValue }

    public static let es256 = COSEAlgorithm(-7), es384 = COSEAlgorithm(-35), es512 = COSEAlgorithm(-36)
    public static let edDSA = COSEAlgorithm(-8), ed25519 = COSEAlgorithm(-19)
    public static let rs256 = COSEAlgorithm(-257), rs384 = COSEAlgorithm(-258), rs512 = COSEAlgorithm(-259)
    public static let ps256 = COSEAlgorithm(-37), ps384 = COSEAlgorithm(-38), ps512 = COSEAlgorithm(-39)
    /// RSASSA-PKCS1-v1_5 with SHA-1: only inside attestation statements that require it (TPM, …).
    public static let rs1 = COSEAlgorithm(-65535)

    /// What a credential key may use by default (SPEC: ES256/384/512, RS256, PS256, EdDSA).
    public static let credentialDefaults: [COSEAlgorithm] = [.es256, .edDSA, .es384, .es512, .rs256, .ps256]

    public var name: String {
        switch rawValue {
        case -7: "ES256"; case -35: "ES384"; case -36: "ES512"; case -8: "EdDSA"; case -19: "Ed25519"
        case -257: "RS256"; case -258: "RS384"; case -259: "RS512"
        case -37: "PS256"; case -38: "PS384"; case -39: "PS512"; case -65535: "RS1"
        case -48: "ML-DSA-44"; case -49: "ML-DSA-65"; case -50: "ML-DSA-87"
        default: "COSE(\(rawValue))"
        }
    }
    public var description: String { name }

    /// The OpenSSL scheme; nil for algorithms Latchkey does not verify (e.g. ML-DSA on OpenSSL 3.0).
    public var signatureAlgorithm: SignatureAlgorithm? {
        switch self {
        case .es256: .ecdsa(.sha256); case .es384: .ecdsa(.sha384); case .es512: .ecdsa(.sha512)
        case .edDSA, .ed25519: .ed25519
        case .rs256: .rsaPKCS1(.sha256); case .rs384: .rsaPKCS1(.sha384); case .rs512: .rsaPKCS1(.sha512)
        case .ps256: .rsaPSS(.sha256); case .ps384: .rsaPSS(.sha384); case .ps512: .rsaPSS(.sha512)
        case .rs1: .rsaPKCS1(.sha1)
        default: nil
        }
    }

    /// The curve an ECDSA algorithm requires (RFC 9053 §2.1: ES256 with P-256, …).
    var requiredCurve: EllipticCurve? {
        switch self { case .es256: .p256; case .es384: .p384; case .es512: .p521; default: nil }
    }
}

/// A credential public key in COSE_Key form (RFC 9052 §7), imported into OpenSSL.
public struct COSEKey: Sendable {
    public enum KeyType: Int, Sendable { case okp = 1, ec2 = 2, rsa = 3 }

    public let algorithm: COSEAlgorithm
    /// What `algorithm` asks of OpenSSL; every COSEKey has one (init refuses algorithms without).
    public let signatureAlgorithm: SignatureAlgorithm
    public let keyType: KeyType
    public let publicKey: PublicKey

    public init(bytes: [UInt8]) throws(WebAuthnError) {
        // The usual key (integer labels, integer and byte-string values) without libcbor; anything
        // else goes through the full decoder, which also decides every refusal.
        if let flat = CBORDecoder.decodeFlatIntegerMap(bytes) { try self.init(flat); return }
        let value: CBORValue
        do { value = try CBORDecoder.decode(bytes, maxDepth: 2) } catch { throw .invalid("COSE key: \(error.reason)") }
        try self.init(value)
    }

    public init(_ value: CBORValue) throws(WebAuthnError) {
        guard case .map(let pairs) = value else { throw .invalid("COSE key is not a map") }
        func int(_ label: Int) -> Int? { value[int: label]?.intValue }
        func bytes(_ label: Int) -> [UInt8]? { value[int: label]?.bytesValue }
        for pair in pairs where pair.key.intValue == nil && pair.key.textValue == nil {
            throw .invalid("COSE key labels must be integers or text")
        }
        guard let ktyValue = int(1) else { throw .invalid("COSE key has no integer kty (1)") }
        guard let algValue = int(3) else { throw .invalid("COSE key has no integer alg (3)") }
        let alg = COSEAlgorithm(algValue)
        guard let scheme = alg.signatureAlgorithm else {
            throw WebAuthnError(.algorithmUnsupported, "algorithm \(alg.name) is not supported")
        }
        guard let kty = KeyType(rawValue: ktyValue) else {
            throw WebAuthnError(.algorithmUnsupported, "COSE key type \(ktyValue) is not supported")
        }
        let key: PublicKey
        do {
            switch (kty, scheme) {
            case (.ec2, .ecdsa):
                guard value[int: -4] == nil else { throw WebAuthnError.invalid("COSE key carries a private key") }
                let curve: EllipticCurve
                switch int(-1) {
                case 1: curve = .p256
                case 2: curve = .p384
                case 3: curve = .p521
                default: throw WebAuthnError(.algorithmUnsupported, "EC2 curve is not P-256, P-384 or P-521")
                }
                guard alg.requiredCurve == curve else {
                    throw WebAuthnError(.algorithmUnsupported, "\(alg.name) does not go with \(curve.rawValue)")
                }
                guard let x = bytes(-2), let y = bytes(-3) else {
                    // A boolean y (compressed point) is legal COSE but not used by WebAuthn authenticators.
                    throw WebAuthnError.invalid("EC2 key needs x (-2) and y (-3) byte strings")
                }
                key = try PublicKey.ec(curve: curve, x: x, y: y)
            case (.okp, .ed25519):
                guard value[int: -4] == nil else { throw WebAuthnError.invalid("COSE key carries a private key") }
                guard int(-1) == 6 else { throw WebAuthnError(.algorithmUnsupported, "OKP curve is not Ed25519 (6)") }
                guard let x = bytes(-2) else { throw WebAuthnError.invalid("OKP key needs x (-2)") }
                key = try PublicKey.ed25519(x)
            case (.rsa, .rsaPKCS1), (.rsa, .rsaPSS):
                guard let n = bytes(-1), let e = bytes(-2) else { throw WebAuthnError.invalid("RSA key needs n (-1) and e (-2)") }
                key = try PublicKey.rsa(modulus: n, exponent: e)
            default:
                throw WebAuthnError(.algorithmUnsupported, "\(alg.name) does not go with key type \(kty)")
            }
        } catch let error as WebAuthnError {
            throw error
        } catch let error as CryptoError {
            throw .invalid("COSE key: \(error.reason)")
        } catch {
            throw .invalid("COSE key is invalid")
        }
        self.algorithm = alg
        self.signatureAlgorithm = scheme
        self.keyType = kty
        self.publicKey = key
    }

    /// Verifies a signature made with this credential (WebAuthn L3 §7.2 step 20).
    public func verify(signature: [UInt8], over message: [UInt8]) -> Bool {
        publicKey.verify(signature: signature, message: message, algorithm: signatureAlgorithm)
    }

    /// COSE_Key bytes for an existing OpenSSL public key (used by the test authenticator).
    public static func encode(_ key: PublicKey, algorithm: COSEAlgorithm) -> [UInt8]? {
        var pairs: [CBORPair] = []
        switch key.type {
        case .ec(let curve):
            guard let point = key.x963Point else { return nil }
            let n = curve.coordinateLength
            let crv = curve == .p256 ? 1 : curve == .p384 ? 2 : 3
            pairs = [CBORPair(.int(1), .int(2)), CBORPair(.int(3), .int(algorithm.rawValue)), CBORPair(.int(-1), .int(crv)),
                     CBORPair(.int(-2), .bytes(Array(point[1...n]))), CBORPair(.int(-3), .bytes(Array(point[(n + 1)...])))]
        case .ed25519:
            guard let raw = key.rawEd25519 else { return nil }
            pairs = [CBORPair(.int(1), .int(1)), CBORPair(.int(3), .int(algorithm.rawValue)), CBORPair(.int(-1), .int(6)),
                     CBORPair(.int(-2), .bytes(raw))]
        case .rsa:
            guard let (n, e) = key.rsaComponents else { return nil }
            pairs = [CBORPair(.int(1), .int(3)), CBORPair(.int(3), .int(algorithm.rawValue)),
                     CBORPair(.int(-1), .bytes(n)), CBORPair(.int(-2), .bytes(e))]
        case .other: return nil
        }
        return CBOREncoder.encode(.map(pairs))
    }
}
