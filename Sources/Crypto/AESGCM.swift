internal import COpenSSL

/// AES-256-GCM (NIST SP 800-38D) through OpenSSL's EVP AEAD interface: a 96-bit nonce, a 128-bit
/// tag. Callers choose what the associated data binds; a nonce must never repeat under one key
/// (`seal` draws a fresh random one unless a test pins it).
public enum AESGCM {
    public static let keySize = 32
    public static let nonceSize = 12
    public static let tagSize = 16

    public struct Sealed: Sendable, Equatable {
        public let nonce: [UInt8]
        public let ciphertext: [UInt8]
        public let tag: [UInt8]

        public init(nonce: [UInt8], ciphertext: [UInt8], tag: [UInt8]) {
            self.nonce = nonce
            self.ciphertext = ciphertext
            self.tag = tag
        }
    }

    /// Encrypts `plaintext` under `key` (32 bytes), authenticating `associatedData` with it.
    public static func seal(_ plaintext: [UInt8], key: [UInt8], associatedData: [UInt8],
                            nonce: [UInt8] = SecureRandom.bytes(nonceSize)) throws(CryptoError) -> Sealed {
        guard key.count == keySize else { throw CryptoError(.invalidKey, "AES-256-GCM needs a 32-byte key") }
        guard nonce.count == nonceSize else { throw CryptoError(.unsupported, "AES-256-GCM takes a 12-byte nonce") }
        let context = try Context(encrypting: true, key: key, nonce: nonce)
        try context.associate(associatedData)
        var out = [UInt8](repeating: 0, count: plaintext.count + 16)
        var length: Int32 = 0, final: Int32 = 0
        let ok = out.withUnsafeMutableBufferPointer { o in
            plaintext.withUnsafeBufferPointer { p in
                EVP_EncryptUpdate(context.pointer, o.baseAddress, &length, p.baseAddress, Int32(p.count)) == 1
                    && EVP_EncryptFinal_ex(context.pointer, o.baseAddress! + Int(length), &final) == 1
            }
        }
        guard ok else { throw CryptoError.openSSL(.internalFailure, "AES-GCM encrypt") }
        var tag = [UInt8](repeating: 0, count: tagSize)
        guard tag.withUnsafeMutableBytes({
            EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_AEAD_GET_TAG, Int32(tagSize), $0.baseAddress)
        }) == 1 else { throw CryptoError.openSSL(.internalFailure, "AES-GCM tag") }
        return Sealed(nonce: nonce, ciphertext: Array(out[0..<Int(length + final)]), tag: tag)
    }

    /// Decrypts and authenticates; any change to ciphertext, tag, nonce, key or associated data is
    /// `invalidSignature` ("authentication failed"), with no plaintext released.
    public static func open(_ sealed: Sealed, key: [UInt8], associatedData: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard key.count == keySize else { throw CryptoError(.invalidKey, "AES-256-GCM needs a 32-byte key") }
        guard sealed.nonce.count == nonceSize, sealed.tag.count == tagSize else {
            throw CryptoError(.unsupported, "AES-256-GCM takes a 12-byte nonce and a 16-byte tag")
        }
        let context = try Context(encrypting: false, key: key, nonce: sealed.nonce)
        try context.associate(associatedData)
        var out = [UInt8](repeating: 0, count: sealed.ciphertext.count + 16)
        var length: Int32 = 0, final: Int32 = 0
        let updated = out.withUnsafeMutableBufferPointer { o in
            sealed.ciphertext.withUnsafeBufferPointer { c in
                EVP_DecryptUpdate(context.pointer, o.baseAddress, &length, c.baseAddress, Int32(c.count)) == 1
            }
        }
        guard updated else { throw CryptoError.openSSL(.internalFailure, "AES-GCM decrypt") }
        var tag = sealed.tag
        guard tag.withUnsafeMutableBytes({
            EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_AEAD_SET_TAG, Int32(tagSize), $0.baseAddress)
        }) == 1 else { throw CryptoError.openSSL(.internalFailure, "AES-GCM tag") }
        let verified = out.withUnsafeMutableBufferPointer { EVP_DecryptFinal_ex(context.pointer, $0.baseAddress! + Int(length), &final) }
        guard verified == 1 else {
            CryptoError.clearQueue()
            throw CryptoError(.invalidSignature, "AES-GCM authentication failed")
        }
        return Array(out[0..<Int(length + final)])
    }

    /// One EVP_CIPHER_CTX, freed on deinit.
    private final class Context {
        let pointer: OpaquePointer

        init(encrypting: Bool, key: [UInt8], nonce: [UInt8]) throws(CryptoError) {
            guard let ctx = EVP_CIPHER_CTX_new() else { throw CryptoError(.internalFailure, "EVP_CIPHER_CTX_new") }
            pointer = ctx
            let cipher = EVP_aes_256_gcm()
            let initialised = key.withUnsafeBufferPointer { k in
                nonce.withUnsafeBufferPointer { n in
                    encrypting
                        ? EVP_EncryptInit_ex(ctx, cipher, nil, nil, nil) == 1
                            && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_IVLEN, Int32(n.count), nil) == 1
                            && EVP_EncryptInit_ex(ctx, nil, nil, k.baseAddress, n.baseAddress) == 1
                        : EVP_DecryptInit_ex(ctx, cipher, nil, nil, nil) == 1
                            && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_IVLEN, Int32(n.count), nil) == 1
                            && EVP_DecryptInit_ex(ctx, nil, nil, k.baseAddress, n.baseAddress) == 1
                }
            }
            guard initialised else { throw CryptoError.openSSL(.internalFailure, "AES-GCM init") }
        }

        /// Associated data: authenticated, not encrypted (an update with no output buffer).
        func associate(_ data: [UInt8]) throws(CryptoError) {
            guard !data.isEmpty else { return }
            var length: Int32 = 0
            let ok = data.withUnsafeBufferPointer { EVP_CipherUpdate(pointer, nil, &length, $0.baseAddress, Int32($0.count)) }
            guard ok == 1 else { throw CryptoError.openSSL(.internalFailure, "AES-GCM associated data") }
        }

        deinit { EVP_CIPHER_CTX_free(pointer) }
    }
}
