internal import COpenSSL

/// A private signing key: token signing, and the test authenticator.
public struct PrivateKey: Sendable {
    let handle: PKeyHandle
    public let type: KeyType
    private let templates = ContextTemplates(fromSecondUse: false)

    init(taking pointer: OpaquePointer) {
        handle = PKeyHandle(pointer)
        type = PublicKey.keyType(of: pointer)
    }

    public static func generateEC(_ curve: EllipticCurve) -> PrivateKey {
        PrivateKey(taking: shim_pkey_generate_ec(curve.openSSLName)!)
    }
    public static func generateEd25519() -> PrivateKey { PrivateKey(taking: shim_pkey_generate("ED25519", 0)!) }
    public static func generateRSA(bits: Int = 2048) -> PrivateKey { PrivateKey(taking: shim_pkey_generate("RSA", UInt32(bits))!) }

    /// PKCS#8 PEM, for storage (e.g. the token signing key in PostgreSQL).
    public var pkcs8PEM: String {
        guard let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PrivateKey(bio, handle.pointer, nil, nil, 0, nil, nil) == 1 else { return "" }
        var data: UnsafeMutablePointer<CChar>? = nil
        let length = shim_BIO_get_mem_data(bio, &data)
        guard length > 0, let data else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    public init(pkcs8PEM pem: String) throws(CryptoError) {
        let pkey: OpaquePointer? = Array(pem.utf8).withUnsafeBufferPointer { b in
            guard let bio = BIO_new_mem_buf(b.baseAddress, Int32(b.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        }
        guard let pkey else { throw CryptoError.openSSL(.invalidKey, "not a PEM private key") }
        self.init(taking: pkey)
    }

    public var publicKey: PublicKey {
        // Round-trip through SPKI so the public key holds no private material.
        var out: UnsafeMutablePointer<UInt8>? = nil
        let length = i2d_PUBKEY(handle.pointer, &out)
        defer { if let out { shim_OPENSSL_free(out) } }
        let der = Array(UnsafeBufferPointer(start: out, count: Int(max(length, 0))))
        return try! PublicKey(spkiDER: der)
    }

    /// Signs `message`; ECDSA signatures are DER-encoded.
    public func sign(_ message: [UInt8], algorithm: SignatureAlgorithm) throws(CryptoError) -> [UInt8] {
        let md: OpaquePointer?
        var pss = false
        switch algorithm {
        case .ecdsa(let h), .rsaPKCS1(let h): md = h.md
        case .rsaPSS(let h): md = h.md; pss = true
        case .ed25519: md = nil
        }
        guard let ctx = EVP_MD_CTX_new() else { throw CryptoError(.internalFailure, "EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(ctx) }
        // A copy of a context set up once for this key and algorithm: EVP_DigestSignInit looks up
        // the key's provider, the signature and the digest by name on every call (OpenSSL 3).
        let initialise = { (target: OpaquePointer) -> Bool in
            var pctx: OpaquePointer? = nil
            guard EVP_DigestSignInit(target, &pctx, md, nil, handle.pointer) == 1 else { return false }
            return !pss || shim_set_pss_padding(pctx) == 1
        }
        // A key type whose context OpenSSL cannot copy is initialised directly.
        guard templates.copy(into: ctx, algorithm: algorithm, setUp: initialise) || initialise(ctx) else {
            throw CryptoError.openSSL(.unsupported, "sign init")
        }
        var length = 0
        guard message.withUnsafeBufferPointer({ EVP_DigestSign(ctx, nil, &length, $0.baseAddress, $0.count) }) == 1 else {
            throw CryptoError.openSSL(.internalFailure, "sign")
        }
        var signature = [UInt8](repeating: 0, count: length)
        guard message.withUnsafeBufferPointer({ m in
            signature.withUnsafeMutableBufferPointer { EVP_DigestSign(ctx, $0.baseAddress, &length, m.baseAddress, m.count) }
        }) == 1 else { throw CryptoError.openSSL(.internalFailure, "sign") }
        return Array(signature[0..<length])
    }
}
