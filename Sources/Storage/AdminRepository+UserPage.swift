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
        try pool.run { c in try AdminRepository.userPage(try c.pipeline(AdminRepository.readingUserPage(id))[...]) }
    }

    /// The user page's four statements, for one pipeline.
    static func readingUserPage(_ id: String) -> [SQL] {
        [
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
        ]
    }

    /// The page from what `readingUserPage`'s statements returned, in order.
    static func userPage(_ rows: ArraySlice<[Row]>) throws -> AdminUserPage? {
        let rows = Array(rows)
        guard let summary = try rows[0].first.map(AdminRepository.summary) else { return nil }
        return AdminUserPage(summary: summary, passkeys: try rows[1].map(AccountRepository.credential),
                             deviceKeys: try rows[2].map(DeviceKeyRepository.deviceKey), sessions: try rows[3].map(SessionRepository.record))
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
