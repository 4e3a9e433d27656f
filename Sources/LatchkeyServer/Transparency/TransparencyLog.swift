import Crypto
import Foundation
import Storage
import Synchronization
import Transparency

/// SPEC "Evidence" → "The log": a C2SP transparency log of receipt commitments. Any instance may be
/// the integrating writer, one at a time (the store's advisory lock): every `LATCHKEY_LOG_INTERVAL`
/// it appends the commitments waiting, oldest first, and stores the new hashes and the signed
/// checkpoint in one transaction. Its Ed25519 key is made once, sealed under the KEK; without a KEK
/// the log is off.
final class TransparencyLog: Sendable {
    struct Settings: Sendable {
        let origin: String
        let interval: Double
        let witnesses: [LogWitness]
        let stateFile: String?
        /// Leaves appended per integration at most.
        var batchLimit = 2000

        init(_ c: Configuration) {
            origin = c.effectiveLogOrigin
            interval = c.logInterval
            witnesses = c.logWitnesses
            stateFile = c.logStateFile
        }
    }

    /// Why `serve` refuses to start: a rolled-back tree, or a key that does not open. Not a database
    /// wait (`Services.isDatabaseWait`): start-up ends with exit 1 and this text.
    struct Refusal: Error, CustomStringConvertible {
        let description: String

        /// SPEC "No rollback": the stored tree of `size` is behind a checkpoint already seen.
        static func forked(size: Int64, behind checkpoint: String) -> Refusal {
            Refusal(description: "the transparency log's stored tree (size \(size)) is smaller than \(checkpoint): a restored backup would fork the log; "
                    + "`latchkey log reset --i-understand` starts a new log")
        }
    }

    let store: any TransparencyLogStore
    let sealer: SecretSealer
    let settings: Settings
    let metrics: Metrics
    let runtime: Runtime
    let witnesses: WitnessSubmitter
    private let signer = Mutex<Ed25519NoteSigner?>(nil)
    private let stopped = Mutex(false)
    private let bell = DispatchSemaphore(value: 0)

    init(store: any TransparencyLogStore, sealer: SecretSealer, settings: Settings, metrics: Metrics, runtime: Runtime) {
        self.store = store
        self.sealer = sealer
        self.settings = settings
        self.metrics = metrics
        self.runtime = runtime
        witnesses = WitnessSubmitter(store: store, witnesses: settings.witnesses, metrics: metrics)
    }

    var isEnabled: Bool { sealer.isAvailable }

    static let sealPurpose = "transparency_log"

    /// A checkpoint origin or key name: non-empty, no Unicode space, no `+`, no control character.
    static func isValidOrigin(_ text: String) -> Bool { SignedNote.isValidKeyName(text) && text.utf8.count <= 512 }

    static func isWitnessKey(_ text: String) -> Bool { (try? VerifierKey(parsing: text))?.type == .cosignatureV1 }

    // MARK: Start-up

    /// Start-up step: the log's row made (the integrating kind of instance only) or read, its key
    /// opened, and the no-rollback checks: the stored tree is not smaller than the largest size
    /// signed, nor than `LATCHKEY_LOG_STATE` says.
    func prepare() throws {
        guard isEnabled else { return }
        var state = try store.state()
        if state == nil, settings.interval > 0 {
            let key = PrivateKey.generateEd25519()
            let sealed = try sealer.seal(Array(key.pkcs8PEM.utf8), purpose: Self.sealPurpose, id: settings.origin)
            state = try store.create(origin: settings.origin, publicKey: key.publicKey.rawEd25519!, sealedKey: sealed)
        }
        guard let state else { return }
        let pem: [UInt8]
        do { pem = try sealer.open(state.sealedKey, purpose: Self.sealPurpose, id: state.origin) } catch {
            throw Refusal(description: "the transparency log's key (origin \(state.origin)) does not open under LATCHKEY_KEY_ENCRYPTION_KEY")
        }
        let key = try PrivateKey(pkcs8PEM: String(decoding: pem, as: UTF8.self))
        guard key.publicKey.rawEd25519 == state.publicKey else {
            throw Refusal(description: "the transparency log's sealed key is not the key of its row (origin \(state.origin))")
        }
        if state.size < state.signedSize {
            throw Refusal.forked(size: state.size, behind: "the last checkpoint it signed (size \(state.signedSize), recorded in PostgreSQL)")
        }
        if let file = settings.stateFile, let recorded = Self.readStateFile(file), recorded.origin == state.origin, recorded.size > state.size {
            throw Refusal.forked(size: state.size, behind: "the last checkpoint it signed (size \(recorded.size), recorded in LATCHKEY_LOG_STATE \(file))")
        }
        // The witnesses' sizes, read back with `old 0`: one beyond the stored tree saw a checkpoint
        // this database no longer holds. A witness that cannot be reached is logged, not waited for.
        if !witnesses.witnesses.isEmpty, let note = try store.newestCheckpoint()?.checkpoint {
            for witness in witnesses.witnesses {
                if let theirs = witnesses.readBack(note: note, to: witness), theirs > state.size {
                    throw Refusal.forked(size: state.size, behind: "the checkpoint witness \(witness.label) cosigned (size \(theirs))")
                }
            }
        }
        if settings.interval > 0, state.origin != settings.origin {
            FileHandle.standardError.write(Data(("latchkey: transparency log: warning: its origin is \(state.origin), not LATCHKEY_LOG_ORIGIN's "
                + "\(settings.origin) (the origin is fixed when the log is made; `latchkey log reset --i-understand` starts a new one)\n").utf8))
        }
        signer.withLock { $0 = try? Ed25519NoteSigner(name: state.origin, privateKey: key) }
        metrics.observeLogSize(state.size)
    }

    /// `LATCHKEY_LOG_STATE`: `<origin> <size>\n`.
    static func readStateFile(_ path: String) -> (origin: String, size: Int64)? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        let parts = text.split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard parts.count == 2, let size = Int64(parts[1]) else { return nil }
        return (String(parts[0]), size)
    }

    static func writeStateFile(_ path: String, origin: String, size: Int64) {
        // Written beside, then renamed: a crash leaves the old file or the new one, never half of one.
        let temporary = path + ".tmp"
        guard FileManager.default.createFile(atPath: temporary, contents: Data("\(origin) \(size)\n".utf8)) else { return }
        _ = rename(temporary, path)
    }

    /// The integrating loop, when this instance may integrate (`LATCHKEY_LOG_INTERVAL` > 0).
    func start() {
        guard isEnabled, settings.interval > 0, signer.withLock({ $0 != nil }) else { return }
        let thread = Thread { [self] in
            var lastFailure = ""
            while !stopped.withLock({ $0 }) {
                do {
                    // A full batch: more may wait, so the next integration follows at once.
                    if let done = try integrate(), done.appended == settings.batchLimit { continue }
                    lastFailure = ""
                } catch {
                    // Said once per kind of failure, not every interval while it lasts.
                    let text = String(describing: error)
                    if text != lastFailure { FileHandle.standardError.write(Data("latchkey: transparency log: integration failed: \(text)\n".utf8)) }
                    lastFailure = text
                }
                _ = bell.wait(timeout: .now() + settings.interval)
            }
        }
        thread.name = "latchkey-tlog"
        thread.start()
    }

    func stop() {
        stopped.withLock { $0 = true }
        bell.signal()
    }

    // MARK: Integration

    /// What one integration did.
    struct Integrated: Sendable {
        let checkpoint: Checkpoint
        let note: String
        let oldSize: Int64
        var appended: Int { Int(Int64(checkpoint.size) - oldSize) }
    }

    /// One integration: nil when another instance holds the writers' lock or nothing waits.
    @discardableResult
    func integrate() throws -> Integrated? {
        guard let signer = signer.withLock({ $0 }) else { return nil }
        let now = runtime.now()
        var built: Integrated?
        let append = try store.integrate(limit: settings.batchLimit) { state, edge, queued in
            guard !queued.isEmpty else { return nil }
            guard state.origin == signer.name else { return nil }
            let size = UInt64(state.size)
            var known = Self.nodeMap(edge)
            guard CompleteSubtrees.rightEdge(size: size).allSatisfy({ known[$0] != nil }) else {
                throw Refusal(description: "the transparency log's stored tree lacks its right edge at size \(size)")
            }
            let created = CompleteSubtrees.appending(leafHashes: queued.map { MerkleTree.leafHash($0.commitment) }, at: size, rightEdge: known)
            known.merge(created) { a, _ in a }
            let newSize = size + UInt64(queued.count)
            let root = MerkleTree.root(size: newSize) { known[$0]! }
            let checkpoint = Checkpoint(origin: state.origin, size: newSize, root: root)
            let note = SignedNote(text: checkpoint.text, signatures: [try signer.sign(text: checkpoint.text)]).serialized
            built = Integrated(checkpoint: checkpoint, note: note, oldSize: state.size)
            let nodes = created.map { TransparencyLogRepository.NodeHash(level: $0.key.level, index: Int64($0.key.index), hash: $0.value) }
                .sorted { ($0.level, $0.index) < ($1.level, $1.index) }
            return .init(receipts: queued, nodes: nodes, root: root, note: note)
        }
        guard let append, let integrated = built else { return nil }
        let size = Int64(integrated.checkpoint.size)
        metrics.observeLogSize(size)
        for receipt in append.receipts { metrics.observeLogLag(max(0, now.timeIntervalSince(receipt.createdAt))) }
        if let file = settings.stateFile { Self.writeStateFile(file, origin: integrated.checkpoint.origin, size: size) }
        witnesses.submit(integrated, tree: self)
        return integrated
    }

    // MARK: Reading

    /// The verifier key line of the log, nil while the log is off or not made yet.
    func verifierKey() throws(ServiceError) -> String {
        guard isEnabled, let served = try load({ () throws(StorageError) in try store.newestCheckpoint() }) else { throw Self.off }
        return VerifierKey(name: served.origin, type: .ed25519, publicKey: served.publicKey).description
    }

    /// The newest checkpoint with the cosignatures it holds.
    func checkpoint() throws(ServiceError) -> String {
        guard isEnabled, let served = try load({ () throws(StorageError) in try store.newestCheckpoint() }), let note = served.checkpoint else {
            throw Self.off
        }
        return note
    }

    /// A tile or entry bundle, when the stored tree holds all of it.
    func tile(_ tile: TilePath) throws(ServiceError) -> [UInt8] {
        guard isEnabled else { throw Self.off }
        guard let range = tile.nodeRange, tile.treeLevel < 64 else { throw ServiceError.notFound("tile") }
        let start = Int64(clamping: range.lowerBound)
        guard start >= 0, range.lowerBound <= UInt64(Int64.max) - 256 else { throw ServiceError.notFound("tile") }
        let rows = try load { () throws(StorageError) in
            tile.isEntryBundle ? try store.entries(start: start, count: tile.count) : try store.nodes(level: tile.treeLevel, start: start, count: tile.count)
        }
        // Served only whole: a partial tile of this width, or the full tile, once every hash exists.
        guard rows.count == tile.count else { throw ServiceError.notFound("tile") }
        return tile.isEntryBundle ? EntryBundle.encode(rows) : rows.flatMap { $0 }
    }

    /// A receipt document and its tlog-proof (nil until integrated).
    struct ReceiptProof: Sendable {
        let document: [UInt8]
        let proof: String?
    }

    func receipt(id: String, userId: String?, minWitnesses: Int) throws(ServiceError) -> ReceiptProof {
        guard let found = try load({ () throws(StorageError) in try store.receipt(id: id, userId: userId, minWitnesses: minWitnesses) }) else {
            throw ServiceError.notFound("receipt")
        }
        return try Self.proof(found, id: id)
    }

    /// A receipt as read with what its proof needs (`TransparencyLogStore.receipt`), with that proof.
    static func proof(_ found: TransparencyLogRepository.ReceiptWithProof, id: String) throws(ServiceError) -> ReceiptProof {
        guard let document = found.document else {
            throw ServiceError(.notFound, "this receipt was stored before receipts were documents: read it at /v1/step-up/receipts/{id}")
        }
        guard let index = found.logIndex, let checkpoint = found.checkpoint else { return ReceiptProof(document: document, proof: nil) }
        do {
            let inclusion = try MerkleTree.inclusionProof(index: UInt64(index), size: UInt64(checkpoint.size), node: nodeReader(found.nodes))
            return ReceiptProof(document: document, proof: TlogProof(index: UInt64(index), inclusion: inclusion, checkpoint: checkpoint.note).text)
        } catch {
            throw ServiceError(.internalError, "the log's stored tree cannot prove receipt \(id): \(error)")
        }
    }

    /// The consistency proof from `oldSize` to `size`, from the stored nodes (witness submissions).
    func consistencyProof(oldSize: Int64, size: Int64) throws -> [[UInt8]] {
        let wanted = MerkleTree.nodesForConsistency(oldSize: UInt64(oldSize), size: UInt64(size))
        let rows = try store.nodes(wanted.map { ($0.level, Int64($0.index)) })
        return try MerkleTree.consistencyProof(oldSize: UInt64(oldSize), size: UInt64(size), node: Self.nodeReader(rows))
    }

    /// Stored nodes keyed as `MerkleTree` reads them.
    static func nodeMap(_ rows: [TransparencyLogRepository.NodeHash]) -> [MerkleTree.Node: [UInt8]] {
        Dictionary(rows.map { (MerkleTree.Node(level: $0.level, index: UInt64($0.index)), $0.hash) }, uniquingKeysWith: { _, last in last })
    }

    /// What a proof reads its nodes with: one the store did not return fails the proof.
    static func nodeReader(_ rows: [TransparencyLogRepository.NodeHash]) -> (MerkleTree.Node) throws -> [UInt8] {
        let known = nodeMap(rows)
        return { node in
            guard let hash = known[node] else { throw TransparencyError("node \(node) missing") }
            return hash
        }
    }

    static let off = ServiceError(.notFound, "the transparency log is off (no LATCHKEY_KEY_ENCRYPTION_KEY) or has not started")

    private func load<T>(_ body: () throws(StorageError) -> T) throws(ServiceError) -> T {
        do { return try body() } catch { throw ServiceError(.internalError, "the transparency log cannot be read: \(error)") }
    }
}
