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
        // A receipt erased between the list and its read is left out.
        let packed = try receipts(ids.map { ($0, account.id) }, database: database)
        var detail: [(key: String, value: JSONValue)] = [("receipts", .number(Double(ids.count))), ("kind", "evidence-pack")]
        if let since { detail.append(("since", .string(iso8601(since)))) }
        try database.audit.append(AuditRecord(actor: "cli", action: "receipts.exported", subject: account.id, detail: .object(detail)))
        return Contents(files: packed.files, receipts: ids.count, unlogged: packed.unlogged)
    }

    /// `receipts.jsonl`, a proof for each receipt the log holds, and the log's newest checkpoint, for
    /// `wanted` (receipt id, its user); the ids not found are named in `missing`.
    static func receipts(_ wanted: [(id: String, userId: String)], database: Database) throws
        -> (files: [(name: String, bytes: [UInt8])], unlogged: [String], missing: [String]) {
        var lines: [UInt8] = []
        var proofs: [(name: String, bytes: [UInt8])] = []
        var unlogged: [String] = []
        var missing: [String] = []
        for (id, userId) in wanted {
            guard let found = try database.transparencyLog.receipt(id: id, userId: userId, minWitnesses: 0) else {
                missing.append(id)
                continue
            }
            let proof: TransparencyLog.ReceiptProof
            do { proof = try TransparencyLog.proof(found, id: id) } catch { throw Failure(description: "receipt \(id): \(error.detail)") }
            lines += proof.document + [0x0A]
            if let text = proof.proof { proofs.append(("proofs/\(id).tlog-proof", Array(text.utf8))) } else { unlogged.append(id) }
        }
        var files = [(name: "receipts.jsonl", bytes: lines)] + proofs
        if let checkpoint = try database.transparencyLog.newestCheckpoint()?.checkpoint { files.append(("checkpoint", Array(checkpoint.utf8))) }
        return (files, unlogged, missing)
    }
}

extension EvidencePack {
    /// `receipts export --approval <id>`: an approval pack — `approval.json` (the approval as
    /// `GET /v1/approvals/{id}` shows it: its action and hash, needed, subject, requester, state and
    /// who approved with which receipt), then the approvers' receipts, proofs and the checkpoint as
    /// in a user's pack — that `receipts verify --approval` checks as a quorum: `needed` receipts of
    /// distinct accounts on this approval's action, each in the log.
    public static func export(database: Database, approval id: String, runtime: Runtime = .system) throws -> Contents {
        guard let read = try database.approvals.read(id: id, caller: "") else { throw Failure(description: "no approval has the id \(id)") }
        let approval = read.approval
        let packed = try receipts(approval.entries.map { ($0.receiptId, $0.userId) }, database: database)
        if let gone = packed.missing.first {
            throw Failure(description: "the receipt \(gone) of this approval is gone (past LATCHKEY_RECEIPT_RETENTION?)")
        }
        let view = ApprovalView(approval: approval, state: ApprovalService.state(approval, at: runtime.now()))
        let files = [(name: "approval.json", bytes: ApprovalRenderer.approval(view).canonicalized())] + packed.files
        try database.audit.append(AuditRecord(actor: "cli", action: "receipts.exported", subject: approval.subject,
                                              detail: .object([("approvalId", .string(approval.id)), ("receipts", .number(Double(approval.entries.count))),
                                                               ("kind", "approval-pack")])))
        return Contents(files: files, receipts: approval.entries.count, unlogged: packed.unlogged)
    }
}
