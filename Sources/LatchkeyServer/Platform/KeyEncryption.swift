import Crypto

/// The key-encryption key (KEK): 32 bytes from `LATCHKEY_KEY_ENCRYPTION_KEY` (base64, or
/// `@/path/to/file` holding the base64 text) under which private keys and secrets stored in
/// PostgreSQL are sealed, so a database dump or backup alone cannot mint tokens. Its `id` names it
/// in every envelope, so a row says which KEK sealed it (rotation, and a clear error for a wrong one).
public struct KeyEncryptionKey: Sendable, CustomStringConvertible {
    let bytes: [UInt8]
    /// First 8 bytes of SHA-256("latchkey kek id v1" ‖ 0x00 ‖ key): identifies the KEK, reveals nothing of it.
    public let id: [UInt8]
    /// Where it was read from, for messages: the variable, and the file when given as `@path`.
    public internal(set) var source = "LATCHKEY_KEY_ENCRYPTION_KEY"

    public init(bytes: [UInt8]) throws(Configuration.Invalid) {
        guard bytes.count == AESGCM.keySize else {
            throw Configuration.Invalid(description: "a key-encryption key is 32 bytes (base64: 44 characters), got \(bytes.count) bytes")
        }
        self.bytes = bytes
        id = Array(Digest.sha256(Array("latchkey kek id v1".utf8) + [0] + bytes).prefix(8))
    }

    /// Reads a KEK as configured: base64 of 32 bytes, or `@path` to a file holding that base64 text.
    /// `name` (the variable or option it came from) goes into the error; the value never does.
    public static func parse(_ value: String, name: String, readFile: (String) -> [UInt8]?) throws(Configuration.Invalid) -> KeyEncryptionKey {
        var text = value
        if value.hasPrefix("@") {
            let path = String(value.dropFirst())
            guard let contents = readFile(path) else { throw Configuration.Invalid(description: "\(name): cannot read \(path)") }
            text = String(decoding: contents, as: UTF8.self)
        }
        guard let bytes = Base64.decodeStandard(text.trimmed) else {
            throw Configuration.Invalid(description: "\(name) must be base64 of 32 bytes (or @/path/to/file holding it)")
        }
        do {
            var kek = try KeyEncryptionKey(bytes: bytes)
            kek.source = value.hasPrefix("@") && !name.contains(String(value.dropFirst())) ? "\(name) (file \(value.dropFirst()))" : name
            return kek
        } catch {
            throw Configuration.Invalid(description: "\(name): \(error.description)")
        }
    }

    /// A new KEK as `LATCHKEY_KEY_ENCRYPTION_KEY` takes it (`openssl rand -base64 32` does the same).
    public static func generateText(random: (Int) -> [UInt8] = SecureRandom.bytes) -> String {
        Base64.encodeStandard(random(AESGCM.keySize))
    }

    public var idText: String { Hex.encode(id) }
    /// Never the key itself.
    public var description: String { "key-encryption key \(idText)" }
}

/// The sealed form of a secret kept in PostgreSQL, version 1:
///
///     0x01 ‖ KEK id (8) ‖ nonce (12, random per seal) ‖ AES-256-GCM ciphertext ‖ tag (16)
///
/// The associated data binds the envelope to its row and header — "latchkey sealed v1" ‖ 0x00 ‖
/// purpose ‖ 0x00 ‖ row id ‖ 0x00 ‖ version ‖ KEK id — so a sealed key copied onto another row
/// (another kid) or relabelled with another KEK id does not open. A future format takes version 2
/// and this type keeps opening version 1.
public enum SealedSecret {
    static let version: UInt8 = 1
    static let headerSize = 1 + 8
    static let overhead = headerSize + AESGCM.nonceSize + AESGCM.tagSize

    /// What a sealed secret is for and which row holds it (the associated data).
    public struct Binding: Sendable {
        let purpose: String
        let id: String
        /// A token signing key, by kid.
        public static func signingKey(_ kid: String) -> Binding { Binding(purpose: "signing_keys", id: kid) }
        /// A webhook endpoint's signing secret, by endpoint id.
        public static func webhookSecret(_ id: String) -> Binding { Binding(purpose: WebhookService.secretPurpose, id: id) }
    }

    public struct Failure: Error, CustomStringConvertible {
        public enum Code: Sendable { case malformed, otherKey, authenticationFailed }
        public let code: Code
        /// The KEK id the envelope names (hex), when it could be read.
        public let sealedUnder: String?
        public var description: String {
            switch code {
            case .malformed: "not a sealed secret this version understands"
            case .otherKey: "sealed under key-encryption key \(sealedUnder ?? "?")"
            case .authenticationFailed: "does not authenticate under this key-encryption key (wrong key, or the row was altered)"
            }
        }
    }

    public static func seal(_ plaintext: [UInt8], under kek: KeyEncryptionKey, binding: Binding,
                            nonce: [UInt8]) throws(CryptoError) -> [UInt8] {
        let header = [version] + kek.id
        let sealed = try AESGCM.seal(plaintext, key: kek.bytes, associatedData: associatedData(binding, header), nonce: nonce)
        return header + sealed.nonce + sealed.ciphertext + sealed.tag
    }

    public static func open(_ envelope: [UInt8], with kek: KeyEncryptionKey, binding: Binding) throws(Failure) -> [UInt8] {
        guard envelope.count >= overhead, envelope[0] == version else { throw Failure(code: .malformed, sealedUnder: nil) }
        let header = Array(envelope[0..<headerSize])
        let named = Array(header[1...])
        guard named == kek.id else { throw Failure(code: .otherKey, sealedUnder: Hex.encode(named)) }
        let nonceEnd = headerSize + AESGCM.nonceSize
        let sealed = AESGCM.Sealed(nonce: Array(envelope[headerSize..<nonceEnd]),
                                   ciphertext: Array(envelope[nonceEnd..<(envelope.count - AESGCM.tagSize)]),
                                   tag: Array(envelope[(envelope.count - AESGCM.tagSize)...]))
        do { return try AESGCM.open(sealed, key: kek.bytes, associatedData: associatedData(binding, header)) } catch {
            throw Failure(code: .authenticationFailed, sealedUnder: Hex.encode(named))
        }
    }

    /// The KEK id an envelope names (hex), or nil when it is not an envelope.
    public static func keyID(of envelope: [UInt8]) -> String? {
        guard envelope.count >= overhead, envelope[0] == version else { return nil }
        return Hex.encode(envelope[1..<headerSize])
    }

    static func associatedData(_ binding: Binding, _ header: [UInt8]) -> [UInt8] {
        Array("latchkey sealed v1".utf8) + [0] + Array(binding.purpose.utf8) + [0] + Array(binding.id.utf8) + [0] + header
    }

}
