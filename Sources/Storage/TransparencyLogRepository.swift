import Foundation
import PostgreSQL

/// The transparency log's tables (migration 26): its identity and sealed key, the leaves, every
/// complete subtree's hash, the signed checkpoints and the witnesses' cosignatures. The receipts'
/// queue is `step_up_receipts` (migration 25: `commitment`, `log_index`).
public final class TransparencyLogRepository: Sendable {
    let pool: PostgresPool

    init(pool: PostgresPool) { self.pool = pool }

    /// The log's one row.
    public struct LogState: Sendable, Equatable {
        public let origin: String
        public let publicKey: [UInt8]
        public let sealedKey: [UInt8]
        /// The stored tree: the size of the newest checkpoint.
        public let size: Int64
        /// The largest size ever signed for this origin.
        public let signedSize: Int64
        public init(origin: String, publicKey: [UInt8], sealedKey: [UInt8], size: Int64, signedSize: Int64) {
            self.origin = origin; self.publicKey = publicKey; self.sealedKey = sealedKey; self.size = size; self.signedSize = signedSize
        }
    }

    /// A node of the tree: the hash of the 2^level leaves from index·2^level.
    public struct NodeHash: Sendable, Hashable {
        public let level: Int
        public let index: Int64
        public let hash: [UInt8]
        public init(level: Int, index: Int64, hash: [UInt8]) { self.level = level; self.index = index; self.hash = hash }
    }

    /// A receipt waiting for the log, oldest first.
    public struct Queued: Sendable {
        public let id: String
        public let commitment: [UInt8]
        public let createdAt: Date
        public init(id: String, commitment: [UInt8], createdAt: Date) { self.id = id; self.commitment = commitment; self.createdAt = createdAt }
    }

    /// What the writer appends: the batch's receipts in order, every node the append creates, and the
    /// signed checkpoint of the new size.
    public struct Append: Sendable {
        public let receipts: [Queued]
        public let nodes: [NodeHash]
        public let root: [UInt8]
        public let note: String
        public init(receipts: [Queued], nodes: [NodeHash], root: [UInt8], note: String) {
            self.receipts = receipts; self.nodes = nodes; self.root = root; self.note = note
        }
    }

    static func state(_ row: Row) throws -> LogState {
        LogState(origin: try row.string("origin"), publicKey: try row.bytes("public_key"), sealedKey: try row.bytes("sealed_key"),
                 size: try row.int64("size"), signedSize: try row.int64("signed_size"))
    }

    /// The log's row, nil before the first start that made it.
    public func state() throws(StorageError) -> LogState? {
        try pool.run { c in
            try c.query("SELECT origin, public_key, sealed_key, size, signed_size FROM transparency_log").first.map(Self.state)
        }
    }

    /// Makes the log's row with this origin and key unless one exists (the first instance wins);
    /// returns the stored row.
    public func create(origin: String, publicKey: [UInt8], sealedKey: [UInt8]) throws(StorageError) -> LogState {
        try pool.run { c in
            try c.execute("""
                INSERT INTO transparency_log (origin, public_key, sealed_key) VALUES (\(origin), \(publicKey), \(sealedKey))
                ON CONFLICT (singleton) DO NOTHING
                """)
            return try Self.state(try c.query("SELECT origin, public_key, sealed_key, size, signed_size FROM transparency_log")[0])
        }
    }

    /// Key for the writers' transaction-scoped advisory lock ("latchkey-tlog" as an int8).
    static let writerLock: Int64 = 0x6c6b_746c_6f67_0001

    /// One integration, in one transaction: the writers' lock is tried (another instance holding it
    /// → nil, nothing done); the log's row is locked and read with the right edge of its tree and up
    /// to `limit` receipts waiting, oldest first; `build` (no I/O: hashing and signing) makes the
    /// append, or nil when there is nothing to do; then the leaves, the nodes, the receipts' indices,
    /// the checkpoint and the new size are written and committed together. So an answered receipt
    /// (committed before this read) is in this checkpoint or a later one, and a crash before the
    /// commit leaves the previous tree and checkpoint as they were.
    public func integrate(limit: Int,
                          build: (LogState, [NodeHash], [Queued]) throws -> Append?) throws(StorageError) -> Append? {
        try pool.runTransaction { t in
            guard try t.query("SELECT pg_try_advisory_xact_lock(\(Self.writerLock)) AS locked")[0].bool("locked") else { return nil }
            guard let row = try t.query("SELECT origin, public_key, sealed_key, size, signed_size FROM transparency_log FOR UPDATE").first else {
                return nil
            }
            let state = try Self.state(row)
            // The right edge: for each set bit j of size, the node (j, (size >> j) - 1).
            let edge = try t.query("""
                SELECT n.level::int8 AS level, n.index, n.hash FROM transparency_log_nodes n
                JOIN generate_series(0, 62) AS j ON n.level = j AND (\(state.size) >> j) & 1 = 1 AND n.index = (\(state.size) >> j) - 1
                """).map { NodeHash(level: try $0.int("level"), index: try $0.int64("index"), hash: try $0.bytes("hash")) }
            let queued = try t.query("""
                SELECT id, commitment, created_at FROM step_up_receipts
                WHERE commitment IS NOT NULL AND log_index IS NULL ORDER BY created_at, id LIMIT \(Int64(limit))
                """).map { Queued(id: try $0.string("id"), commitment: try $0.bytes("commitment"), createdAt: try $0.date("created_at")) }
            guard let append = try build(state, edge, queued) else { return nil }
            let start = state.size
            let count = Int64(append.receipts.count)
            try t.execute("""
                INSERT INTO transparency_log_entries (index, commitment)
                SELECT \(start) + k - 1, substring(\(append.receipts.flatMap(\.commitment)) FROM (k - 1) * 32 + 1 FOR 32)
                FROM generate_series(1, \(count)::int) AS k
                """)
            try t.execute("""
                INSERT INTO transparency_log_nodes (level, index, hash)
                SELECT u.level, u.index, substring(\(append.nodes.flatMap(\.hash)) FROM (u.k::int - 1) * 32 + 1 FOR 32)
                FROM unnest(string_to_array(\(append.nodes.map { String($0.level) }.joined(separator: ",")), ',')::smallint[],
                            string_to_array(\(append.nodes.map { String($0.index) }.joined(separator: ",")), ',')::bigint[])
                     WITH ORDINALITY AS u(level, index, k)
                """)
            let updated = try t.execute("""
                UPDATE step_up_receipts r SET log_index = \(start) + u.k - 1
                FROM unnest(string_to_array(\(append.receipts.map(\.id).joined(separator: "\n")), chr(10))) WITH ORDINALITY AS u(id, k)
                WHERE r.id = u.id AND r.log_index IS NULL
                """)
            guard updated == append.receipts.count else { throw StorageError.unavailable("the receipts to log changed during the integration") }
            let size = start + count
            try t.execute("""
                INSERT INTO transparency_log_checkpoints (origin, size, root, note) VALUES (\(state.origin), \(size), \(append.root), \(append.note))
                """)
            try t.execute("""
                UPDATE transparency_log SET size = \(size), signed_size = GREATEST(signed_size, \(size))
                """)
            return append
        }
    }

    /// The newest checkpoint with its cosignature lines appended, and the log's identity.
    public struct Served: Sendable {
        public let origin: String
        public let publicKey: [UInt8]
        public let size: Int64
        /// The signed note with the cosignatures it holds; nil before the first checkpoint.
        public let checkpoint: String?
        public init(origin: String, publicKey: [UInt8], size: Int64, checkpoint: String?) {
            self.origin = origin; self.publicKey = publicKey; self.size = size; self.checkpoint = checkpoint
        }
    }

    /// The receipts an evidence pack holds: the ids of `userId`'s receipt documents written at or
    /// after `since` (all when nil), oldest first. Receipts stored before receipts were documents
    /// have none and are left out.
    public func documentedReceipts(userId: String, since: Date?) throws(StorageError) -> [String] {
        try pool.run { c in
            try c.query("""
                SELECT id FROM step_up_receipts
                WHERE user_id = \(userId) AND document IS NOT NULL AND (\(since)::timestamptz IS NULL OR created_at >= \(since)::timestamptz)
                ORDER BY created_at, id
                """).map { try $0.string("id") }
        }
    }

    /// Deletes up to `limit` receipts written more than `retention` seconds ago — only once the log
    /// holds their commitment (or they have none), so a late integration never loses one — and
    /// returns how many went. Their commitments stay in the log's leaves.
    public func purgeReceipts(olderThan retention: Int, limit: Int = 1000) throws(StorageError) -> Int {
        Int(try pool.run { c in
            try c.query("""
                WITH gone AS (
                    DELETE FROM step_up_receipts WHERE id IN (
                        SELECT id FROM step_up_receipts
                        WHERE created_at < now() - make_interval(secs => \(Int64(retention))) AND (commitment IS NULL OR log_index IS NOT NULL)
                        ORDER BY created_at LIMIT \(Int64(limit)))
                    RETURNING 1)
                SELECT count(*)::int8 AS n FROM gone
                """)[0].int64("n")
        })
    }

    public func newestCheckpoint() throws(StorageError) -> Served? {
        try pool.run { c in
            try c.query("""
                SELECT l.origin, l.public_key, l.size, cp.note || coalesce((SELECT string_agg(s.line, '' ORDER BY s.witness)
                       FROM transparency_log_cosignatures s WHERE s.origin = cp.origin AND s.size = cp.size), '') AS checkpoint
                FROM transparency_log l LEFT JOIN transparency_log_checkpoints cp ON cp.origin = l.origin AND cp.size = l.size
                """).first.map {
                Served(origin: try $0.string("origin"), publicKey: try $0.bytes("public_key"), size: try $0.int64("size"),
                       checkpoint: try $0.optionalString("checkpoint"))
            }
        }
    }

    /// The hashes of level `level` from `start`, up to `count`, in order (a tile's contents as far as
    /// the stored tree holds them).
    public func nodes(level: Int, start: Int64, count: Int) throws(StorageError) -> [[UInt8]] {
        try pool.run { c in
            try c.query("""
                SELECT hash FROM transparency_log_nodes WHERE level = \(Int64(level)) AND index >= \(start) AND index < \(start) + \(Int64(count))
                ORDER BY index
                """).map { try $0.bytes("hash") }
        }
    }

    /// The commitments from `start`, up to `count`, in order (an entry bundle).
    public func entries(start: Int64, count: Int) throws(StorageError) -> [[UInt8]] {
        try pool.run { c in
            try c.query("""
                SELECT commitment FROM transparency_log_entries WHERE index >= \(start) AND index < \(start) + \(Int64(count)) ORDER BY index
                """).map { try $0.bytes("commitment") }
        }
    }

    /// A receipt with what its tlog-proof needs, read in one query.
    public struct ReceiptWithProof: Sendable {
        /// Nil for a receipt stored before receipts were documents.
        public let document: [UInt8]?
        public let logIndex: Int64?
        /// The checkpoint the proof is against (signed note with its cosignature lines) and its size;
        /// nil until the receipt is integrated.
        public let checkpoint: (note: String, size: Int64)?
        /// Every node the inclusion proof of `logIndex` in a tree of that size can read.
        public let nodes: [NodeHash]
        public init(document: [UInt8]?, logIndex: Int64?, checkpoint: (note: String, size: Int64)?, nodes: [NodeHash]) {
            self.document = document; self.logIndex = logIndex; self.checkpoint = checkpoint; self.nodes = nodes
        }
    }

    /// The receipt `id` (of `userId` when given), its index, the newest checkpoint of the log's origin
    /// that holds it and has at least `minWitnesses` cosignatures (else the newest that holds it),
    /// and the nodes of its inclusion proof: the sibling at each level when complete, and the right
    /// edge of the tree (what the partial right subtrees are made of). Nil for no such receipt.
    public func receipt(id: String, userId: String?, minWitnesses: Int) throws(StorageError) -> ReceiptWithProof? {
        try pool.run { c in
            let rows = try c.query("""
                WITH r AS (
                    SELECT document, log_index FROM step_up_receipts
                    WHERE id = \(id) AND (\(userId)::text IS NULL OR user_id = \(userId))
                ), cp AS (
                    -- The newest checkpoint (the log's size), or with N > 0 the newest holding the receipt
                    -- and N cosignatures: read backwards along the cosignatures' key, stopping at the first.
                    SELECT c.size, c.note || coalesce(string_agg(s.line, '' ORDER BY s.witness), '') AS note
                    FROM r CROSS JOIN transparency_log l
                    JOIN transparency_log_checkpoints c ON c.origin = l.origin AND c.size = coalesce((
                        SELECT w.size FROM transparency_log_cosignatures w
                        WHERE \(Int64(minWitnesses)) > 0 AND w.origin = l.origin AND w.size <= l.size AND w.size > r.log_index
                        GROUP BY w.size HAVING count(*) >= \(Int64(minWitnesses)) ORDER BY w.size DESC LIMIT 1), l.size)
                    LEFT JOIN transparency_log_cosignatures s ON s.origin = c.origin AND s.size = c.size
                    WHERE r.log_index IS NOT NULL AND c.size > r.log_index
                    GROUP BY c.size, c.note
                ), wanted AS (
                    SELECT j AS level, ((r.log_index >> j) # 1) AS index FROM r, cp, generate_series(0, 62) AS j
                    WHERE (((r.log_index >> j) # 1) + 1) << j <= cp.size AND (((r.log_index >> j) # 1) + 1) << j > 0
                    UNION
                    SELECT j, (cp.size >> j) - 1 FROM cp, generate_series(0, 62) AS j WHERE (cp.size >> j) & 1 = 1
                )
                SELECT r.document, r.log_index, cp.size, cp.note, n.level::int8 AS level, n.index, n.hash
                FROM r LEFT JOIN cp ON true
                LEFT JOIN (wanted w JOIN transparency_log_nodes n ON n.level = w.level AND n.index = w.index) ON cp.size IS NOT NULL
                """)
            guard let first = rows.first else { return nil }
            var checkpoint: (String, Int64)?
            if let note = try first.optionalString("note") {
                checkpoint = (note, try first.int64("size"))
            }
            var nodes: [NodeHash] = []
            for row in rows where !(try row.isNull("hash")) {
                nodes.append(NodeHash(level: try row.int("level"), index: try row.int64("index"), hash: try row.bytes("hash")))
            }
            return ReceiptWithProof(document: try first.optionalBytes("document"), logIndex: try first.optionalInt64("log_index"),
                                    checkpoint: checkpoint, nodes: nodes)
        }
    }

    /// The nodes a consistency proof reads (`wanted`, computed by the caller), for a witness submission.
    public func nodes(_ wanted: [(level: Int, index: Int64)]) throws(StorageError) -> [NodeHash] {
        guard !wanted.isEmpty else { return [] }
        return try pool.run { c in
            try c.query("""
                SELECT n.level::int8 AS level, n.index, n.hash
                FROM unnest(string_to_array(\(wanted.map { String($0.level) }.joined(separator: ",")), ',')::smallint[],
                            string_to_array(\(wanted.map { String($0.index) }.joined(separator: ",")), ',')::bigint[]) AS w(level, index)
                JOIN transparency_log_nodes n ON n.level = w.level AND n.index = w.index
                """).map { NodeHash(level: try $0.int("level"), index: try $0.int64("index"), hash: try $0.bytes("hash")) }
        }
    }

    /// The size a witness last cosigned for `origin` (0 when none is recorded).
    public func witnessSize(origin: String, witness: String) throws(StorageError) -> Int64 {
        try pool.run { c in
            try c.query("SELECT size FROM transparency_log_witnesses WHERE origin = \(origin) AND witness = \(witness)").first?.int64("size") ?? 0
        }
    }

    /// Records a witness's cosignature lines on the checkpoint of `size` and its size, in one statement.
    public func recordCosignature(origin: String, size: Int64, witness: String, lines: String) throws(StorageError) {
        try pool.run { c in
            try c.execute("""
                WITH s AS (
                    INSERT INTO transparency_log_cosignatures (origin, size, witness, line) VALUES (\(origin), \(size), \(witness), \(lines))
                    ON CONFLICT (origin, size, witness) DO UPDATE SET line = EXCLUDED.line
                )
                INSERT INTO transparency_log_witnesses (origin, witness, size) VALUES (\(origin), \(witness), \(size))
                ON CONFLICT (origin, witness) DO UPDATE SET size = GREATEST(transparency_log_witnesses.size, EXCLUDED.size)
                """)
        }
    }

    /// Records the size a witness says it holds (its 409), so the next submission starts there.
    public func recordWitnessSize(origin: String, witness: String, size: Int64) throws(StorageError) {
        try pool.run { c in
            try c.execute("""
                INSERT INTO transparency_log_witnesses (origin, witness, size) VALUES (\(origin), \(witness), \(size))
                ON CONFLICT (origin, witness) DO UPDATE SET size = EXCLUDED.size
                """)
        }
    }

    /// `latchkey log reset`: a new log (origin, key) in one transaction, its tree empty; the old
    /// log's checkpoints stay, its leaves and nodes go, and every receipt with a commitment waits
    /// again (the new log appends them all). Returns the old origin, nil when there was no log.
    public func reset(origin: (String) -> String, publicKey: [UInt8], sealedKey: (String) throws -> [UInt8]) throws(StorageError) -> String? {
        try pool.runTransaction { t in
            guard let row = try t.query("SELECT origin FROM transparency_log FOR UPDATE").first else { return nil }
            let old = try row.string("origin")
            let new = origin(old)
            try t.execute("DELETE FROM transparency_log_entries")
            try t.execute("DELETE FROM transparency_log_nodes")
            try t.execute("UPDATE step_up_receipts SET log_index = NULL WHERE log_index IS NOT NULL")
            try t.execute("""
                UPDATE transparency_log SET origin = \(new), public_key = \(publicKey), sealed_key = \(try sealedKey(new)),
                    size = 0, signed_size = 0, created_at = now()
                """)
            return old
        }
    }

    /// Replaces the log key's envelope (a KEK rotation) when it still is `from`; false otherwise.
    @discardableResult
    public func reseal(from: [UInt8], to: [UInt8]) throws(StorageError) -> Bool {
        try pool.run { c in
            try c.execute("UPDATE transparency_log SET sealed_key = \(to) WHERE sealed_key = \(from)") == 1
        }
    }
}
