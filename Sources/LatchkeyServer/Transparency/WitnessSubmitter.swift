import Curl
import Foundation
import Storage
import Synchronization
import Transparency

/// C2SP tlog-witness v1.0.0 `add-checkpoint`: each new checkpoint goes to every configured witness
/// with the consistency proof from the size that witness last cosigned, on a thread of its own so a
/// slow or refusing witness never delays integration (nor an approval). A 200's cosignature lines
/// are verified with the witness's key and stored with the checkpoint; a 409 gives the witness's
/// size, from which it is sent again once; anything else is logged and counted
/// (`latchkey_log_witness_total{witness,outcome}`).
final class WitnessSubmitter: Sendable {
    struct Witness: Sendable {
        let url: String
        let key: VerifierKey
        var label: String { key.name }
    }

    let store: any TransparencyLogStore
    let witnesses: [Witness]
    let metrics: Metrics
    private let pending = Mutex<(TransparencyLog.Integrated, TransparencyLog)?>(nil)
    private let signal = NSCondition()
    private let running = Mutex(false)

    init(store: any TransparencyLogStore, witnesses: [LogWitness], metrics: Metrics) {
        self.store = store
        self.witnesses = witnesses.compactMap { w in (try? VerifierKey(parsing: w.key)).map { Witness(url: w.url, key: $0) } }
        self.metrics = metrics
    }

    /// Hands the newest checkpoint to the submitting thread (an older one not yet sent is skipped:
    /// the newest carries a consistency proof from wherever each witness is).
    func submit(_ integrated: TransparencyLog.Integrated, tree: TransparencyLog) {
        guard !witnesses.isEmpty else { return }
        pending.withLock { $0 = (integrated, tree) }
        let start = running.withLock { r -> Bool in
            defer { r = true }
            return !r
        }
        if start {
            let thread = Thread { [self] in
                while true {
                    signal.lock()
                    while pending.withLock({ $0 == nil }) { signal.wait() }
                    signal.unlock()
                    guard let (next, tree) = pending.withLock({ p -> (TransparencyLog.Integrated, TransparencyLog)? in defer { p = nil }; return p }) else { continue }
                    for witness in witnesses { send(next, to: witness, tree: tree) }
                }
            }
            thread.name = "latchkey-tlog-witness"
            thread.start()
        }
        signal.lock()
        signal.broadcast()
        signal.unlock()
    }

    /// One witness, one checkpoint; returns the outcome counted.
    @discardableResult
    func send(_ integrated: TransparencyLog.Integrated, to witness: Witness, tree: TransparencyLog, retried: Bool = false) -> String {
        let origin = integrated.checkpoint.origin
        let size = Int64(integrated.checkpoint.size)
        let outcome: String
        do {
            let old = try store.witnessSize(origin: origin, witness: witness.label)
            guard old <= size else { return count(witness, "conflict", "it holds size \(old), beyond this checkpoint's \(size)") }
            let proof = try tree.consistencyProof(oldSize: old, size: size)
            let body = AddCheckpoint.body(oldSize: UInt64(old), consistency: proof, checkpoint: integrated.note)
            let response = try Self.post(body, to: witness)
            switch response.status {
            case 200:
                outcome = try recordCosigned(response.body, checkpoint: integrated.checkpoint, by: witness)
            case 409:
                // tlog-witness: the witness's latest cosigned size, `text/x.tlog.size`; sent again once from there.
                guard let theirs = AddCheckpoint.conflictSize(response.body) else {
                    return count(witness, "conflict", "409 with no size (the old size matches but the root does not?)")
                }
                guard !retried, Int64(exactly: theirs).map({ $0 <= size && $0 != old }) == true else {
                    return count(witness, "conflict", "it holds size \(theirs); this checkpoint is \(size)")
                }
                try store.recordWitnessSize(origin: origin, witness: witness.label, size: Int64(theirs))
                return send(integrated, to: witness, tree: tree, retried: true)
            default:
                outcome = count(witness, "refused", "HTTP \(response.status): \(String(decoding: response.body.prefix(200), as: UTF8.self))")
            }
        } catch let error as CurlError {
            outcome = count(witness, "unreachable", error.description)
        } catch let error as TransparencyError {
            outcome = count(witness, "bad_cosignature", error.reason)
        } catch {
            outcome = count(witness, "failed", String(describing: error))
        }
        return outcome
    }

    /// `POST <prefix>/add-checkpoint`.
    static func post(_ body: String, to witness: Witness) throws(CurlError) -> CurlResponse {
        var options = CurlOptions()
        options.timeoutSeconds = 5
        options.protocols = witness.url.hasPrefix("http://") ? "http,https" : "https"
        let url = (witness.url.hasSuffix("/") ? String(witness.url.dropLast()) : witness.url) + "/add-checkpoint"
        return try Curl.post(url, headers: [("Content-Type", "text/plain; charset=utf-8")], body: Array(body.utf8), options: options)
    }

    /// SPEC "No rollback": the size a witness holds for this log, read back with `old 0` (its 409
    /// says it); a 200 means it held none and cosigned `note`, which is stored. Nil when it could not
    /// be read (unreachable, another answer: logged and counted).
    func readBack(note: String, to witness: Witness) -> Int64? {
        guard let signed = try? SignedNote(parsing: note), let checkpoint = try? Checkpoint(text: signed.text) else { return nil }
        do {
            let response = try Self.post(AddCheckpoint.body(oldSize: 0, consistency: [], checkpoint: note), to: witness)
            switch response.status {
            case 409:
                guard let size = AddCheckpoint.conflictSize(response.body).flatMap(Int64.init(exactly:)) else {
                    count(witness, "conflict", "409 with no size to `old 0`"); return nil
                }
                try store.recordWitnessSize(origin: checkpoint.origin, witness: witness.label, size: size)
                return size
            case 200:
                try recordCosigned(response.body, checkpoint: checkpoint, by: witness)
                return Int64(checkpoint.size)
            default:
                count(witness, "refused", "HTTP \(response.status) to `old 0`: \(String(decoding: response.body.prefix(200), as: UTF8.self))")
                return nil
            }
        } catch {
            count(witness, "unreachable", "reading its size back: \(error)")
            return nil
        }
    }

    /// A 200's cosignature lines, verified with the witness's key over `checkpoint`, stored with it.
    @discardableResult
    private func recordCosigned(_ body: [UInt8], checkpoint: Checkpoint, by witness: Witness) throws -> String {
        let lines = try AddCheckpoint.cosignatures(body, checkpointText: checkpoint.text, witness: witness.key)
        try store.recordCosignature(origin: checkpoint.origin, size: Int64(checkpoint.size), witness: witness.label, lines: lines.map(\.line).joined())
        return count(witness, "cosigned", nil)
    }

    @discardableResult
    private func count(_ witness: Witness, _ outcome: String, _ reason: String?) -> String {
        metrics.observeWitness(witness.label, outcome: outcome)
        if let reason {
            FileHandle.standardError.write(Data("latchkey: transparency log: witness \(witness.label) \(outcome): \(reason)\n".utf8))
        }
        return outcome
    }
}
