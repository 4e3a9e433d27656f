import Foundation
@testable import LatchkeyServer
import Storage
import Synchronization

/// `TransparencyLogStore` in memory, keeping the SQL's rules: one integration at a time (the
/// advisory lock: a second one meanwhile does nothing), the batch oldest first, the append (leaves,
/// nodes, indices, checkpoint, size) all or nothing, a receipt's checkpoint the newest holding it
/// with enough cosignatures else the newest, another user's receipt invisible.
final class InMemoryTransparencyLogStore: TransparencyLogStore, Sendable {
    struct Receipt: Sendable {
        let id: String
        let userId: String
        let document: [UInt8]?
        let commitment: [UInt8]?
        let createdAt: Date
        var logIndex: Int64?
    }

    struct Tables: Sendable {
        var state: LogState?
        var receipts: [Receipt] = []
        var entries: [Int64: [UInt8]] = [:]
        var nodes: [String: [UInt8]] = [:]
        var checkpoints: [Int64: (note: String, root: [UInt8])] = [:]
        var cosignatures: [Int64: [String: String]] = [:]
        var witnesses: [String: Int64] = [:]
    }

    let tables = Mutex(Tables())
    private let writer = Mutex(false)

    static func key(_ level: Int, _ index: Int64) -> String { "\(level)/\(index)" }

    func addReceipt(id: String, userId: String, document: [UInt8]?, commitment: [UInt8]?, at: Date) {
        tables.withLock { $0.receipts.append(Receipt(id: id, userId: userId, document: document, commitment: commitment, createdAt: at)) }
    }

    func state() throws(StorageError) -> LogState? { tables.withLock { $0.state } }

    func create(origin: String, publicKey: [UInt8], sealedKey: [UInt8]) throws(StorageError) -> LogState {
        tables.withLock { t in
            if t.state == nil { t.state = LogState(origin: origin, publicKey: publicKey, sealedKey: sealedKey, size: 0, signedSize: 0) }
            return t.state!
        }
    }

    func integrate(limit: Int, build: (LogState, [NodeHash], [Queued]) throws -> Append?) throws(StorageError) -> Append? {
        guard writer.withLock({ held in defer { held = true }; return !held }) else { return nil }
        defer { writer.withLock { $0 = false } }
        let (state, edge, queued) = tables.withLock { t -> (LogState?, [NodeHash], [Queued]) in
            guard let s = t.state else { return (nil, [], []) }
            var edge: [NodeHash] = []
            for j in 0..<63 where (s.size >> Int64(j)) & 1 == 1 {
                let index = (s.size >> Int64(j)) - 1
                if let h = t.nodes[Self.key(j, index)] { edge.append(NodeHash(level: j, index: index, hash: h)) }
            }
            let queued = t.receipts.filter { $0.commitment != nil && $0.logIndex == nil }
                .sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }.prefix(limit)
                .map { Queued(id: $0.id, commitment: $0.commitment!, createdAt: $0.createdAt) }
            return (s, edge, queued)
        }
        guard let state else { return nil }
        let append: Append?
        do { append = try build(state, edge, queued) } catch { throw StorageError.unavailable("\(error)") }
        guard let append else { return nil }
        tables.withLock { t in
            let start = state.size
            for (k, r) in append.receipts.enumerated() {
                t.entries[start + Int64(k)] = r.commitment
                if let i = t.receipts.firstIndex(where: { $0.id == r.id }) { t.receipts[i].logIndex = start + Int64(k) }
            }
            for n in append.nodes { t.nodes[Self.key(n.level, n.index)] = n.hash }
            let size = start + Int64(append.receipts.count)
            t.checkpoints[size] = (append.note, append.root)
            t.state = LogState(origin: state.origin, publicKey: state.publicKey, sealedKey: state.sealedKey, size: size,
                               signedSize: max(state.signedSize, size))
        }
        return append
    }

    private func served(_ t: Tables, size: Int64) -> String? {
        guard let c = t.checkpoints[size] else { return nil }
        return c.note + (t.cosignatures[size] ?? [:]).sorted { $0.key < $1.key }.map(\.value).joined()
    }

    func newestCheckpoint() throws(StorageError) -> Served? {
        tables.withLock { t in
            t.state.map { Served(origin: $0.origin, publicKey: $0.publicKey, size: $0.size, checkpoint: served(t, size: $0.size)) }
        }
    }

    func nodes(level: Int, start: Int64, count: Int) throws(StorageError) -> [[UInt8]] {
        tables.withLock { t in (start..<(start + Int64(count))).compactMap { t.nodes[Self.key(level, $0)] } }
    }

    func entries(start: Int64, count: Int) throws(StorageError) -> [[UInt8]] {
        tables.withLock { t in (start..<(start + Int64(count))).compactMap { t.entries[$0] } }
    }

    func receipt(id: String, userId: String?, minWitnesses: Int) throws(StorageError) -> ReceiptWithProof? {
        tables.withLock { t in
            guard let r = t.receipts.first(where: { $0.id == id && (userId == nil || $0.userId == userId) }) else { return nil }
            var checkpoint: (note: String, size: Int64)?
            if let index = r.logIndex {
                let holding = t.checkpoints.keys.filter { $0 > index }
                let enough = holding.filter { (t.cosignatures[$0]?.count ?? 0) >= minWitnesses }
                if let size = enough.max() ?? holding.max() {
                    checkpoint = (served(t, size: size)!, size)
                }
            }
            // Every stored node: the service picks what the proof needs.
            let nodes: [NodeHash] = checkpoint == nil ? [] : t.nodes.map { k, h -> NodeHash in
                let parts = k.split(separator: "/")
                return NodeHash(level: Int(parts[0])!, index: Int64(parts[1])!, hash: h)
            }
            return ReceiptWithProof(document: r.document, logIndex: r.logIndex, checkpoint: checkpoint, nodes: nodes)
        }
    }

    func nodes(_ wanted: [(level: Int, index: Int64)]) throws(StorageError) -> [NodeHash] {
        tables.withLock { t in wanted.compactMap { w in t.nodes[Self.key(w.level, w.index)].map { NodeHash(level: w.level, index: w.index, hash: $0) } } }
    }

    func witnessSize(origin: String, witness: String) throws(StorageError) -> Int64 { tables.withLock { $0.witnesses[witness] ?? 0 } }

    func recordCosignature(origin: String, size: Int64, witness: String, lines: String) throws(StorageError) {
        tables.withLock { t in
            t.cosignatures[size, default: [:]][witness] = lines
            t.witnesses[witness] = max(t.witnesses[witness] ?? 0, size)
        }
    }

    func recordWitnessSize(origin: String, witness: String, size: Int64) throws(StorageError) { tables.withLock { $0.witnesses[witness] = size } }
}
