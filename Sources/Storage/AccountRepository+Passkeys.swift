import PostgreSQL

/// An account with its live passkeys, oldest first: what the passkey list and the Signal API's
/// lists answer from.
public struct AccountPasskeys: Sendable {
    public let user: UserRecord
    public let credentials: [CredentialRecord]

    public init(user: UserRecord, credentials: [CredentialRecord]) {
        self.user = user
        self.credentials = credentials
    }
}

extension AccountRepository {
    /// The account and its live passkeys in one read; nil when the account does not exist.
    public func passkeys(userId: String) throws(StorageError) -> AccountPasskeys? {
        try pool.run { c in
            try Self.accountPasskeys(c.query("""
                SELECT u.id AS account_id, u.user_handle, u.username, u.display_name, p.*
                FROM users u LEFT JOIN LATERAL (
                    SELECT \(unsafeRaw: AccountRepository.credentialColumns) FROM credentials
                    WHERE user_id = u.id AND revoked_at IS NULL
                ) p ON true
                WHERE u.id = \(userId)
                ORDER BY p.created_at
                """))
        }
    }

    /// Renames a live passkey of `userId` (with `renamedEvent` once) and returns it with the account
    /// and its live passkeys as they are after the rename — one statement; nil when there is no such passkey.
    public func rename(userId: String, credentialId: [UInt8], name: String,
                       renamedEvent: EventTemplate? = nil) throws(StorageError) -> (renamed: CredentialRecord, account: AccountPasskeys)? {
        let statement = SQL.with([("ren", """
            UPDATE credentials SET name = \(name) WHERE id = \(credentialId) AND user_id = \(userId) AND revoked_at IS NULL
            RETURNING \(unsafeRaw: AccountRepository.credentialColumns)
            """)] + OutboxRepository.ctes(renamedEvent.map { [AccountRepository.rows($0, from: "ren")] } ?? []),
            // The statement's snapshot predates its own UPDATE: the renamed row comes from `ren`.
            """
            SELECT u.id AS account_id, u.user_handle, u.username, u.display_name, p.*
            FROM users u JOIN LATERAL (
                SELECT \(unsafeRaw: AccountRepository.credentialColumns) FROM ren
                UNION ALL
                SELECT \(unsafeRaw: AccountRepository.credentialColumns) FROM credentials
                WHERE user_id = u.id AND revoked_at IS NULL AND id <> \(credentialId)
            ) p ON true
            WHERE u.id = \(userId) AND EXISTS (SELECT 1 FROM ren)
            ORDER BY p.created_at
            """)
        return try pool.run { c in
            guard let account = try Self.accountPasskeys(c.query(statement)),
                  let renamed = account.credentials.first(where: { $0.id == credentialId }) else { return nil }
            return (renamed, account)
        }
    }

    /// Rows of `account_id, user_handle, username, display_name` and the credential columns (null
    /// for an account without passkeys) → the account and its passkeys.
    static func accountPasskeys(_ rows: [Row]) throws -> AccountPasskeys? {
        guard let first = rows.first else { return nil }
        let user = UserRecord(id: try first.string("account_id"), userHandle: try first.bytes("user_handle"),
                              username: try first.string("username"), displayName: try first.string("display_name"))
        let credentials = try rows.filter { !(try $0.isNull("id")) }.map(AccountRepository.credential)
        return AccountPasskeys(user: user, credentials: credentials)
    }
}
