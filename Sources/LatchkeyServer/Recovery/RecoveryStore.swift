import Foundation
import Storage

/// What the recovery feature reads and writes (ARCHITECTURE.md "Which store each feature uses"):
/// `RecoveryRepository` in PostgreSQL, an in-memory store in the service tests. Each change is one
/// call that writes all of it (mail, audit lines, events, a step-up's redemption); limits, single
/// use, attempts and lifetimes are the store's to keep atomically (the database's clock decides
/// expiries, ARCHITECTURE.md "Where time and randomness come from" rule 3).
protocol RecoveryStore: Sendable {
    // MARK: Accounts and addresses

    /// The account's verified address.
    func email(userId: String) throws(StorageError) -> String?
    /// The settings page's view: address, recovery codes left, pending recoveries, in one read.
    func accountState(userId: String) throws(StorageError) -> RecoveryAccountState

    // MARK: One-time codes

    /// The one read of an email sign-in's or a recovery's start: who `lookup` names, with the
    /// verified address and mail language (all nil for nobody).
    func recipient(_ lookup: CodeRecipientLookup) throws(StorageError) -> CodeRecipient
    /// The one write of that start: both limits, the challenge, and its mail only when one may go;
    /// the same work whether or not anyone was found.
    func startChallenge(_ start: CodeChallengeStart) throws(StorageError) -> CodeChallengeStarted

    /// What an address change's guard reads: whether the account has a live passkey, and its mail language.
    func addressChange(userId: String) throws(StorageError) -> AddressChangeAccount
    /// Stores a challenge with its mail, audit lines and events (and `redeeming`'s redemption), only
    /// within `limit` (counted first; past it `.limited`, nothing else written); its expiry.
    /// `language`: the account's language memo, written with it (nil: unchanged).
    func insert(_ challenge: NewCodeChallenge, mail: [MailToSend], audit: [AuditRecord], events: [OutboxEvent],
                redeeming: StepUpRedemption?, language: String?, limit: CodeStartLimit?) throws(StorageError) -> CodeChallengeStarted

    /// The one read of a code's verify: the live challenge (unused, unexpired, attempts left) of
    /// that purpose and id, with its account, that account's verified address and mail language.
    func codeChallenge(id: String, purpose: NewCodeChallenge.Purpose) throws(StorageError) -> CodeChallengeRead?
    /// Each verify's one write tries the code first: the attempt counted, the challenge used up
    /// when the hash is its code's, the rejection's audit line written once when it is not; what a
    /// right code does is written only then — all or nothing.
    ///
    /// An address verification: only while the account's address is still `previous` (else
    /// `.previousChanged`, nothing written); a right code stores the challenge's address, uses up
    /// the sign-in and recovery codes mailed to a replaced one, and writes `notice`, `audit` and
    /// `events`. `.conflict`, nothing written, when another account has verified the address.
    func verifyAddress(_ code: CodeSubmission, previous: String?, notice: [MailToSend], audit: AuditRecord,
                       events: [OutboxEvent]) throws(StorageError) -> AddressVerification
    /// An email sign-in: a right code starts `session` with `audit` and the language memo.
    func signIn(_ code: CodeSubmission, session: NewSession, audit: [AuditRecord], language: String?) throws(StorageError) -> CodeOutcome<Bool>
    /// A recovery by mailed code: tried only while the account's address is still `address` (the
    /// one the notice was composed for); a right code starts the recovery with its mail, audit
    /// line, events and cancel link.
    func recover(_ code: CodeSubmission, address: String?, recovery: NewRecovery, mail: [MailToSend], audit: AuditRecord, events: [OutboxEvent],
                 cancelTokenHash: [UInt8]?) throws(StorageError) -> CodeOutcome<RecoveryRecord>

    // MARK: Recovery codes

    /// Replaces the account's recovery codes, with the audit line and the step-up's redemption.
    func replaceRecoveryCodes(userId: String, hashes: [[UInt8]], audit: AuditRecord, redeeming: StepUpRedemption) throws(StorageError)
    /// A recovery by recovery code: the username's limit counted (a wrong code one, a right one
    /// nothing, and a right one refused too once wrong ones fill the window); within it the code
    /// used up and the recovery started as `start` does, or the rejection audited — all or nothing,
    /// a concurrent submission of the same code counting as a wrong one.
    func recover(_ code: RecoveryCodeSubmission, recovery: NewRecovery, mail: [MailToSend], audit: AuditRecord, events: [OutboxEvent],
                 cancelTokenHash: [UInt8]?) throws(StorageError) -> RecoveryCodeOutcome

    // MARK: Recoveries

    /// The recovery a token belongs to, whatever its state, with the store's clock.
    func recovery(tokenHash: [UInt8]) throws(StorageError) -> (RecoveryRecord, now: Date)?
    func recovery(id: String) throws(StorageError) -> RecoveryRecord?
    /// Cancels a pending recovery of `userId` with `audit` and `events`; false when there is none.
    func cancel(id: String, userId: String, audit: AuditRecord, events: [OutboxEvent]) throws(StorageError) -> Bool
    /// Uses a cancel link and undoes what it names (a pending recovery, or a held passkey and the
    /// sessions it began); nil and nothing written when there is nothing to undo.
    func useCancelToken(hash: [UInt8], now: Date, records: CancelLinkRecords) throws(StorageError) -> CancelTarget?
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
