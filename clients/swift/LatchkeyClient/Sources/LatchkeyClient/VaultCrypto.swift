import Foundation

/// The vault's byte formats (docs/vault.md), the same bytes latchkey.js's `vaultCrypto` makes: a
/// data key wrapped under a key derived from a passkey's PRF output, or from the vault's recovery key.
///
/// - key-wrapping key = HKDF-SHA-256(ikm = PRF output, salt = empty, info = "latchkey vault v1" ‖
///   user handle ‖ credential id), 32 bytes
/// - `wrappedKey` = base64url(12-byte IV ‖ AES-256-GCM ciphertext of the 32-byte data key ‖ 16-byte
///   tag), associated data "latchkey vault v1" ‖ credential id
/// - the recovery wrap: HKDF(vault recovery key, info "latchkey vault recovery v1"), the same layout
///   with associated data "latchkey vault recovery v1"; the recovery key written down as 52
///   characters of base32 (RFC 4648, no padding)
///
/// Plain Swift (HMAC-SHA-256 over `SHA256Digest`, AES and GHASH here), as the action hash is, so the
/// same code runs on Linux, where the tests hold it to fixed vectors, and on Apple platforms.
public enum VaultCrypto {
    static let label = Array("latchkey vault v1".utf8)
    static let recoveryLabel = Array("latchkey vault recovery v1".utf8)

    /// A wrap, a key or a code that does not open the vault (a changed byte, the wrong passkey or key).
    public struct Locked: Error, Equatable {}

    /// HKDF-SHA-256 (RFC 5869) with an empty salt, 32 bytes of output.
    public static func hkdf(_ ikm: [UInt8], info: [UInt8]) -> [UInt8] {
        let prk = hmac(key: [UInt8](repeating: 0, count: 32), ikm)
        return hmac(key: prk, info + [1])
    }

    /// The key-wrapping key of one passkey.
    public static func keyWrappingKey(prfOutput: [UInt8], userHandle: [UInt8], credentialId: [UInt8]) -> [UInt8] {
        hkdf(prfOutput, info: label + userHandle + credentialId)
    }

    /// The recovery wrap's key.
    public static func recoveryWrappingKey(_ recoveryKey: [UInt8]) -> [UInt8] { hkdf(recoveryKey, info: recoveryLabel) }

    /// `wrappedKey` for one passkey. `iv`: 12 random bytes (fixed only in tests).
    public static func wrapForPasskey(dataKey: [UInt8], prfOutput: [UInt8], userHandle: [UInt8], credentialId: [UInt8],
                                      iv: [UInt8] = randomBytes(12)) -> String {
        let kwk = keyWrappingKey(prfOutput: prfOutput, userHandle: userHandle, credentialId: credentialId)
        return Base64URL.encode(AESGCM.seal(dataKey, key: kwk, iv: iv, aad: label + credentialId))
    }

    /// The data key a passkey's `wrappedKey` holds; `Locked` when it does not open with these bytes.
    public static func unwrapForPasskey(_ wrappedKey: String, prfOutput: [UInt8], userHandle: [UInt8], credentialId: [UInt8]) throws(Locked) -> [UInt8] {
        let kwk = keyWrappingKey(prfOutput: prfOutput, userHandle: userHandle, credentialId: credentialId)
        return try open(wrappedKey, key: kwk, aad: label + credentialId)
    }

    /// `recovery.wrappedKey`.
    public static func wrapForRecovery(dataKey: [UInt8], recoveryKey: [UInt8], iv: [UInt8] = randomBytes(12)) -> String {
        Base64URL.encode(AESGCM.seal(dataKey, key: recoveryWrappingKey(recoveryKey), iv: iv, aad: recoveryLabel))
    }

    public static func unwrapForRecovery(_ wrappedKey: String, recoveryKey: [UInt8]) throws(Locked) -> [UInt8] {
        try open(wrappedKey, key: recoveryWrappingKey(recoveryKey), aad: recoveryLabel)
    }

    static func open(_ wrappedKey: String, key: [UInt8], aad: [UInt8]) throws(Locked) -> [UInt8] {
        guard let sealed = Base64URL.decode(wrappedKey), let plain = AESGCM.open([UInt8](sealed), key: key, aad: aad) else { throw Locked() }
        return plain
    }

    /// AES-256-GCM alone → IV ‖ ciphertext ‖ tag: what latchkey.js's open vault `encrypt` makes of
    /// data under the data key (with empty associated data).
    public static func aesGCMSeal(_ plaintext: [UInt8], key: [UInt8], iv: [UInt8] = randomBytes(12), aad: [UInt8] = []) -> [UInt8] {
        AESGCM.seal(plaintext, key: key, iv: iv, aad: aad)
    }

    /// The plaintext of IV ‖ ciphertext ‖ tag, or nil when it does not open with `key` and `aad`.
    public static func aesGCMOpen(_ sealed: [UInt8], key: [UInt8], aad: [UInt8] = []) -> [UInt8]? {
        AESGCM.open(sealed, key: key, aad: aad)
    }

    static let base32 = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)

    /// The vault recovery key as the person writes it down: 52 characters of base32.
    public static func recoveryCode(_ recoveryKey: [UInt8]) -> String {
        precondition(recoveryKey.count == 32, "a vault recovery key is 32 bytes")
        var out: [UInt8] = [], bits = 0, value = 0
        for byte in recoveryKey {
            value = (value << 8 | Int(byte)) & 0xFFFF
            bits += 8
            while bits >= 5 { out.append(base32[(value >> (bits - 5)) & 31]); bits -= 5 }
        }
        if bits > 0 { out.append(base32[(value << (5 - bits)) & 31]) }
        return String(decoding: out, as: UTF8.self)
    }

    /// The written-down code back to the key: spaces, dashes and case forgiven; nil for a wrong
    /// length, a character outside base32 or a mistyped last character (its spare bits not zero).
    public static func parseRecoveryCode(_ code: String) -> [UInt8]? {
        let text = code.uppercased().utf8.filter { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "-") && $0 != UInt8(ascii: "\n") }
        guard text.count == 52 else { return nil }
        var out: [UInt8] = [], bits = 0, value = 0
        for c in text {
            guard let digit = base32.firstIndex(of: c) else { return nil }
            value = (value << 5 | digit) & 0xFFFF
            bits += 5
            if bits >= 8 { out.append(UInt8((value >> (bits - 8)) & 0xFF)); bits -= 8 }
        }
        return value & ((1 << bits) - 1) == 0 ? out : nil
    }

    public static func randomBytes(_ count: Int) -> [UInt8] {
        var g = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &g) }
    }

    /// HMAC-SHA-256 (RFC 2104).
    static func hmac(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        var k = key.count > 64 ? [UInt8](SHA256Digest.hash(key)) : key
        k += [UInt8](repeating: 0, count: 64 - k.count)
        let inner = [UInt8](SHA256Digest.hash(k.map { $0 ^ 0x36 } + message))
        return [UInt8](SHA256Digest.hash(k.map { $0 ^ 0x5c } + inner))
    }
}
