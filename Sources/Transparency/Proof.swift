import Crypto

/// C2SP tlog-proof@v1: `c2sp.org/tlog-proof@v1`, an optional `extra <base64>` line, `index <i>`, the
/// inclusion proof (one base64 hash a line), an empty line, and the signed checkpoint verbatim.
public struct TlogProof: Sendable, Equatable {
    public static let header = "c2sp.org/tlog-proof@v1"

    public let extra: [UInt8]?
    public let index: UInt64
    public let inclusion: [[UInt8]]
    /// The signed checkpoint note, signatures and cosignatures included.
    public let checkpoint: String

    public init(extra: [UInt8]? = nil, index: UInt64, inclusion: [[UInt8]], checkpoint: String) {
        self.extra = extra; self.index = index; self.inclusion = inclusion; self.checkpoint = checkpoint
    }

    public var text: String {
        var out = Self.header + "\n"
        if let extra { out += "extra \(Base64.encodeStandard(extra))\n" }
        out += "index \(index)\n"
        for hash in inclusion { out += Base64.encodeStandard(hash) + "\n" }
        return out + "\n" + checkpoint
    }

    public init(parsing text: String) throws(TransparencyError) {
        guard text.utf8.count <= SignedNote.maxBytes else { throw TransparencyError("the proof is too large") }
        var lines = text.split(separator: "\n", maxSplits: 100, omittingEmptySubsequences: false)[...]
        guard lines.popFirst() == Substring(Self.header) else { throw TransparencyError("a tlog proof starts with \(Self.header)") }
        var extra: [UInt8]?
        if let line = lines.first, line.hasPrefix("extra ") {
            guard let bytes = Base64.decodeStandard(String(line.dropFirst(6))) else { throw TransparencyError("the extra line is base64") }
            extra = bytes
            lines = lines.dropFirst()
        }
        guard let line = lines.popFirst(), line.hasPrefix("index "), let index = parseDecimal(line.dropFirst(6)) else {
            throw TransparencyError("a tlog proof has an `index <n>` line")
        }
        var inclusion: [[UInt8]] = []
        var consumed = false
        while let line = lines.popFirst() {
            if line.isEmpty { consumed = true; break }
            guard inclusion.count < 64, let hash = Base64.decodeStandard(String(line)), hash.count == MerkleTree.hashLength else {
                throw TransparencyError("each inclusion proof line is the base64 of a 32-byte hash (at most 63)")
            }
            inclusion.append(hash)
        }
        guard consumed else { throw TransparencyError("a tlog proof has an empty line before its checkpoint") }
        let checkpoint = lines.joined(separator: "\n")
        guard !checkpoint.isEmpty else { throw TransparencyError("a tlog proof ends with a checkpoint") }
        self.init(extra: extra, index: index, inclusion: inclusion, checkpoint: checkpoint)
    }
}

/// One check of an offline verification, with its reason.
public struct TransparencyCheck: Sendable, Equatable, CustomStringConvertible {
    public let name: String
    public let passed: Bool
    public let detail: String
    public init(name: String, passed: Bool, detail: String) { self.name = name; self.passed = passed; self.detail = detail }
    public var description: String { "\(passed ? "ok  " : "FAIL") \(name): \(detail)" }
}

/// tlog-proof "Verifying a tlog proof", for a log whose leaves are 32-byte commitments.
public enum TlogProofVerifier {
    /// Checks `proofText` for `commitment` against the log's verifier key (type 0x01), the witnesses'
    /// cosignature/v1 keys (type 0x04) and a minimum number of them; every check is reported, in order:
    /// `proof-format`, `log-signature`, `cosignatures`, `inclusion`. All must pass.
    public static func verify(proofText: String, commitment: [UInt8], logKey: String, witnessKeys: [String] = [], minWitnesses: Int = 0) -> [TransparencyCheck] {
        var checks: [TransparencyCheck] = []
        let proof: TlogProof
        do throws(TransparencyError) {
            proof = try TlogProof(parsing: proofText)
            guard commitment.count == MerkleTree.hashLength else { throw TransparencyError("the commitment is \(commitment.count) bytes, not 32") }
            checks.append(.init(name: "proof-format", passed: true, detail: "c2sp.org/tlog-proof@v1, index \(proof.index), \(proof.inclusion.count) proof hashes"))
        } catch {
            return [.init(name: "proof-format", passed: false, detail: error.reason)]
        }
        let log: VerifierKey
        var witnesses: [VerifierKey] = []
        do throws(TransparencyError) {
            log = try VerifierKey(parsing: logKey)
            guard log.type == .ed25519 else { throw TransparencyError("the log key \(log.name) is not an Ed25519 note key (type 0x01)") }
            for text in witnessKeys {
                let key = try VerifierKey(parsing: text)
                guard key.type == .cosignatureV1 else { throw TransparencyError("the witness key \(key.name) is not a cosignature/v1 key (type 0x04)") }
                witnesses.append(key)
            }
        } catch {
            return checks + [.init(name: "log-signature", passed: false, detail: "a key does not parse: \(error.reason)")]
        }
        let opened: VerifiedCheckpoint
        do {
            opened = try Checkpoint.open(proof.checkpoint, logKey: log, witnesses: witnesses)
            let c = opened.checkpoint
            checks.append(.init(name: "log-signature", passed: true, detail: "checkpoint \(c.origin) size \(c.size) signed by \(log.name)+\(Hex.encode(bigEndian(log.keyID)))"))
        } catch {
            return checks + [.init(name: "log-signature", passed: false, detail: error.reason)]
        }
        let count = opened.cosigners.count
        checks.append(.init(name: "cosignatures", passed: count >= minWitnesses,
                            detail: count >= minWitnesses
                                ? "\(count) of \(witnesses.count) known witnesses cosigned (\(minWitnesses) required)" + (count > 0 ? ": " + opened.cosigners.joined(separator: ", ") : "")
                                : "\(count) of \(witnesses.count) known witnesses cosigned, \(minWitnesses) required"))
        let c = opened.checkpoint
        let included = MerkleTree.verifyInclusion(index: proof.index, size: c.size, leafHash: MerkleTree.leafHash(commitment),
                                                  proof: proof.inclusion, root: c.root)
        checks.append(.init(name: "inclusion", passed: included,
                            detail: included ? "the commitment is entry \(proof.index) of the tree of size \(c.size)"
                                : "the inclusion proof does not bind the commitment at index \(proof.index) to the root of size \(c.size)"))
        return checks
    }
}

/// tlog-witness v1.0.0 `add-checkpoint`: the request body and the answers.
public enum AddCheckpoint {
    public static func body(oldSize: UInt64, consistency: [[UInt8]], checkpoint: String) -> String {
        "old \(oldSize)\n" + consistency.map { Base64.encodeStandard($0) + "\n" }.joined() + "\n" + checkpoint
    }

    /// A 409's body: the witness's latest cosigned size and a newline.
    public static func conflictSize(_ body: [UInt8]) -> UInt64? {
        guard body.last == 0x0A else { return nil }
        return parseDecimal(String(decoding: body.dropLast(), as: UTF8.self))
    }

    /// A 200's body: signature lines; those by `witness` (name and key ID) that verify over the
    /// checkpoint text are returned, the rest ignored.
    public static func cosignatures(_ body: [UInt8], checkpointText: String, witness: VerifierKey) throws(TransparencyError) -> [SignedNote.Signature] {
        let verifier = try CosignatureV1Verifier(witness)
        let text = String(decoding: body, as: UTF8.self)
        guard text.hasSuffix("\n"), text.utf8.count <= 64 * 1024 else { throw TransparencyError("the witness's answer is signature lines, each ending in a newline") }
        var good: [SignedNote.Signature] = []
        for line in text.dropLast().split(separator: "\n", omittingEmptySubsequences: false) {
            let signature = try SignedNote.Signature(line: line)
            guard signature.name == verifier.name && signature.keyID == verifier.keyID else { continue }
            guard verifier.verify(text: checkpointText, signature: signature.signature) else { throw TransparencyError("the cosignature by \(witness.name) does not verify") }
            good.append(signature)
        }
        guard !good.isEmpty else { throw TransparencyError("no cosignature by \(witness.name)") }
        return good
    }
}
