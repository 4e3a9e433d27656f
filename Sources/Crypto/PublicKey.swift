internal import COpenSSL

/// Owns an OpenSSL `EVP_PKEY`. OpenSSL 3 keys are safe to use from several threads at once for
/// verification, and this class never mutates the key after construction.
final class PKeyHandle: @unchecked Sendable {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { EVP_PKEY_free(pointer) }
}

/// A public key: EC (P-256/384/521), Ed25519 or RSA.
public struct PublicKey: Sendable {
    let handle: PKeyHandle
    public let type: KeyType
    private let templates = ContextTemplates(fromSecondUse: true)

    init(taking pointer: OpaquePointer) {
        handle = PKeyHandle(pointer)
        type = PublicKey.keyType(of: pointer)
    }

    /// For keys built from components, whose type is known: skips the provider name lookups.
    init(taking pointer: OpaquePointer, type: KeyType) {
        handle = PKeyHandle(pointer)
        self.type = type
    }

    static func keyType(of pkey: OpaquePointer) -> KeyType {
        if EVP_PKEY_is_a(pkey, "EC") == 1 {
            var name = [CChar](repeating: 0, count: 64)
            var length = 0
            guard EVP_PKEY_get_utf8_string_param(pkey, OSSL_PKEY_PARAM_GROUP_NAME, &name, name.count, &length) == 1 else { return .other }
            switch String(decoding: name.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self) {
            case "prime256v1", "P-256": return .ec(.p256)
            case "secp384r1", "P-384": return .ec(.p384)
            case "secp521r1", "P-521": return .ec(.p521)
            default: return .other
            }
        }
        if EVP_PKEY_is_a(pkey, "ED25519") == 1 { return .ed25519 }
        if EVP_PKEY_is_a(pkey, "RSA") == 1 { return .rsa(bits: Int(EVP_PKEY_get_bits(pkey))) }
        return .other
    }

    /// An EC public key from its affine coordinates. OpenSSL refuses points not on the curve.
    public static func ec(curve: EllipticCurve, x: [UInt8], y: [UInt8]) throws(CryptoError) -> PublicKey {
        guard x.count == curve.coordinateLength, y.count == curve.coordinateLength else {
            throw CryptoError(.invalidKey, "\(curve.rawValue) coordinates must be \(curve.coordinateLength) bytes")
        }
        return try ec(curve: curve, x963: [0x04] + x + y)
    }

    /// An EC public key from an uncompressed X9.63 point (`04 || x || y`).
    public static func ec(curve: EllipticCurve, x963 point: [UInt8]) throws(CryptoError) -> PublicKey {
        guard point.count == 1 + 2 * curve.coordinateLength, point.first == 0x04 else {
            throw CryptoError(.invalidKey, "expected an uncompressed \(curve.rawValue) point")
        }
        let pkey = point.withUnsafeBufferPointer { buffer in
            if let parameters = CurveParameters.shared.key(curve) {
                return shim_pkey_from_ec_point_like(parameters, buffer.baseAddress, buffer.count)
            }
            return shim_pkey_from_ec_point(curve.openSSLName, buffer.baseAddress, buffer.count)
        }
        guard let pkey else { throw CryptoError.openSSL(.invalidKey, "point is not on \(curve.rawValue)") }
        return PublicKey(taking: pkey, type: .ec(curve))
    }

    public static func ed25519(_ raw: [UInt8]) throws(CryptoError) -> PublicKey {
        guard raw.count == 32 else { throw CryptoError(.invalidKey, "Ed25519 public keys are 32 bytes") }
        let pkey = raw.withUnsafeBufferPointer { EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, $0.baseAddress, 32) }
        guard let pkey else { throw CryptoError.openSSL(.invalidKey, "invalid Ed25519 key") }
        return PublicKey(taking: pkey, type: .ed25519)
    }

    public static func rsa(modulus n: [UInt8], exponent e: [UInt8]) throws(CryptoError) -> PublicKey {
        let modulus = n.first == 0 ? Array(n.drop(while: { $0 == 0 })) : n  // no copy in the usual case
        guard modulus.count >= 128, modulus.count <= 1024, !e.isEmpty, e.count <= 8 else {
            throw CryptoError(.invalidKey, "RSA modulus must be 1024 to 8192 bits")
        }
        let pkey = modulus.withUnsafeBufferPointer { nb in
            e.withUnsafeBufferPointer { eb in shim_pkey_from_rsa(nb.baseAddress, nb.count, eb.baseAddress, eb.count) }
        }
        guard let pkey else { throw CryptoError.openSSL(.invalidKey, "invalid RSA key") }
        return PublicKey(taking: pkey, type: .rsa(bits: Int(EVP_PKEY_get_bits(pkey))))
    }

    /// A key from DER SubjectPublicKeyInfo (Android's `PublicKey.getEncoded()`).
    public init(spkiDER der: [UInt8]) throws(CryptoError) {
        let pkey: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            let key = d2i_PUBKEY(nil, &cursor, buffer.count)
            // Trailing bytes after the SPKI are refused.
            if let key, cursor != buffer.baseAddress.map({ $0 + buffer.count }) { EVP_PKEY_free(key); return nil }
            return key
        }
        guard let pkey else { throw CryptoError.openSSL(.invalidKey, "not a DER SubjectPublicKeyInfo") }
        self.init(taking: pkey)
    }

    public var spkiDER: [UInt8] {
        var out: UnsafeMutablePointer<UInt8>? = nil
        let length = i2d_PUBKEY(handle.pointer, &out)
        guard length > 0, let out else { return [] }
        defer { shim_OPENSSL_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    /// Uncompressed point `04 || x || y` for EC keys.
    public var x963Point: [UInt8]? {
        guard case .ec = type else { return nil }
        var buffer = [UInt8](repeating: 0, count: 140)
        var length = 0
        guard EVP_PKEY_get_octet_string_param(handle.pointer, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, &buffer, buffer.count, &length) == 1 else { return nil }
        return Array(buffer[0..<length])
    }

    public var rawEd25519: [UInt8]? {
        guard type == .ed25519 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 32)
        var length = 32
        guard EVP_PKEY_get_raw_public_key(handle.pointer, &buffer, &length) == 1 else { return nil }
        return buffer
    }

    /// RSA modulus and public exponent, big-endian without leading zeros.
    public var rsaComponents: (modulus: [UInt8], exponent: [UInt8])? {
        guard case .rsa = type else { return nil }
        func bn(_ name: String) -> [UInt8]? {
            var value: OpaquePointer? = nil
            guard EVP_PKEY_get_bn_param(handle.pointer, name, &value) == 1, let value else { return nil }
            defer { BN_free(value) }
            var out = [UInt8](repeating: 0, count: Int((BN_num_bits(value) + 7) / 8))
            _ = BN_bn2bin(value, &out)
            return out
        }
        guard let n = bn(OSSL_PKEY_PARAM_RSA_N), let e = bn(OSSL_PKEY_PARAM_RSA_E) else { return nil }
        return (n, e)
    }

    public func isSameKey(as other: PublicKey) -> Bool { EVP_PKEY_eq(handle.pointer, other.handle.pointer) == 1 }

    /// Verifies `signature` over `message`. Returns false for a wrong signature, a malformed one,
    /// or an algorithm that does not fit this key. ECDSA fits only its own curve's hash
    /// (RFC 9053 §2.1, RFC 7518 §3.4): SHA-256 ↔ P-256, SHA-384 ↔ P-384, SHA-512 ↔ P-521.
    public func verify(signature: [UInt8], message: [UInt8], algorithm: SignatureAlgorithm) -> Bool {
        message.withUnsafeBufferPointer { verify(signature: signature, message: $0, algorithm: algorithm) }
    }

    public func verify(signature: [UInt8], message: UnsafeBufferPointer<UInt8>, algorithm: SignatureAlgorithm) -> Bool {
        let md: OpaquePointer?
        var pss = false
        switch (algorithm, type) {
        case (.ecdsa(let h), .ec(let curve)):
            // ES256 ↔ P-256, ES384 ↔ P-384, ES512 ↔ P-521: any other pairing is refused.
            switch (h, curve) {
            case (.sha256, .p256), (.sha384, .p384), (.sha512, .p521): md = h.md
            default: return false
            }
        case (.ed25519, .ed25519): md = nil
        case (.rsaPKCS1(let h), .rsa): md = h.md
        case (.rsaPSS(let h), .rsa): md = h.md; pss = true
        default: return false
        }
        guard !signature.isEmpty, let ctx = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(ctx) }
        let initialise = { (target: OpaquePointer) -> Bool in
            var pctx: OpaquePointer? = nil
            guard EVP_DigestVerifyInit(target, &pctx, md, nil, handle.pointer) == 1 else { return false }
            return !pss || shim_set_pss_padding(pctx) == 1
        }
        // A key verified more than once (the server's CredentialKeyCache keeps them) copies a
        // context set up on its second use; the first use, and any key whose context OpenSSL cannot
        // copy, initialise directly.
        guard templates.copy(into: ctx, algorithm: algorithm, setUp: initialise) || initialise(ctx) else {
            CryptoError.clearQueue(); return false
        }
        let rc = signature.withUnsafeBufferPointer { s in
            EVP_DigestVerify(ctx, s.baseAddress, s.count, message.baseAddress, message.count)
        }
        if rc != 1 { CryptoError.clearQueue() }
        return rc == 1
    }
}

/// One parameters-only key per curve, made once: every imported EC key copies its curve from here
/// (a passkey login with a cold key cache imports one key per login).
final class CurveParameters: @unchecked Sendable {
    static let shared = CurveParameters()
    private let p256: OpaquePointer?, p384: OpaquePointer?, p521: OpaquePointer?

    private init() {
        p256 = shim_pkey_ec_parameters(EllipticCurve.p256.openSSLName)
        p384 = shim_pkey_ec_parameters(EllipticCurve.p384.openSSLName)
        p521 = shim_pkey_ec_parameters(EllipticCurve.p521.openSSLName)
        CryptoError.clearQueue()
    }

    /// Read-only after `init`, so any thread may copy from it.
    func key(_ curve: EllipticCurve) -> OpaquePointer? {
        switch curve { case .p256: p256; case .p384: p384; case .p521: p521 }
    }
}
