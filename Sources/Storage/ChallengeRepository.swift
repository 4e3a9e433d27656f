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
    /// The enrolment ticket (its hash) a registration's options request presented: the verify that
    /// stores the passkey uses it up (`AccountRepository.register`'s `redeemingTicket`).
    public var ticketHash: [UInt8]? = nil

    public init(kind: CeremonyKind, userId: String?, rpId: String, state: [UInt8], expired: Bool, ticketHash: [UInt8]? = nil) {
        self.kind = kind
        self.userId = userId
        self.rpId = rpId
        self.state = state
        self.expired = expired
        self.ticketHash = ticketHash
    }
}

/// Challenges of the ceremonies whose state is stored (registration, device-key enrolment, step-up)
/// are stored by SHA-256 and consumed with one `DELETE … RETURNING`; a sign-in's is sealed into the
/// challenge itself (`LoginRepository`).
public final class ChallengeRepository: Sendable {
    /// The asynchronous-commit pool (see `Database.challengePool`).
    let pool: PostgresPool
    /// The durable pool, for housekeeping.
    let maintenance: PostgresPool

    init(pool: PostgresPool, maintenance: PostgresPool) {
        self.pool = pool
        self.maintenance = maintenance
    }

    /// With `redeeming` (a step-up the ceremony needed: adding a passkey, SPEC "Assurance"), only
    /// together with that step-up's redemption, in one transaction. `ticketHash`: the enrolment
    /// ticket the options request presented, kept for the verify that uses it up.
    public func insert(hash: [UInt8], kind: CeremonyKind, userId: String?, rpId: String, state: [UInt8],
                       ttlSeconds: Int, redeeming: StepUpRedemption? = nil, ticketHash: [UInt8]? = nil) throws(StorageError) {
        let insert: SQL = """
            INSERT INTO challenges (hash, purpose, user_id, rp_id, state, expires_at, ticket_hash)
            VALUES (\(hash), \(kind.rawValue), \(userId), \(rpId), \(state), now() + make_interval(secs => \(ttlSeconds)),
                    \(ticketHash)::bytea)
            """
        guard let redeeming else {
            try pool.run { c in try c.execute(insert) }
            return
        }
        try pool.runTransaction { t in
            try StepUpRedemption.redeem(redeeming, on: t)
            try t.execute(insert)
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
                RETURNING \(unsafeRaw: ChallengeRepository.columns), ticket_hash
                """).first.map { r in
                var challenge = try ChallengeRepository.challenge(r)
                challenge.ticketHash = try r.isNull("ticket_hash") ? nil : try r.bytes("ticket_hash")
                return challenge
            }
        }
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

