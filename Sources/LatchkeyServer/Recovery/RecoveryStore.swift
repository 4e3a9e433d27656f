import Foundation
import Storage

/// What the recovery feature reads and writes (ARCHITECTURE.md "Which store each feature uses"):
/// `RecoveryRepository` in PostgreSQL, an in-memory store in the service tests. Each change is one
/// call that writes all of it (mail, audit lines, events, a step-up's redemption); limits, single
/// use, attempts and lifetimes are the store's to keep atomically (the database's clock decides
/// expiries, ARCHITECTURE.md "Where time and randomness come from" rule 3).
protocol RecoveryStore: Sendable {
    // MARK: Limits

    /// Counts `delta` uses of `key` in its fixed window of `windowSeconds` (from its first use):
    /// the count including these and the seconds left in the window.
    func bump(key: [UInt8], windowSeconds: Int, by delta: Int) throws(StorageError) -> (count: Int, retryAfter: Int)
    /// Takes back one counted use (never below zero).
    func unbump(key: [UInt8]) throws(StorageError)

    // MARK: Accounts and addresses

    /// The account's verified address.
    func email(userId: String) throws(StorageError) -> String?
    /// The account `id`.
    func user(id: String) throws(StorageError) -> UserRecord?
    /// The settings page's view: address, recovery codes left, pending recoveries, in one read.
    func accountState(userId: String) throws(StorageError) -> RecoveryAccountState
    /// Stores `email` as the account's verified address while its address is still `previous`,
    /// using up the sign-in and recovery codes mailed to a replaced one; `.conflict` when another
    /// account has verified `email`.
    func setVerifiedEmail(userId: String, email: String, previous: String?, notice: [MailToSend], audit: AuditRecord,
                          events: [OutboxEvent]) throws(StorageError) -> VerifiedEmailOutcome

    // MARK: One-time codes

    /// The one read of an email sign-in's or a recovery's start: who `lookup` names, with the
    /// verified address and mail language (all nil for nobody).
    func recipient(_ lookup: CodeRecipientLookup) throws(StorageError) -> CodeRecipient
    /// The one write of that start: both limits, the challenge, and its mail only when one may go;
    /// the same work whether or not anyone was found.
    func startChallenge(_ start: CodeChallengeStart) throws(StorageError) -> CodeChallengeStarted

    /// Stores a challenge with its mail, audit lines and events (and `redeeming`'s redemption); its expiry.
    /// `language`: the account's language memo, written with it (nil: unchanged).
    func insert(_ challenge: NewCodeChallenge, mail: [MailToSend], audit: [AuditRecord], events: [OutboxEvent],
                redeeming: StepUpRedemption?, language: String?) throws(StorageError) -> Date
    /// One submission of a code: the attempt counted, the challenge used up when `presentedHash` is
    /// its code's, `rejected` written once when it is not — all or nothing.
    func tryCode(id: String, purpose: NewCodeChallenge.Purpose, presentedHash: [UInt8], rejected: AuditTemplate) throws(StorageError) -> CodeTry

    // MARK: Recovery codes

    /// Replaces the account's recovery codes, with the audit line and the step-up's redemption.
    func replaceRecoveryCodes(userId: String, hashes: [[UInt8]], audit: AuditRecord, redeeming: StepUpRedemption) throws(StorageError)
    /// Uses one unused recovery code of the account; false when it is not one.
    func useRecoveryCode(userId: String, hash: [UInt8]) throws(StorageError) -> Bool

    // MARK: Recoveries

    /// Starts a recovery with its mail, audit line, events and cancel link.
    func start(_ r: NewRecovery, mail: [MailToSend], audit: AuditRecord, events: [OutboxEvent],
               cancelTokenHash: [UInt8]?) throws(StorageError) -> RecoveryRecord
    /// The recovery a token belongs to, whatever its state, with the store's clock.
    func recovery(tokenHash: [UInt8]) throws(StorageError) -> (RecoveryRecord, now: Date)?
    func recovery(id: String) throws(StorageError) -> RecoveryRecord?
    /// Cancels a pending recovery of `userId` with `audit` and `events`; false when there is none.
    func cancel(id: String, userId: String, audit: AuditRecord, events: [OutboxEvent]) throws(StorageError) -> Bool
    /// Uses a cancel link and undoes what it names (a pending recovery, or a held passkey and the
    /// sessions it began); nil and nothing written when there is nothing to undo.
    func useCancelToken(hash: [UInt8], now: Date, records: CancelLinkRecords) throws(StorageError) -> CancelTarget?

    /// An audit line on its own (a refused code).
    func appendAudit(_ record: AuditRecord) throws(StorageError)
}

extension RecoveryRepository: RecoveryStore {}

/// What the recovery feature needs of mail: a message composed in the account's language, and
/// where a cancel link points. `MailService` in the server.
protocol MailComposer: Sendable {
    func compose(_ event: MailMessage.Event, to: EmailAddress, userId: String,
                 _ render: (MailCatalog) -> (subject: String, text: String)) -> MailToSend
    /// The same in `language` (read with the rest of what the change needs; nil: English).
    func compose(_ event: MailMessage.Event, to: EmailAddress, userId: String, language: String?,
                 _ render: (MailCatalog) -> (subject: String, text: String)) -> MailToSend
    func cancelLink(_ token: String) -> String
}

extension MailService: MailComposer {}
