import Foundation
import PostgreSQL

/// A step-up token a change redeems in its own transaction (SPEC "Admin console"): the receipt of
/// token `jti`, made by `userId` for exactly `actionHash`, not consumed yet. A change that does not
/// happen (404, validation) rolls back and leaves it unused; a used one rolls the change back.
public struct StepUpRedemption: Sendable, Equatable {
    public let jti: String
    public let userId: String
    public let actionHash: [UInt8]

    public init(jti: String, userId: String, actionHash: [UInt8]) {
        self.jti = jti
        self.userId = userId
        self.actionHash = actionHash
    }

    /// Marks the receipt consumed on `t` (inside the change's transaction); throws
    /// `.conflict(.stepUpUsed)` when there is no such unused receipt, so the caller's transaction rolls back.
    static func redeem(_ redemption: StepUpRedemption?, on t: PostgresConnection) throws {
        guard let r = redemption else { return }
        let used = try t.query("""
            UPDATE step_up_receipts SET consumed_at = now()
            WHERE token_jti = \(r.jti) AND user_id = \(r.userId) AND action_hash = \(r.actionHash) AND consumed_at IS NULL
            RETURNING id
            """)
        if used.isEmpty { throw StorageError.conflict(.stepUpUsed) }
    }
}

/// One admin: a user with the admin role.
public struct AdminRecord: Sendable, Equatable {
    public let user: UserRecord
    public let createdAt: Date
    public let createdBy: String
}

/// A user as the admin console finds it.
public struct UserSummary: Sendable, Equatable {
    public let user: UserRecord
    public let externalId: String?
    public let createdAt: Date
    public let isAdmin: Bool
}

/// The admin role (migration 10) and the admin console's user lookups.
public final class AdminRepository: Sendable {
    let pool: PostgresPool

    init(pool: PostgresPool) { self.pool = pool }

    public func isAdmin(userId: String) throws(StorageError) -> Bool {
        try pool.run { c in !(try c.query("SELECT 1 AS one FROM admins WHERE user_id = \(userId)")).isEmpty }
    }

    /// Oldest first.
    public func admins() throws(StorageError) -> [AdminRecord] {
        try pool.run { c in
            try c.query("""
                SELECT u.id, u.user_handle, u.username, u.display_name, a.created_at, a.created_by
                FROM admins a JOIN users u ON u.id = a.user_id ORDER BY a.created_at, u.username
                """).map { r in
                AdminRecord(user: try AccountRepository.user(r), createdAt: try r.date("created_at"), createdBy: try r.string("created_by"))
            }
        }
    }

    /// The user `candidate.username` names (created from `candidate` when there is none) gets the
    /// admin role, with `audit(user, granted now?)`, in one transaction. Returns the user and
    /// whether the role is new.
    public func grant(candidate: UserRecord, by actor: String,
                      audit: (UserRecord, Bool) -> AuditRecord) throws(StorageError) -> (UserRecord, granted: Bool) {
        try pool.runTransaction { t in
            try t.execute("""
                INSERT INTO users (id, user_handle, username, display_name)
                VALUES (\(candidate.id), \(candidate.userHandle), \(candidate.username), \(candidate.displayName))
                ON CONFLICT (username) DO NOTHING
                """)
            let user = try AccountRepository.user(try t.query("""
                SELECT \(unsafeRaw: AccountRepository.userColumns) FROM users WHERE username = \(candidate.username)
                """)[0])
            let granted = try t.execute("INSERT INTO admins (user_id, created_by) VALUES (\(user.id), \(actor)) ON CONFLICT DO NOTHING") > 0
            try AuditRepository.write([audit(user, granted)], on: t)
            return (user, granted)
        }
    }

    /// Takes the role away (the user stays); nil when `username` is no admin (nothing written).
    public func revoke(username: String, audit: (UserRecord) -> AuditRecord) throws(StorageError) -> UserRecord? {
        try pool.runTransaction { t in
            guard let row = try t.query("""
                DELETE FROM admins a USING users u WHERE a.user_id = u.id AND u.username = \(username)
                RETURNING u.id, u.user_handle, u.username, u.display_name
                """).first else { return nil }
            let user = try AccountRepository.user(row)
            try AuditRepository.write([audit(user)], on: t)
            return user
        }
    }

    /// Users whose username starts with `prefix` (the exact match first), at most `limit`.
    public func findUsers(usernamePrefix prefix: String, limit: Int) throws(StorageError) -> [UserSummary] {
        try pool.run { c in
            try c.query("""
                SELECT u.id, u.user_handle, u.username, u.display_name, u.external_id, u.created_at,
                       EXISTS (SELECT 1 FROM admins a WHERE a.user_id = u.id) AS is_admin
                FROM users u WHERE starts_with(u.username, \(prefix))
                ORDER BY (u.username = \(prefix)) DESC, u.username LIMIT \(limit)
                """).map(AdminRepository.summary)
        }
    }

    public func userSummary(id: String) throws(StorageError) -> UserSummary? {
        try pool.run { c in
            try c.query("""
                SELECT u.id, u.user_handle, u.username, u.display_name, u.external_id, u.created_at,
                       EXISTS (SELECT 1 FROM admins a WHERE a.user_id = u.id) AS is_admin
                FROM users u WHERE u.id = \(id)
                """).first.map(AdminRepository.summary)
        }
    }

    static func summary(_ r: Row) throws -> UserSummary {
        UserSummary(user: try AccountRepository.user(r), externalId: try r.optionalString("external_id"), createdAt: try r.date("created_at"),
                    isAdmin: try r.bool("is_admin"))
    }
}
