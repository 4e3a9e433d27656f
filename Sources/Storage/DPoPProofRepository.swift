import PostgreSQL

/// A DPoP proof's `jti` under its key, as the request's one write records it (migration 30):
/// SHA-256(jkt ‖ "." ‖ jti), `DPoPProof.replayKey`.
public struct DPoPReplayKey: Sendable, Hashable {
    public let bytes: [UInt8]
    public init(_ bytes: [UInt8]) { self.bytes = bytes }
}

/// The proofs seen (RFC 9449 §11.1), kept `DPoPProofRepository.retention`: on every instance a proof
/// is accepted once.
public struct DPoPProofRepository: Sendable {
    /// Seconds a `jti` is kept: the span of `iat` values a proof may carry (60 s either side); the
    /// statements say it as `interval '120 seconds'`.
    public static let retention = 120
    let pool: PostgresPool

    init(pool: PostgresPool) { self.pool = pool }

    /// The proof recorded, as a CTE of a request's one statement: it returns a row only when the
    /// proof is new (or its earlier record has expired), so the statement's other parts run
    /// `WHERE EXISTS` it and a replay changes nothing. Of two concurrent requests with one proof,
    /// the second waits for the first's commit and gets no row.
    public static func recording(_ key: DPoPReplayKey) -> SQL {
        """
        INSERT INTO dpop_proofs (key, expires_at) VALUES (\(key.bytes), now() + interval '120 seconds')
        ON CONFLICT (key) DO UPDATE SET expires_at = EXCLUDED.expires_at WHERE dpop_proofs.expires_at <= now()
        RETURNING key
        """
    }

    /// The `dpop` CTE a statement that starts or refreshes a session opens with when a proof came
    /// (none without one): one row when the proof is new, none for a replay.
    static func cte(_ binding: DPoPBinding?) -> [(name: String, sql: SQL)] {
        binding.map { [(gate, recording($0.replay))] } ?? []
    }

    /// The name of that CTE, for a statement whose writes wait on it.
    static let gate = "dpop"

    /// A read-only route's one write: the proof recorded, false when it was seen before (a replay).
    public func record(_ key: DPoPReplayKey) throws(StorageError) -> Bool {
        try pool.run { c in try !c.query(Self.recording(key)).isEmpty }
    }

    /// Drops the records that have expired (any instance may run this now and then).
    public func purgeExpired() throws(StorageError) {
        try pool.run { c in try c.execute("DELETE FROM dpop_proofs WHERE expires_at <= now()") }
    }
}
