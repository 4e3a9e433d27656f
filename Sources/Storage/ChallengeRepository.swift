import PostgreSQL

/// The ceremony a challenge row belongs to (column `purpose`).
public enum CeremonyKind: String, Sendable, CaseIterable {
    case registration
    case authentication
    case deviceKeyEnrolment = "device-key"
    case stepUp = "step-up"
}

/// A challenge as consumed: what it was issued for, and the ceremony state stored with it.
public struct StoredChallenge: Sendable, Equatable {
    public let kind: CeremonyKind
    public let userId: String?
    public let rpId: String
    /// The ceremony state exactly as inserted (the core's encoding; storage does not read it).
    public let state: [UInt8]
    public let expired: Bool

    public init(kind: CeremonyKind, userId: String?, rpId: String, state: [UInt8], expired: Bool) {
        self.kind = kind
        self.userId = userId
        self.rpId = rpId
        self.state = state
        self.expired = expired
    }
}

/// Challenges of the ceremonies whose state is stored (device-key enrolment, step-up) are stored by
/// SHA-256 and consumed with one `DELETE … RETURNING`; a sign-in's and a registration's are sealed
/// into the challenge itself (`LoginRepository`, `AccountRepository.finishRegistration`). The
/// `ticket_hash` column is no longer written (a registration's ticket travels sealed).
public final class ChallengeRepository: Sendable {
    /// The asynchronous-commit pool (see `Database.challengePool`).
    let pool: PostgresPool
    /// The durable pool, for housekeeping.
    let maintenance: PostgresPool

    init(pool: PostgresPool, maintenance: PostgresPool) {
        self.pool = pool
        self.maintenance = maintenance
    }

    public func insert(hash: [UInt8], kind: CeremonyKind, userId: String?, rpId: String, state: [UInt8], ttlSeconds: Int) throws(StorageError) {
        try pool.run { c in
            try c.execute("""
                INSERT INTO challenges (hash, purpose, user_id, rp_id, state, expires_at)
                VALUES (\(hash), \(kind.rawValue), \(userId), \(rpId), \(state), now() + make_interval(secs => \(ttlSeconds)))
                """)
        }
    }

    /// Consumes a challenge atomically: of N concurrent callers exactly one gets the row. With
    /// `kind`/`userId`, only a challenge issued for that ceremony and user is touched (a stranger
    /// cannot burn someone else's step-up challenge).
    public func consume(hash: [UInt8], kind: CeremonyKind? = nil, userId: String? = nil) throws(StorageError) -> StoredChallenge? {
        try pool.run { c in
            try c.query("""
                DELETE FROM challenges
                WHERE hash = \(hash) AND (\(kind?.rawValue)::text IS NULL OR purpose = \(kind?.rawValue))
                  AND (\(userId)::text IS NULL OR user_id = \(userId))
                RETURNING \(unsafeRaw: ChallengeRepository.columns)
                """).first.map(ChallengeRepository.challenge)
        }
    }

    /// The challenge of `kind` and `userId` as a verify's read finds it (nothing used up: the
    /// verify's one write does that, `use`); nil when unknown, used, another user's or ceremony's.
    public func find(hash: [UInt8], kind: CeremonyKind, userId: String) throws(StorageError) -> StoredChallenge? {
        try pool.run { c in
            try c.query("""
                SELECT \(unsafeRaw: ChallengeRepository.columns) FROM challenges
                WHERE hash = \(hash) AND purpose = \(kind.rawValue) AND user_id = \(userId)
                """).first.map(ChallengeRepository.challenge)
        }
    }

    /// The challenge used up, as a CTE of a verify's one statement (`DELETE … RETURNING`): of
    /// concurrent verifies exactly one gets the row, the others wait for its commit and find none.
    static func use(hash: [UInt8], kind: CeremonyKind, userId: String) -> SQL {
        "DELETE FROM challenges WHERE hash = \(hash) AND purpose = \(kind.rawValue) AND user_id = \(userId) RETURNING hash"
    }

    /// Drops challenges that expired over an hour ago, and the used ids of sealed challenges that
    /// expired over a minute ago (any instance may run this now and then). A verify records an id
    /// only while its challenge is live (`LoginRepository.used`), so an id the sweep took can never
    /// be recorded again: the minute covers a verify statement still running when it expired.
    public func purgeExpired() throws(StorageError) {
        try maintenance.run { c in
            try c.execute("DELETE FROM challenges WHERE expires_at < now() - interval '1 hour'")
            try c.execute("DELETE FROM used_challenges WHERE expires_at < now() - interval '1 minute'")
        }
    }

    /// `bound_user`: the user the challenge was issued for (a registration's, a step-up's).
    static let columns = "purpose, user_id AS bound_user, rp_id, state, expires_at <= now() AS expired"

    static func challenge(_ r: Row) throws -> StoredChallenge {
        let purpose = try r.string("purpose")
        guard let kind = CeremonyKind(rawValue: purpose) else {
            throw ColumnDecodeError(column: "purpose", reason: "unknown ceremony \(purpose)")
        }
        return StoredChallenge(kind: kind, userId: try r.optionalString("bound_user"), rpId: try r.string("rp_id"),
                               state: try r.bytes("state"), expired: try r.bool("expired"))
    }
}

