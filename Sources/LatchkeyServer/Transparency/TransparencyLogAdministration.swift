import Crypto
import Foundation
import Storage
import JSON
import Transparency

/// What `latchkey log` and `latchkey keys rotate` do to the transparency log.
public enum TransparencyLogAdministration {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The origin after `old`: `<origin>/<n+1>` when `old` is `<origin>/<n>` (n ≥ 2), else `<old>/2`.
    static func nextOrigin(after old: String) -> String {
        if let slash = old.lastIndex(of: "/"), let n = Int(old[old.index(after: slash)...]), n >= 2, String(n) == old[old.index(after: slash)...] {
            return "\(old[..<slash])/\(n + 1)"
        }
        return "\(old)/2"
    }

    /// SPEC "No rollback": a new log under a new origin with a new key; the old log's leaves go and
    /// every receipt is appended again to the new one. Returns the new origin and its verifier key.
    public static func reset(database: Database, kek: KeyEncryptionKey?, runtime: Runtime = .system) throws -> (origin: String, verifierKey: String) {
        guard let kek else { throw Failure(description: "LATCHKEY_KEY_ENCRYPTION_KEY is not set: the transparency log is off") }
        let key = PrivateKey.generateEd25519()
        let publicKey = key.publicKey.rawEd25519!
        var made = ""
        let old = try database.transparencyLog.reset(origin: { old in made = nextOrigin(after: old); return made }, publicKey: publicKey) { origin in
            try SealedSecret.seal(Array(key.pkcs8PEM.utf8), under: kek, binding: .init(purpose: TransparencyLog.sealPurpose, id: origin),
                                  nonce: runtime.random(AESGCM.nonceSize))
        }
        guard old != nil else { throw Failure(description: "there is no transparency log yet (it is made by the first `serve` with a KEK)") }
        return (made, VerifierKey(name: made, type: .ed25519, publicKey: publicKey).description)
    }

    /// `keys rotate --new-key`: the log's key re-sealed from `kek` to `newKEK` (nothing when there is no log).
    public static func reseal(database: Database, from kek: KeyEncryptionKey, to newKEK: KeyEncryptionKey, runtime: Runtime = .system) throws {
        guard let state = try database.transparencyLog.state() else { return }
        let binding = SealedSecret.Binding(purpose: TransparencyLog.sealPurpose, id: state.origin)
        let plaintext: [UInt8]
        do { plaintext = try SealedSecret.open(state.sealedKey, with: kek, binding: binding) } catch {
            throw Failure(description: "the current LATCHKEY_KEY_ENCRYPTION_KEY cannot open the transparency log's key: \(error)")
        }
        let sealed = try SealedSecret.seal(plaintext, under: newKEK, binding: binding, nonce: runtime.random(AESGCM.nonceSize))
        guard try database.transparencyLog.reseal(from: state.sealedKey, to: sealed) else {
            throw Failure(description: "the transparency log's key changed meanwhile; run it again")
        }
    }
}

/// `latchkey receipts export`: an evidence pack (SPEC "Evidence" → "Offline"), a tar that
/// `receipts verify --pack` checks as a whole without Latchkey's database.
public enum EvidencePack {
    /// The pack's files, in the order they are archived: `receipts.jsonl` (each receipt's stored
    /// RFC 8785 bytes, one a line), `proofs/<id>.tlog-proof` for each receipt the log has
    /// integrated, and `checkpoint` (the log's newest, with its cosignatures).
    public struct Contents: Sendable {
        public let files: [(name: String, bytes: [UInt8])]
        /// The receipts packed, and those of them the log has not integrated yet (no proof).
        public let receipts: Int
        public let unlogged: [String]
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The pack of `user`'s receipts (an account id, else a username) written at or after `since`,
    /// with the audit line that records the export (actor `cli`: the operator's shell). The audit
    /// line is written before the pack is handed over: no export goes unrecorded.
    public static func export(database: Database, user: String, since: Date?) throws -> Contents {
        guard let account = try database.accounts.user(id: user) ?? database.accounts.user(username: user) else {
            throw Failure(description: "no account has the id or username \(user)")
        }
        let ids = try database.transparencyLog.documentedReceipts(userId: account.id, since: since)
        var lines: [UInt8] = []
        var files: [(name: String, bytes: [UInt8])] = []
        var unlogged: [String] = []
        for id in ids {
            guard let found = try database.transparencyLog.receipt(id: id, userId: account.id, minWitnesses: 0) else { continue }
            let proof: TransparencyLog.ReceiptProof
            do { proof = try TransparencyLog.proof(found, id: id) } catch { throw Failure(description: "receipt \(id): \(error.detail)") }
            lines += proof.document + [0x0A]
            if let text = proof.proof { files.append(("proofs/\(id).tlog-proof", Array(text.utf8))) } else { unlogged.append(id) }
        }
        files.insert(("receipts.jsonl", lines), at: 0)
        if let checkpoint = try database.transparencyLog.newestCheckpoint()?.checkpoint { files.append(("checkpoint", Array(checkpoint.utf8))) }
        var detail: [(key: String, value: JSONValue)] = [("receipts", .number(Double(ids.count))), ("kind", "evidence-pack")]
        if let since { detail.append(("since", .string(iso8601(since)))) }
        try database.audit.append(AuditRecord(actor: "cli", action: "receipts.exported", subject: account.id, detail: .object(detail)))
        return Contents(files: files, receipts: ids.count, unlogged: unlogged)
    }
}

extension EvidencePack {
    /// `receipts export --approval <id>`: an approval pack — `approval.json` (the approval: its id,
    /// policy, needed, action and its hash, subject, requester, state and who approved with which
    /// receipt), then the approvers' receipts, proofs and the checkpoint as in a user's pack — that
    /// `receipts verify --approval` checks as a quorum: `needed` receipts of distinct accounts on
    /// this approval's action, each in the log.
    public static func export(database: Database, approval id: String) throws -> Contents {
        guard let read = try database.approvals.read(id: id, caller: "") else { throw Failure(description: "no approval has the id \(id)") }
        let approval = read.approval
        var lines: [UInt8] = []
        var files: [(name: String, bytes: [UInt8])] = []
        var unlogged: [String] = []
        for entry in approval.entries {
            guard let found = try database.transparencyLog.receipt(id: entry.receiptId, userId: entry.userId, minWitnesses: 0) else {
                throw Failure(description: "the receipt \(entry.receiptId) of \(entry.userId)'s approval is gone (past LATCHKEY_RECEIPT_RETENTION?)")
            }
            let proof: TransparencyLog.ReceiptProof
            do { proof = try TransparencyLog.proof(found, id: entry.receiptId) } catch { throw Failure(description: "receipt \(entry.receiptId): \(error.detail)") }
            lines += proof.document + [0x0A]
            if let text = proof.proof { files.append(("proofs/\(entry.receiptId).tlog-proof", Array(text.utf8))) } else { unlogged.append(entry.receiptId) }
        }
        let action = (try? JSONParser.parse(Array(approval.action.utf8))) ?? .string(approval.action)
        let document: JSONValue = .object([
            ("id", .string(approval.id)), ("policy", .string(approval.policy)), ("needed", .number(Double(approval.needed))),
            ("action", action), ("actionHash", .string(Base64URL.encode(approval.actionHash))),
            ("subject", approval.subject.map(JSONValue.string) ?? .null), ("requester", .string(approval.requester)),
            ("state", .string(approval.state.rawValue)), ("breakGlass", .bool(approval.breakGlass)),
            ("approvals", .array(approval.entries.map { e in
                .object([("userId", .string(e.userId)), ("receiptId", .string(e.receiptId)), ("approvedAt", .string(iso8601(e.approvedAt)))])
            })),
        ])
        files.insert(("receipts.jsonl", lines), at: 0)
        files.insert(("approval.json", document.canonicalized()), at: 0)
        if let checkpoint = try database.transparencyLog.newestCheckpoint()?.checkpoint { files.append(("checkpoint", Array(checkpoint.utf8))) }
        try database.audit.append(AuditRecord(actor: "cli", action: "receipts.exported", subject: approval.subject,
                                              detail: .object([("approvalId", .string(approval.id)), ("receipts", .number(Double(approval.entries.count))),
                                                               ("kind", "approval-pack")])))
        return Contents(files: files, receipts: approval.entries.count, unlogged: unlogged)
    }
}
