import Storage

/// What passkey registration needs of the recovery feature, passed in at construction (ARCHITECTURE.md:
/// a service that needs another's work gets it through a small protocol): the account's verified
/// address (where notices go), and what completing a recovery writes inside the registration's
/// statement (SPEC "Recovery": every other session and every device key revoked).
protocol AccountRecovery: Sendable {
    func verifiedAddress(userId: String) throws(ServiceError) -> EmailAddress?
    /// What completing `recovery` (as the registration read it) writes in the registration's statement.
    func completion(of recovery: RecoveryRecord) -> RecoveryCompletion
}

extension RecoveryService: AccountRecovery {
    func verifiedAddress(userId: String) throws(ServiceError) -> EmailAddress? {
        try storage { () throws(StorageError) in try store.email(userId: userId) }.flatMap { EmailAddress($0) }
    }

    func completion(of recovery: RecoveryRecord) -> RecoveryCompletion {
        Self.completion(recovery, events: events, revokePasskeys: policy.revokesPasskeys)
    }
}
