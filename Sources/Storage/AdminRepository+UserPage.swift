import Foundation
import PostgreSQL

/// One account as the admin console's user page shows it: the account, its live passkeys and
/// device keys (oldest first) and its live sessions (newest first).
public struct AdminUserPage: Sendable {
    public let summary: UserSummary
    public let passkeys: [CredentialRecord]
    public let deviceKeys: [DeviceKeyRecord]
    public let sessions: [SessionRecord]

    public init(summary: UserSummary, passkeys: [CredentialRecord], deviceKeys: [DeviceKeyRecord], sessions: [SessionRecord]) {
        self.summary = summary
        self.passkeys = passkeys
        self.deviceKeys = deviceKeys
        self.sessions = sessions
    }
}

extension AdminRepository {
    /// `GET /admin/v1/users/{id}` in one round trip: the account and what the page lists of it,
    /// four statements in one pipeline (one implicit transaction). Nil when there is no such account.
    public func userPage(id: String) throws(StorageError) -> AdminUserPage? {
        try pool.run { c in
            let rows = try c.pipeline([
                AdminRepository.summaries(where: "u.id = \(id)"),
                """
                SELECT \(unsafeRaw: AccountRepository.credentialColumns) FROM credentials
                WHERE user_id = \(id) AND revoked_at IS NULL ORDER BY created_at
                """,
                """
                SELECT \(unsafeRaw: DeviceKeyRepository.columns) FROM device_keys
                WHERE user_id = \(id) AND revoked_at IS NULL ORDER BY created_at
                """,
                SessionRepository.live(userId: id),
            ])
            guard let summary = try rows[0].first.map(AdminRepository.summary) else { return nil }
            return AdminUserPage(summary: summary, passkeys: try rows[1].map(AccountRepository.credential),
                                 deviceKeys: try rows[2].map(DeviceKeyRepository.deviceKey), sessions: try rows[3].map(SessionRepository.record))
        }
    }

    /// The admin API's caller in one round trip: whether the user has the admin role, and the
    /// session its token names as `SessionRepository.session(id:userId:)` reads it (nil: revoked).
    public func adminSession(userId: String, sessionId: String) throws(StorageError)
        -> (isAdmin: Bool, session: (record: SessionRecord, passkeyApprovesFrom: Date?, passkeyHardware: Bool)?) {
        try pool.run { c in
            let rows = try c.pipeline(["SELECT 1 AS one FROM admins WHERE user_id = \(userId)",
                                       SessionRepository.standing(id: sessionId, userId: userId)])
            return (!rows[0].isEmpty, try rows[1].first.map(SessionRepository.standing))
        }
    }

    /// The console's user rows (`UserSummary`) matching `condition` on `users u`.
    static func summaries(where condition: SQL) -> SQL {
        """
        SELECT u.id, u.user_handle, u.username, u.display_name, u.external_id, u.created_at,
               EXISTS (SELECT 1 FROM admins a WHERE a.user_id = u.id) AS is_admin
        FROM users u WHERE \(fragment: condition)
        """
    }
}
