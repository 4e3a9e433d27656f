import Crypto

/// C2SP tlog-checkpoint v1.0.0: the note text `<origin>\n<size>\n<base64 root>\n` (extension lines
/// are allowed by the text; this log writes none).
public struct Checkpoint: Sendable, Equatable {
    public let origin: String
    public let size: UInt64
    public let root: [UInt8]
    public let extensions: [String]

    public init(origin: String, size: UInt64, root: [UInt8], extensions: [String] = []) {
        self.origin = origin; self.size = size; self.root = root; self.extensions = extensions
    }

    public var text: String {
        "\(origin)\n\(size)\n\(Base64.encodeStandard(root))\n" + extensions.map { $0 + "\n" }.joined()
    }

    /// Parses a checkpoint's note text (signatures are the note's business).
    public init(text: String) throws(TransparencyError) {
        guard text.hasSuffix("\n") else { throw TransparencyError("a checkpoint's text ends with a newline") }
        let lines = text.dropLast().split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.count >= 3, lines.allSatisfy({ !$0.isEmpty }) else { throw TransparencyError("a checkpoint is at least three non-empty lines") }
        guard let size = parseDecimal(lines[1]) else { throw TransparencyError("a checkpoint's size is a decimal with no leading zeroes") }
        guard let root = Base64.decodeStandard(String(lines[2])), root.count == MerkleTree.hashLength, Base64.encodeStandard(root) == lines[2] else {
            throw TransparencyError("a checkpoint's root is the base64 of 32 bytes")
        }
        self.init(origin: String(lines[0]), size: size, root: root, extensions: lines.dropFirst(3).map(String.init))
    }
}

/// ASCII decimal with no leading zeroes (`0` alone for zero), as tree sizes and indices are written.
func parseDecimal(_ text: some StringProtocol) -> UInt64? {
    let bytes = Array(text.utf8)
    guard !bytes.isEmpty, bytes.count <= 20, bytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
    guard bytes.count == 1 || bytes[0] != 0x30 else { return nil }
    return UInt64(String(decoding: bytes, as: UTF8.self))
}

/// A signed checkpoint, verified: the log's signature held, and the cosignatures that verified.
public struct VerifiedCheckpoint: Sendable {
    public let checkpoint: Checkpoint
    public let note: SignedNote
    public let cosigners: [String]
}

extension Checkpoint {
    /// Opens a signed checkpoint note with the log's key; witnesses' cosignatures are counted for
    /// those verifiers given (a bad cosignature from a known witness rejects the note).
    public static func open(_ noteText: String, logKey: VerifierKey, witnesses: [VerifierKey] = []) throws(TransparencyError) -> VerifiedCheckpoint {
        let note = try SignedNote(parsing: noteText)
        _ = try note.verified(by: [try Ed25519NoteVerifier(logKey)])
        let checkpoint = try Checkpoint(text: note.text)
        // tlog-checkpoint: the origin is the log's identity; the key name SHOULD match it.
        guard checkpoint.origin == logKey.name else {
            throw TransparencyError("the checkpoint's origin \(checkpoint.origin) is not the log key's name \(logKey.name)")
        }
        var cosigners: [String] = []
        for witness in witnesses {
            let verifier = try CosignatureV1Verifier(witness)
            let matching = note.signatures.filter { $0.name == verifier.name && $0.keyID == verifier.keyID }
            guard !matching.isEmpty else { continue }
            guard matching.allSatisfy({ verifier.verify(text: note.text, signature: $0.signature) }) else {
                throw TransparencyError("the cosignature by \(witness.name) does not verify")
            }
            cosigners.append(witness.name)
        }
        return VerifiedCheckpoint(checkpoint: checkpoint, note: note, cosigners: cosigners)
    }
}
