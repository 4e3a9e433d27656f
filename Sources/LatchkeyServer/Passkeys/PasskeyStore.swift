import Storage

/// A passkey registration's and the passkey list's storage (SPEC "Performance targets": options
/// write nothing, a verify is one read and one write): registration options' one read (a username,
/// or an existing account with its live passkeys and whether the step-up it brings can still be
/// redeemed), the verify's one read and its one statement, the list, the rename, and a revocation's
/// one read and one statement. `AccountRepository` in the server; an in-memory store in the service
/// tests. Every fact a read hands the decision that another request could change before the write
/// is checked again by the write: the challenge's single use, the ticket's and the step-up's (each
/// used only while unused, the step-up only while its key is live), the recovery (completed only
/// while pending and due), the username and credential id (unique), the last way in.
protocol PasskeyStore: Sendable {
    /// The account with this username; nil: none.
    func user(username: String) throws(StorageError) -> UserRecord?
    /// Registration options for an existing account: the user, its live passkeys (oldest first) and
    /// whether `redeeming` can still be redeemed. Nil: no such account.
    func registrationAccount(id: String, redeeming: StepUpRedemption?) throws(StorageError) -> RegistrationAccount?
    /// A registration verify's one read (`RegistrationRead`).
    func registrationRead(_ challenge: UsedChallenge, account: String?, username: String?, credentialId: [UInt8], digest: [UInt8],
                          recoveryId: String?) throws(StorageError) -> RegistrationRead
    /// A registration verify's one write: the challenge's id recorded used and, only with it, the
    /// registration (`.challengeUnusable` when another verify recorded it first; `.recoveryEnded`,
    /// `.ticketUsed`, `.stepUpUsed` when a gate no longer holds: the challenge's use alone is written).
    /// A username or credential id taken meanwhile: the challenge recorded used on its own, and
    /// `.conflict(.usernameTaken)` / `.conflict(.credentialExists)` thrown.
    func finishRegistration(_ challenge: UsedChallenge, _ write: RegistrationWrite) throws(StorageError) -> RegistrationWritten
    /// The account and its live passkeys, oldest first; nil when the account does not exist.
    func passkeys(userId: String) throws(StorageError) -> AccountPasskeys?
    /// Renames a live passkey of `userId` (with `renamedEvent` once) and returns it with the account
    /// and its live passkeys after the rename; nil when there is no such passkey.
    func rename(userId: String, credentialId: [UInt8], name: String,
                renamedEvent: EventTemplate?) throws(StorageError) -> (renamed: CredentialRecord, account: AccountPasskeys)?
    /// What revoking `credentialId` needs to know, in one read: the other ways in, the verified
    /// address and the account's mail language.
    func revocationRead(userId: String, credentialId: [UInt8]) throws(StorageError) -> PasskeyRevocationRead
    /// The revocation's one statement: the step-up redeemed (only with the revocation), the passkey
    /// revoked while another way in remains (`keeping`), the sessions it began ended, the audit line,
    /// the events and the mail. Nil: no such live passkey, nothing written; `.conflict(.lastWayIn)`,
    /// `.conflict(.stepUpUsed)`: refused, nothing written.
    func revokePasskey(userId: String, credentialId: [UInt8], audit: AuditRecord, redeeming: StepUpRedemption?, keeping: LastWayInRule?,
                       mail: [MailToSend], revokedEvent: EventTemplate?, sessionEvent: EventTemplate?) throws(StorageError) -> RevokedPasskey?
}

extension AccountRepository: PasskeyStore {}
