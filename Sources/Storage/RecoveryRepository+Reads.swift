import Foundation
import PostgreSQL

/// What the account's recovery settings show (`GET /v1/account/recovery`), read in one query.
public struct RecoveryAccountState: Sendable, Equatable {
    /// The verified address, if any.
    public let email: String?
    public let recoveryCodesLeft: Int
    /// Pending, unexpired recoveries, newest first.
    public let pending: [RecoveryRecord]

    public init(email: String?, recoveryCodesLeft: Int, pending: [RecoveryRecord]) {
        self.email = email
        self.recoveryCodesLeft = recoveryCodesLeft
        self.pending = pending
    }
}

extension RecoveryRepository {
    /// The account `id` (an email sign-in's answer names it).
    public func user(id: String) throws(StorageError) -> UserRecord? {
        try pool.run { c in
            try c.query("SELECT \(unsafeRaw: AccountRepository.userColumns) FROM users WHERE id = \(id)").first.map(AccountRepository.user)
        }
    }

    /// The verified address, the unused recovery codes and the pending recoveries of `userId`, in one read.
    public func accountState(userId: String) throws(StorageError) -> RecoveryAccountState {
        try pool.run { c in
            let rows = try c.query("""
                SELECT s.email, s.codes_left, r.id, r.user_id, r.method, r.not_before, r.expires_at, r.status
                FROM (SELECT (SELECT email FROM account_emails WHERE user_id = \(userId)) AS email,
                             (SELECT count(*)::int FROM recovery_codes WHERE user_id = \(userId) AND used_at IS NULL) AS codes_left) s
                LEFT JOIN recoveries r ON r.user_id = \(userId) AND r.status = 'pending' AND r.expires_at > now()
                ORDER BY r.created_at DESC
                """)
            let pending = try rows.filter { !(try $0.isNull("id")) }.map(RecoveryRepository.recovery)
            return RecoveryAccountState(email: try rows[0].optionalString("email"), recoveryCodesLeft: try rows[0].int("codes_left"),
                                        pending: pending)
        }
    }
}
