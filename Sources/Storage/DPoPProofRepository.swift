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

    /// The proof recorded on its own, false when it was seen before (a replay): a request whose
    /// route wrote nothing that could carry it (`carry`).
    public func record(_ key: DPoPReplayKey) throws(StorageError) -> Bool {
        try pool.run { c in try !c.query(Self.recording(key)).isEmpty }
    }

    /// Hands the proof to the request's one write (RFC 9449 §11.1, on every instance): the first
    /// statement of the request that writes and commits carries it as a CTE, a plain INSERT that
    /// fails that statement (nothing of it written) when the proof was seen before, even in a row
    /// past its expiry (a proof is valid 60 s around its `iat`; a `jti` twice is a replay anyway).
    /// False when no request is under way (then `record` it now).
    public func carry(_ key: DPoPReplayKey) -> Bool {
        PostgresDeadline.carry(cte: "dpop_carried", """
            INSERT INTO dpop_proofs (key, expires_at) VALUES (\(key.bytes), now() + interval '120 seconds') RETURNING key
            """, refusedBy: "dpop_proofs_pkey", alone: Self.recording(key))
    }

    /// After the route: whether the proof `carry` handed to the request was new — committed by the
    /// route's write, or, when the route wrote nothing that carried it, recorded now on its own;
    /// nil when the request handed none.
    public func settleCarried() throws(StorageError) -> Bool? {
        switch PostgresDeadline.settleRider() {
        case .alone(let statement): return try pool.run { c in try !c.query(statement).isEmpty }
        case .carried: return true
        case .refused: return false
        case .none: return nil
        }
    }

    /// Drops the records that have expired (any instance may run this now and then).
    public func purgeExpired() throws(StorageError) {
        try pool.run { c in try c.execute("DELETE FROM dpop_proofs WHERE expires_at <= now()") }
    }
}
