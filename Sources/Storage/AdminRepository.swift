import Foundation
import PostgreSQL

/// A step-up token a change redeems in its own transaction (SPEC "Admin console"): the receipt of
/// token `jti`, made by `userId` for exactly `actionHash`, not consumed yet. A change that does not
/// happen (404, validation) rolls back and leaves it unused; a used one rolls the change back.
public struct StepUpRedemption: Sendable, Equatable {
    public let jti: String
    public let userId: String
    public let actionHash: [UInt8]
    /// An admin change under a quorum (SPEC "Quorum approvals" → "Admin quorum") redeems an approved
    /// approval instead of a step-up: `userId`'s approval `approvalId` for exactly `actionHash`.
    public let approvalId: String?

    public init(jti: String, userId: String, actionHash: [UInt8], approvalId: String? = nil) {
        self.jti = jti
        self.userId = userId
        self.actionHash = actionHash
        self.approvalId = approvalId
    }

    /// Marks the receipt consumed on `t` (inside the change's transaction); throws
    /// `.conflict(.stepUpUsed)` when there is no such unused receipt, or when the key that made it
    /// has been revoked since, so the caller's transaction rolls back.
    static func redeem(_ redemption: StepUpRedemption?, on t: PostgresConnection) throws {
        guard let r = redemption else { return }
        if try t.query(use(r)).isEmpty { throw StorageError.conflict(.stepUpUsed) }
    }

    /// The one statement that uses a receipt up: unused, the user's, for this action, and its key
    /// still live (`approverIsLive`); with `onlyIf`, only while that condition holds too. Every
    /// redemption — a gated change's, an enrolment's gate, a token's consumption — is this one.
    static func use(jti: String, userId: String, actionHash: [UInt8], onlyIf condition: SQL? = nil, returning: String = "id") -> SQL {
        let also: SQL = condition.map { " AND \(fragment: $0)" } ?? ""
        return """
            UPDATE step_up_receipts SET consumed_at = now()
            WHERE \(fragment: redeemable(jti: jti, userId: userId, actionHash: actionHash))\(fragment: also)
            RETURNING \(unsafeRaw: returning)
            """
    }

    static func use(_ r: StepUpRedemption, onlyIf condition: SQL? = nil) -> SQL {
        guard let approvalId = r.approvalId else { return use(jti: r.jti, userId: r.userId, actionHash: r.actionHash, onlyIf: condition) }
        // The approval used once, by the predicate `ApprovalRepository.consume` uses.
        let also: SQL = condition.map { " AND \(fragment: $0)" } ?? ""
        return """
            UPDATE approvals SET \(fragment: ApprovalRepository.used(at: "now()"))
            WHERE \(fragment: ApprovalRepository.usable(id: approvalId, requester: r.userId, actionHash: r.actionHash, at: "now()"))\(fragment: also)
            RETURNING id
            """
    }

    /// The receipt can still be used up (a predicate on `step_up_receipts`).
    static func redeemable(jti: String, userId: String, actionHash: [UInt8]) -> SQL {
        """
        token_jti = \(jti) AND user_id = \(userId) AND action_hash = \(actionHash) AND consumed_at IS NULL
          AND \(unsafeRaw: approverIsLive)
        """
    }

    /// `redeem` as a CTE `redeemed` of the change's own statement (one row when the receipt was
    /// unused, the user's, for this action and its key still live); the rest of the statement writes
    /// only `WHERE EXISTS (SELECT 1 FROM redeemed)`. Nothing when there is no redemption.
    /// With `onlyIf`, redeemed only when that CTE returned a row (a change with nothing to do spends nothing).
    static func cte(_ redemption: StepUpRedemption?, onlyIf cte: String? = nil) -> [(name: String, sql: SQL)] {
        guard let r = redemption else { return [] }
        return [("redeemed", use(r, onlyIf: cte.map { "EXISTS (SELECT 1 FROM \(unsafeRaw: $0))" }))]
    }

    /// ` WHERE EXISTS (SELECT 1 FROM redeemed)` after `cte(redemption)`, or nothing without one: what
    /// a change's own writes are conditioned on.
    static func gate(_ redemption: StepUpRedemption?, and condition: SQL? = nil) -> SQL {
        switch (redemption, condition) {
        case (nil, nil): ""
        case (nil, let c?): "\nWHERE \(fragment: c)"
        case (_?, nil): "\nWHERE EXISTS (SELECT 1 FROM redeemed)"
        case (_?, let c?): "\nWHERE EXISTS (SELECT 1 FROM redeemed) AND \(fragment: c)"
        }
    }

    /// Whether `cte(redemption)` redeemed (true without one), as a column of the final SELECT.
    static func held(_ redemption: StepUpRedemption?) -> SQL {
        redemption == nil ? "true" : "EXISTS (SELECT 1 FROM redeemed)"
    }

    /// SPEC "Rules that must hold": an approval is only as alive as the key that made it. A
    /// predicate on a `step_up_receipts` row, true while its device key or passkey is the user's
    /// and not revoked. Checked by the statement that redeems the receipt, so a revocation
    /// committed before it wins, with no read of its own.
    public static let approverIsLive = """
        CASE step_up_receipts.method
          WHEN 'device-key' THEN EXISTS (SELECT 1 FROM device_keys live_key WHERE live_key.id = step_up_receipts.key_id
                                         AND live_key.user_id = step_up_receipts.user_id AND live_key.revoked_at IS NULL)
          ELSE EXISTS (SELECT 1 FROM credentials live_key WHERE live_key.id = latchkey_from_base64url(step_up_receipts.key_id)
                       AND live_key.user_id = step_up_receipts.user_id AND live_key.revoked_at IS NULL)
        END
        """
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

/// An existing account as `latchkey admins grant` shows it: what the admin role would trust.
public struct AdminGrantCandidate: Sendable {
    public let user: UserRecord
    public let isAdmin: Bool
    /// Live (not revoked) passkeys and device keys, oldest first.
    public let passkeys: [CredentialRecord]
    public let deviceKeys: [DeviceKeyRecord]
    /// Recoveries still pending (not completed, cancelled or expired), newest first.
    public var pendingRecoveries: [RecoveryRecord] = []
    /// The ids of the passkeys still held (`approves_from` after the database's now).
    public var heldPasskeys: Set<[UInt8]> = []
}

public enum AdminGrantOutcome: Sendable, Equatable {
    case granted
    case alreadyAdmin
    case unknownUser
    /// A passkey or device key was added or revoked since the candidate was read: nothing granted.
    case changed
    /// A held passkey or a pending recovery, and the grant was not made despite them: nothing granted.
    case pending
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

    /// `latchkey admins add`: `user` is created and gets the admin role, with `audit`, in one
    /// transaction — only when its username is free. Nil (nothing written) when the username
    /// exists: an existing account becomes an admin only through `grant(existing:)`, which shows
    /// what it holds first (otherwise whoever registered the name first would be made admin).
    public func createAdmin(_ user: UserRecord, by actor: String, audit: AuditRecord) throws(StorageError) -> UserRecord? {
        try pool.runTransaction { t in
            guard !(try t.query("""
                INSERT INTO users (id, user_handle, username, display_name)
                VALUES (\(user.id), \(user.userHandle), \(user.username), \(user.displayName))
                ON CONFLICT (username) DO NOTHING
                RETURNING id
                """)).isEmpty else { return nil }
            try t.execute("INSERT INTO admins (user_id, created_by) VALUES (\(user.id), \(actor))")
            try AuditRepository.write([audit], on: t)
            return user
        }
    }

    /// The account `username` names as `latchkey admins grant` shows it before granting: its live
    /// passkeys and device keys (oldest first) and whether it is an admin already. Nil when unknown.
    public func grantCandidate(username: String) throws(StorageError) -> AdminGrantCandidate? {
        try pool.runTransaction { t in
            guard let row = try t.query("""
                SELECT \(unsafeRaw: AccountRepository.userColumns), EXISTS (SELECT 1 FROM admins a WHERE a.user_id = users.id) AS is_admin
                FROM users WHERE username = \(username)
                """).first else { return nil }
            let user = try AccountRepository.user(row)
            var candidate = AdminGrantCandidate(user: user, isAdmin: try row.bool("is_admin"),
                                                passkeys: try Self.passkeys(userId: user.id, on: t), deviceKeys: try Self.deviceKeys(userId: user.id, on: t))
            candidate.pendingRecoveries = try Self.pendingRecoveries(userId: user.id, on: t)
            candidate.heldPasskeys = try Self.heldPasskeys(userId: user.id, on: t)
            return candidate
        }
    }

    /// `latchkey admins grant`: the role for `shown.user`, with `audit`, in one transaction — only
    /// while the account holds exactly the passkeys and device keys that were shown (the user row
    /// is locked first, so none can be added until the grant commits). Unless `despitePending`, a
    /// held passkey or a pending recovery refuses it (`.pending`, SPEC "Assurance": Admins). Nothing
    /// is written unless the outcome is `.granted`.
    public func grant(existing shown: AdminGrantCandidate, by actor: String, audit: AuditRecord,
                      despitePending: Bool = false) throws(StorageError) -> AdminGrantOutcome {
        try pool.runTransaction { t in
            // FOR UPDATE conflicts with the FOR KEY SHARE lock a new credential's or device key's
            // foreign key takes on its user: additions wait for this transaction.
            guard !(try t.query("SELECT id FROM users WHERE id = \(shown.user.id) FOR UPDATE")).isEmpty else { return .unknownUser }
            let passkeys = try Self.passkeys(userId: shown.user.id, on: t).map(\.id)
            let deviceKeys = try Self.deviceKeys(userId: shown.user.id, on: t).map(\.id)
            guard Set(passkeys) == Set(shown.passkeys.map(\.id)), Set(deviceKeys) == Set(shown.deviceKeys.map(\.id)) else {
                return .changed
            }
            if !despitePending {
                guard try Self.heldPasskeys(userId: shown.user.id, on: t).isEmpty,
                      try Self.pendingRecoveries(userId: shown.user.id, on: t).isEmpty else { return .pending }
            }
            guard try t.execute("""
                INSERT INTO admins (user_id, created_by) VALUES (\(shown.user.id), \(actor)) ON CONFLICT DO NOTHING
                """) > 0 else { return .alreadyAdmin }
            try AuditRepository.write([audit], on: t)
            return .granted
        }
    }

    private static func passkeys(userId: String, on t: PostgresConnection) throws -> [CredentialRecord] {
        try t.query("""
            SELECT \(unsafeRaw: AccountRepository.credentialColumns) FROM credentials
            WHERE user_id = \(userId) AND revoked_at IS NULL ORDER BY created_at, id
            """).map(AccountRepository.credential)
    }

    private static func pendingRecoveries(userId: String, on t: PostgresConnection) throws -> [RecoveryRecord] {
        try t.query("""
            SELECT \(unsafeRaw: RecoveryRepository.columns) FROM recoveries
            WHERE user_id = \(userId) AND status = 'pending' AND expires_at > now() ORDER BY created_at DESC
            """).map(RecoveryRepository.recovery)
    }

    private static func heldPasskeys(userId: String, on t: PostgresConnection) throws -> Set<[UInt8]> {
        Set(try t.query("""
            SELECT id FROM credentials WHERE user_id = \(userId) AND revoked_at IS NULL AND approves_from > now()
            """).map { try $0.bytes("id") })
    }

    private static func deviceKeys(userId: String, on t: PostgresConnection) throws -> [DeviceKeyRecord] {
        try t.query("""
            SELECT \(unsafeRaw: DeviceKeyRepository.columns) FROM device_keys
            WHERE user_id = \(userId) AND revoked_at IS NULL ORDER BY created_at, id
            """).map(DeviceKeyRepository.deviceKey)
    }

    /// Takes the role away (the user stays), with `audit` about that user, in one statement; nil
    /// when `username` is no admin (nothing written).
    public func revoke(username: String, audit: AuditTemplate) throws(StorageError) -> UserRecord? {
        let statement = SQL.with([("rm", """
            DELETE FROM admins a USING users u WHERE a.user_id = u.id AND u.username = \(username)
            RETURNING u.id, u.user_handle, u.username, u.display_name
            """)] + AuditRepository.cte([audit.rows(from: "rm", subject: "rm.id")]),
            "SELECT \(unsafeRaw: AccountRepository.userColumns) FROM rm")
        return try pool.run { c in try c.query(statement).first.map(AccountRepository.user) }
    }

    /// Users whose username starts with `prefix` (the exact match first), at most `limit`.
    public func findUsers(usernamePrefix prefix: String, limit: Int) throws(StorageError) -> [UserSummary] {
        try pool.run { c in try c.query(AdminRepository.findingUsers(prefix, limit: limit)).map(AdminRepository.summary) }
    }

    /// `findUsers`' statement (the admin API's caller resolution pipelines it too).
    static func findingUsers(_ prefix: String, limit: Int) -> SQL {
        """
        \(fragment: AdminRepository.summaries(where: "starts_with(u.username, \(prefix))"))
        ORDER BY (u.username = \(prefix)) DESC, u.username LIMIT \(limit)
        """
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
