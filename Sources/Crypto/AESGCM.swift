internal import COpenSSL

/// AES-256-GCM (NIST SP 800-38D) for small secrets at rest: a fresh 96-bit nonce per seal, a
/// 128-bit tag, and associated data that binds the sealed bytes to where they are stored.
/// Sealed form: nonce (12) ‖ ciphertext ‖ tag (16).
public enum AESGCM {
    public static let keySize = 32
    static let nonceSize = 12
    static let tagSize = 16

    public static func seal(_ plaintext: [UInt8], key: [UInt8], associatedData: [UInt8] = [],
                            nonce: [UInt8] = SecureRandom.bytes(12)) throws(CryptoError) -> [UInt8] {
        guard key.count == keySize else { throw CryptoError(.invalidKey, "AES-256-GCM needs a 32-byte key") }
        guard nonce.count == nonceSize else { throw CryptoError(.invalidKey, "AES-GCM nonces are 12 bytes") }
        guard let ctx = EVP_CIPHER_CTX_new() else { throw CryptoError.openSSL(.internalFailure, "EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: plaintext.count + 16)
        var tag = [UInt8](repeating: 0, count: tagSize)
        var length: Int32 = 0, total = 0
        guard EVP_EncryptInit_ex2(ctx, EVP_aes_256_gcm(), key, nonce, nil) == 1 else {
            throw CryptoError.openSSL(.internalFailure, "AES-GCM init")
        }
        if !associatedData.isEmpty {
            guard EVP_EncryptUpdate(ctx, nil, &length, associatedData, Int32(associatedData.count)) == 1 else {
                throw CryptoError.openSSL(.internalFailure, "AES-GCM associated data")
            }
        }
        let ok = out.withUnsafeMutableBufferPointer { o -> Bool in
            guard EVP_EncryptUpdate(ctx, o.baseAddress, &length, plaintext, Int32(plaintext.count)) == 1 else { return false }
            total = Int(length)
            guard EVP_EncryptFinal_ex(ctx, o.baseAddress! + total, &length) == 1 else { return false }
            total += Int(length)
            return true
        }
        guard ok, EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, Int32(tagSize), &tag) == 1 else {
            throw CryptoError.openSSL(.internalFailure, "AES-GCM encrypt")
        }
        return nonce + out[0..<total] + tag
    }

    /// The plaintext, or `invalidSignature` when the bytes, the key or the associated data differ
    /// from what was sealed (the tag does not verify).
    public static func open(_ sealed: [UInt8], key: [UInt8], associatedData: [UInt8] = []) throws(CryptoError) -> [UInt8] {
        guard key.count == keySize else { throw CryptoError(.invalidKey, "AES-256-GCM needs a 32-byte key") }
        guard sealed.count >= nonceSize + tagSize else { throw CryptoError(.invalidSignature, "sealed data too short") }
        let nonce = Array(sealed[0..<nonceSize])
        let body = Array(sealed[nonceSize..<(sealed.count - tagSize)])
        var tag = Array(sealed[(sealed.count - tagSize)...])
        guard let ctx = EVP_CIPHER_CTX_new() else { throw CryptoError.openSSL(.internalFailure, "EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: body.count + 16)
        var length: Int32 = 0, total = 0
        guard EVP_DecryptInit_ex2(ctx, EVP_aes_256_gcm(), key, nonce, nil) == 1 else {
            throw CryptoError.openSSL(.internalFailure, "AES-GCM init")
        }
        if !associatedData.isEmpty {
            guard EVP_DecryptUpdate(ctx, nil, &length, associatedData, Int32(associatedData.count)) == 1 else {
                throw CryptoError.openSSL(.internalFailure, "AES-GCM associated data")
            }
        }
        let ok = out.withUnsafeMutableBufferPointer { o -> Bool in
            guard EVP_DecryptUpdate(ctx, o.baseAddress, &length, body, Int32(body.count)) == 1 else { return false }
            total = Int(length)
            guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, Int32(tagSize), &tag) == 1 else { return false }
            guard EVP_DecryptFinal_ex(ctx, o.baseAddress! + total, &length) == 1 else { return false }
            total += Int(length)
            return true
        }
        guard ok else {
            CryptoError.clearQueue()
            throw CryptoError(.invalidSignature, "sealed data does not verify under this key")
        }
        return Array(out[0..<total])
    }
}
