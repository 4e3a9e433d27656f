import Crypto

/// C2SP signed-note v1.0.0: a text ending in a newline, a blank line, and signature lines
/// `— <key name> base64(key ID || signature)`.
public struct SignedNote: Sendable, Equatable {
    /// The note text, final newline included.
    public let text: String
    public let signatures: [Signature]

    public struct Signature: Sendable, Equatable {
        public let name: String
        public let keyID: UInt32
        /// The signature bytes after the key ID.
        public let signature: [UInt8]
        public init(name: String, keyID: UInt32, signature: [UInt8]) { self.name = name; self.keyID = keyID; self.signature = signature }

        /// `— <name> base64(keyID || signature)` with its newline.
        public var line: String {
            "\u{2014} \(name) \(Base64.encodeStandard(bigEndian(keyID) + signature))\n"
        }

        /// One signature line (without its newline).
        public init(line: Substring) throws(TransparencyError) {
            guard line.hasPrefix("\u{2014} ") else { throw TransparencyError("a signature line starts with an em dash and a space") }
            let rest = line.dropFirst(2)
            let parts = rest.split(separator: " ", omittingEmptySubsequences: false)
            guard parts.count == 2, SignedNote.isValidKeyName(parts[0]) else { throw TransparencyError("a signature line is `— <name> <base64>`") }
            guard let raw = Base64.decodeStandard(String(parts[1])), raw.count >= 4, Base64.encodeStandard(raw) == parts[1] else {
                throw TransparencyError("a signature is base64 of at least 4 bytes")
            }
            self.name = String(parts[0])
            self.keyID = uint32(bigEndian: raw)
            self.signature = Array(raw[4...])
        }
    }

    public init(text: String, signatures: [Signature]) { self.text = text; self.signatures = signatures }

    /// Verifiers accept at least 16 signatures; this one accepts up to 100 and notes up to 1 MB.
    public static let maxSignatures = 100
    public static let maxBytes = 1 << 20

    /// Splits a note into its text and signature lines; nothing is verified (`verified(by:)` does).
    public init(parsing note: String) throws(TransparencyError) {
        guard note.utf8.count <= Self.maxBytes else { throw TransparencyError("the note is too large") }
        guard !note.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\n" }) else {
            throw TransparencyError("a note holds no control characters but newlines")
        }
        guard note.hasSuffix("\n") else { throw TransparencyError("a note ends with a newline") }
        // The text is separated from the signatures by the last empty line.
        let bytes = Array(note.utf8)
        var cut = bytes.count - 2
        while cut >= 0 && !(bytes[cut] == 0x0A && bytes[cut + 1] == 0x0A) { cut -= 1 }
        guard cut >= 0 else { throw TransparencyError("a note has a blank line before its signatures") }
        let text = String(decoding: bytes[...cut], as: UTF8.self)
        let block = Substring(String(decoding: bytes[(cut + 2)...], as: UTF8.self))
        guard !block.isEmpty else { throw TransparencyError("a note has at least one signature") }
        var signatures: [Signature] = []
        for line in block.dropLast().split(separator: "\n", omittingEmptySubsequences: false) {
            signatures.append(try Signature(line: line))
            guard signatures.count <= Self.maxSignatures else { throw TransparencyError("the note has too many signatures") }
        }
        self.text = text
        self.signatures = signatures
    }

    /// The text, a blank line and the signature lines.
    public var serialized: String { text + "\n" + signatures.map(\.line).joined() }

    /// Key names are non-empty and hold no Unicode space and no `+`.
    public static func isValidKeyName(_ name: some StringProtocol) -> Bool {
        !name.isEmpty && !name.unicodeScalars.contains { $0 == "+" || $0.properties.isWhitespace || $0.value < 0x20 }
    }

    /// signed-note "Signatures": signatures from unknown keys are ignored; one from a known key
    /// (name and ID both match) that fails makes the note rejected; at least one known key must
    /// verify. Returns the verifiers whose signatures verified.
    public func verified(by verifiers: [any NoteVerifier]) throws(TransparencyError) -> [any NoteVerifier] {
        var good: [any NoteVerifier] = []
        for verifier in verifiers {
            for signature in signatures where signature.name == verifier.name && signature.keyID == verifier.keyID {
                guard verifier.verify(text: text, signature: signature.signature) else {
                    throw TransparencyError("the signature by \(verifier.name) does not verify")
                }
                if !good.contains(where: { $0.name == verifier.name && $0.keyID == verifier.keyID }) { good.append(verifier) }
            }
        }
        guard !good.isEmpty else { throw TransparencyError("no signature by a known key") }
        return good
    }
}

/// A key that checks note signatures: its name and key ID select the lines it checks.
public protocol NoteVerifier: Sendable {
    var name: String { get }
    var keyID: UInt32 { get }
    func verify(text: String, signature: [UInt8]) -> Bool
}

/// signed-note "Signature types".
public enum NoteSignatureType: UInt8, Sendable {
    case ed25519 = 0x01
    case cosignatureV1 = 0x04
}

/// key ID = SHA-256(key name || 0x0A || signature type || public key)[:4], big-endian.
public func noteKeyID(name: String, type: UInt8, publicKey: [UInt8]) -> UInt32 {
    uint32(bigEndian: Digest.sha256(Array(name.utf8) + [0x0A, type] + publicKey))
}

func bigEndian(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
func bigEndian(_ v: UInt64) -> [UInt8] { (0..<8).map { UInt8(v >> (56 - 8 * UInt64($0)) & 0xFF) } }
/// The big-endian UInt32 in the first four of `bytes` (there are at least four).
func uint32(bigEndian bytes: [UInt8]) -> UInt32 { bytes[..<4].reduce(0) { $0 << 8 | UInt32($1) } }

/// A verifier key `<name>+<hex key ID>+<base64(type || public key)>`, for Ed25519 (0x01) and
/// cosignature/v1 (0x04) keys.
public struct VerifierKey: Sendable, Equatable, CustomStringConvertible {
    public let name: String
    public let keyID: UInt32
    public let type: NoteSignatureType
    public let publicKey: [UInt8]

    public init(name: String, type: NoteSignatureType, publicKey: [UInt8]) {
        self.name = name
        self.type = type
        self.publicKey = publicKey
        self.keyID = noteKeyID(name: name, type: type.rawValue, publicKey: publicKey)
    }

    public init(parsing text: String) throws(TransparencyError) {
        let parts = text.split(separator: "+", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, SignedNote.isValidKeyName(parts[0]) else { throw TransparencyError("a verifier key is `<name>+<hex key ID>+<base64 key>`") }
        guard parts[1].utf8.count == 8, let id = Hex.decode(parts[1]) else { throw TransparencyError("a verifier key's ID is 8 hex digits") }
        guard let raw = Base64.decodeStandard(String(parts[2])), let first = raw.first else { throw TransparencyError("a verifier key's key is base64") }
        guard let type = NoteSignatureType(rawValue: first) else { throw TransparencyError("the verifier key's type \(first) is not Ed25519 (1) or cosignature/v1 (4)") }
        guard raw.count == 33 else { throw TransparencyError("an Ed25519 verifier key holds 32 bytes") }
        self.init(name: String(parts[0]), type: type, publicKey: Array(raw[1...]))
        guard keyID == uint32(bigEndian: id) else {
            throw TransparencyError("the verifier key's ID does not match its name and key")
        }
        guard (try? PublicKey.ed25519(publicKey)) != nil else { throw TransparencyError("the verifier key is not an Ed25519 public key") }
    }

    public var description: String {
        "\(name)+\(Hex.encode(bigEndian(keyID)))+\(Base64.encodeStandard([type.rawValue] + publicKey))"
    }
}

/// signed-note "Ed25519 signatures": RFC 8032 over the note text.
public struct Ed25519NoteVerifier: NoteVerifier {
    public let key: VerifierKey
    private let publicKey: PublicKey
    public var name: String { key.name }
    public var keyID: UInt32 { key.keyID }

    public init(_ key: VerifierKey) throws(TransparencyError) {
        guard key.type == .ed25519 else { throw TransparencyError("\(key.name) is not an Ed25519 note key (type 0x01)") }
        guard let pk = try? PublicKey.ed25519(key.publicKey) else { throw TransparencyError("not an Ed25519 public key") }
        self.key = key
        self.publicKey = pk
    }

    public func verify(text: String, signature: [UInt8]) -> Bool {
        signature.count == 64 && publicKey.verify(signature: signature, message: Array(text.utf8), algorithm: .ed25519)
    }
}

/// The log's signer: an Ed25519 key and its name.
public struct Ed25519NoteSigner: Sendable {
    public let name: String
    public let privateKey: PrivateKey
    public let verifierKey: VerifierKey

    public init(name: String, privateKey: PrivateKey) throws(TransparencyError) {
        guard SignedNote.isValidKeyName(name) else { throw TransparencyError("a key name is non-empty with no space or `+`") }
        guard privateKey.type == .ed25519, let raw = privateKey.publicKey.rawEd25519 else { throw TransparencyError("the note key is not Ed25519") }
        self.name = name
        self.privateKey = privateKey
        self.verifierKey = VerifierKey(name: name, type: .ed25519, publicKey: raw)
    }

    public func sign(text: String) throws -> SignedNote.Signature {
        let signature = try privateKey.sign(Array(text.utf8), algorithm: .ed25519)
        return .init(name: name, keyID: verifierKey.keyID, signature: signature)
    }
}

/// tlog-cosignature v1.0.1: a 72-byte `timestamped_signature` (u64 big-endian POSIX time, Ed25519
/// signature) over `cosignature/v1\ntime <t>\n` followed by the checkpoint's note text.
public enum CosignatureV1 {
    public static func message(text: String, timestamp: UInt64) -> [UInt8] {
        Array("cosignature/v1\ntime \(timestamp)\n\(text)".utf8)
    }

    public static func sign(text: String, timestamp: UInt64, name: String, privateKey: PrivateKey) throws -> SignedNote.Signature {
        guard let raw = privateKey.publicKey.rawEd25519 else { throw TransparencyError("the cosigner key is not Ed25519") }
        let signature = try privateKey.sign(message(text: text, timestamp: timestamp), algorithm: .ed25519)
        let id = noteKeyID(name: name, type: NoteSignatureType.cosignatureV1.rawValue, publicKey: raw)
        return .init(name: name, keyID: id, signature: bigEndian(timestamp) + signature)
    }

    /// The timestamp of a 72-byte cosignature.
    public static func timestamp(_ signature: [UInt8]) -> UInt64? {
        guard signature.count == 72 else { return nil }
        return signature[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }
}

public struct CosignatureV1Verifier: NoteVerifier {
    public let key: VerifierKey
    private let publicKey: PublicKey
    public var name: String { key.name }
    public var keyID: UInt32 { key.keyID }

    public init(_ key: VerifierKey) throws(TransparencyError) {
        guard key.type == .cosignatureV1 else { throw TransparencyError("\(key.name) is not a cosignature/v1 key (type 0x04)") }
        guard let pk = try? PublicKey.ed25519(key.publicKey) else { throw TransparencyError("not an Ed25519 public key") }
        self.key = key
        self.publicKey = pk
    }

    public func verify(text: String, signature: [UInt8]) -> Bool {
        // The timestamp MUST NOT exceed 2^63 - 1.
        guard let t = CosignatureV1.timestamp(signature), t <= UInt64(Int64.max) else { return false }
        return publicKey.verify(signature: Array(signature[8...]), message: CosignatureV1.message(text: text, timestamp: t), algorithm: .ed25519)
    }
}
