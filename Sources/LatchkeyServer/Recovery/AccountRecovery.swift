import Storage

/// What passkey registration needs of the recovery feature, passed in at construction (ARCHITECTURE.md:
/// a service that needs another's work gets it through a small protocol): the account's verified
/// address (where notices go), and what completing a recovery writes inside the registration's
/// statement (SPEC "Recovery": every other session and every device key revoked).
protocol AccountRecovery: Sendable {
    func verifiedAddress(userId: String) throws(ServiceError) -> EmailAddress?
    /// Recovery `recoveryId` of `userId`, still pending, as the registration completes it; 401 otherwise.
    func completion(recoveryId: String, userId: String) throws(ServiceError) -> RecoveryCompletion
}

extension RecoveryService: AccountRecovery {
    func verifiedAddress(userId: String) throws(ServiceError) -> EmailAddress? {
        try storage { () throws(StorageError) in try store.email(userId: userId) }.flatMap { EmailAddress($0) }
    }

    func completion(recoveryId: String, userId: String) throws(ServiceError) -> RecoveryCompletion {
        guard let r = try storage({ () throws(StorageError) in try store.recovery(id: recoveryId) }), r.userId == userId else {
            throw ServiceError(.unauthorized, "the recovery is no longer pending")
        }
        return Self.completion(r, events: events, revokePasskeys: policy.revokesPasskeys)
    }
}
