import Foundation
import Storage

/// What the admin API reads and writes (ARCHITECTURE.md "Which store each feature uses"): the
/// origin allowlist and the declared apps, the accounts its tickets name, the audit log, the admin
/// role and the console's users page. Each change is one call that writes all of it (its audit
/// lines and events, and the step-up's redemption: `.conflict(.stepUpUsed)` and nothing written
/// when that redemption fails); expiries are the store's clock. `PostgresAdminStore` is the
/// server's; the service tests keep the same rules in memory.
protocol AdminStore: Sendable {
    // MARK: Origins and apps

    /// The allowlist, by origin.
    func origins() throws(StorageError) -> [(origin: String, source: String)]
    /// True when added (with `audit`); false when present already (no audit). The redemption is
    /// made either way: an answered change uses its step-up.
    func addOrigin(_ origin: String, source: String, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> Bool
    /// True when removed (with `audit` and the redemption); false when absent (nothing written).
    func removeOrigin(_ origin: String, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> Bool
    /// One rpId's apps, iOS first, then by id.
    func apps(rpId: String) throws(StorageError) -> [AppRecord]
    /// Creates or replaces the app; the app-derived origins follow in the same change (each added
    /// or dropped audited with `origins`). Unchanged: the redemption alone.
    func putApp(_ app: AppRecord, created: AuditRecord, updated: AuditRecord, origins: AppOriginAudit,
                redeeming: StepUpRedemption?) throws(StorageError) -> AppChange
    /// False when absent (nothing written); else removed, audited, the origins synced.
    func removeApp(rpId: String, platform: String, appId: String, audit: AuditRecord, origins: AppOriginAudit,
                   redeeming: StepUpRedemption?) throws(StorageError) -> Bool

    // MARK: Tickets

    /// A ticket for the account an app backend knows as `externalId`, that account made from
    /// `candidate` (with `events`) on first use, with `audit` about the account and the redemption,
    /// in one change: `.conflict(.usernameTaken)` when the candidate's username is another
    /// account's, `.conflict(.stepUpUsed)` when the redemption fails (nothing written either way).
    func externalTicket(externalId: String, candidate: UserRecord, events: [OutboxEvent], ticket: NewTicket, audit: AuditTemplate,
                        redeeming: StepUpRedemption?) throws(StorageError) -> IssuedTicketRow
    /// A ticket for an account that exists, with `audit` about it and the redemption, in one
    /// change; nil when there is no such account (nothing written, the step-up not used).
    func accountTicket(_ account: TicketAccount, ticket: NewTicket, audit: AuditTemplate,
                       redeeming: StepUpRedemption?) throws(StorageError) -> IssuedTicketRow?
    /// A single-use ticket for `ttlSeconds` with `audit` and the redemption; when it expires.
    func createTicket(hash: [UInt8], userId: String, purpose: TicketPurpose, ttlSeconds: Int, audit: AuditRecord,
                      redeeming: StepUpRedemption?, holds: Bool) throws(StorageError) -> Date

    // MARK: Audit log

    /// Newest first, ids below `before`; `user`: lines it made or that are about it (not its own
    /// about itself twice); `action`: that action, or with `actionPrefix` those starting with it.
    func auditEntries(_ query: AuditQuery) throws(StorageError) -> [AuditEntry]

    // MARK: Admins

    func admins() throws(StorageError) -> [AdminRecord]
    /// The user with the admin role and `audit`, only when the username is free (nil otherwise).
    func createAdmin(_ user: UserRecord, by actor: String, audit: AuditRecord) throws(StorageError) -> UserRecord?
    func enrolmentLink(username: String, hash: [UInt8], ttlSeconds: Int, audit: AuditTemplate) throws(StorageError) -> AdminLinkOutcome
    func grantCandidate(username: String) throws(StorageError) -> AdminGrantCandidate?
    func grant(existing shown: AdminGrantCandidate, by actor: String, audit: AuditRecord, despitePending: Bool) throws(StorageError) -> AdminGrantOutcome
    func revoke(username: String, audit: AuditTemplate) throws(StorageError) -> UserRecord?

    // MARK: The console's users page

    /// Users whose username starts with `prefix`, the exact match first, at most `limit`: one read.
    func findUsers(usernamePrefix prefix: String, limit: Int) throws(StorageError) -> [UserSummary]
    func userSummary(id: String) throws(StorageError) -> UserSummary?
    /// The account with its live passkeys, device keys and sessions: one read.
    func userPage(id: String) throws(StorageError) -> AdminUserPage?
}

/// A cache of this instance that an admin change drops at once (the allowlist, the association
/// files); other instances hear of the change through the change feed.
protocol DroppedOnChange: Sendable {
    func invalidate()
}

extension OriginCache: DroppedOnChange {}
extension WellKnownService: DroppedOnChange {}
