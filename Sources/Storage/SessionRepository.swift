import PostgreSQL

/// A new session = a refresh-token family with its first token.
public struct NewSession: Sendable, Equatable {
    public let familyId: String
    public let userId: String
    /// SHA-256 of the refresh token handed to the client.
    public let refreshHash: [UInt8]
    public let ttlSeconds: Int

    public init(familyId: String, userId: String, refreshHash: [UInt8], ttlSeconds: Int) {
        self.familyId = familyId
        self.userId = userId
        self.refreshHash = refreshHash
        self.ttlSeconds = ttlSeconds
    }
}

/// Refresh-token families (sessions) and their tokens, rotated with reuse detection.
public final class SessionRepository: Sendable {
    let pool: PostgresPool

    init(pool: PostgresPool) { self.pool = pool }

    /// The one way to create a session, in one statement (one durable commit). With `use`, the
    /// credential's use is recorded in that same statement, and the session exists only if the
    /// credential does (`.notFound` otherwise, nothing written): a login is `consumeForLogin`, then
    /// this — two round trips.
    public func start(_ session: NewSession, recording use: CredentialUse? = nil, audit: [AuditRecord] = []) throws(StorageError) {
        try pool.run { c in try SessionRepository.start(session, recording: use, audit: audit, on: c) }
    }

    /// `start` on `connection` (also inside `AccountRepository.register`'s transaction).
    static func start(_ session: NewSession, recording use: CredentialUse?, audit: [AuditRecord], on connection: PostgresConnection) throws {
        // The family's row source: the recorded credential when there is one, so a use and its
        // session are written together or not at all.
        let source: SQL = use == nil ? "" : " FROM cred"
        let ctes: [(name: String, sql: SQL)] =
            (use.map { [("cred", AccountRepository.recording($0))] } ?? [])
            + [("fam", "INSERT INTO refresh_families (id, user_id) SELECT \(session.familyId), \(session.userId)\(fragment: source) RETURNING id"),
               ("tok", """
                   INSERT INTO refresh_tokens (hash, family_id, expires_at)
                   SELECT \(session.refreshHash), fam.id, now() + make_interval(secs => \(session.ttlSeconds)) FROM fam RETURNING hash
                   """)]
            + AuditRepository.cte(audit, onlyIf: "tok")
        guard !(try connection.query(SQL.with(ctes, "SELECT hash FROM tok"))).isEmpty else { throw StorageError.notFound }
    }

    /// Rotates a refresh token: the presented one is used up and `newHash` joins its family. A
    /// token presented a second time revokes its whole family (RFC 9700 §4.14.2) and writes
    /// `onReuse(userId)` in the same transaction.
    public func rotate(hash: [UInt8], newHash: [UInt8], ttlSeconds: Int,
                       onReuse: (String) -> AuditRecord) throws(StorageError) -> RefreshOutcome {
        try pool.runTransaction { t in
            let used = try t.query("""
                UPDATE refresh_tokens r SET used_at = now() FROM refresh_families f
                WHERE r.hash = \(hash) AND r.used_at IS NULL AND r.expires_at > now() AND f.id = r.family_id AND f.revoked_at IS NULL
                RETURNING r.family_id, f.user_id
                """)
            if let row = used.first {
                let family = try row.string("family_id")
                try t.execute("""
                    INSERT INTO refresh_tokens (hash, family_id, expires_at)
                    VALUES (\(newHash), \(family), now() + make_interval(secs => \(ttlSeconds)))
                    """)
                return .rotated(userId: try row.string("user_id"), familyId: family)
            }
            let reused = try t.query("""
                UPDATE refresh_families SET revoked_at = now()
                WHERE id = (SELECT family_id FROM refresh_tokens WHERE hash = \(hash) AND used_at IS NOT NULL) AND revoked_at IS NULL
                RETURNING user_id
                """)
            if let row = reused.first {
                try AuditRepository.write([onReuse(try row.string("user_id"))], on: t)
                return .reused
            }
            return .invalid
        }
    }

    /// Revokes one family of the user (`familyId`), or all of them (nil).
    public func revoke(userId: String, familyId: String?) throws(StorageError) {
        try pool.run { c in
            if let familyId {
                try c.execute("UPDATE refresh_families SET revoked_at = now() WHERE id = \(familyId) AND user_id = \(userId) AND revoked_at IS NULL")
            } else {
                try c.execute("UPDATE refresh_families SET revoked_at = now() WHERE user_id = \(userId) AND revoked_at IS NULL")
            }
        }
    }
}
