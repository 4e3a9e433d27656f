import Foundation
import Storage

/// The admin API's store in PostgreSQL: the allowlist and apps (`ConfigRepository`), the audit log,
/// the admin role and the users page (`AdminRepository`), and the accounts the tickets name — the
/// one file of this feature that names `AccountRepository` (ARCHITECTURE.md, "Which store each
/// feature uses").
struct PostgresAdminStore: AdminStore {
    let config: ConfigRepository
    let audit: AuditRepository
    let admin: AdminRepository
    let accounts: AccountRepository

    init(config: ConfigRepository, audit: AuditRepository, admins: AdminRepository, accounts: AccountRepository) {
        self.config = config
        self.audit = audit
        self.admin = admins
        self.accounts = accounts
    }

    init(_ database: Database) {
        self.init(config: database.config, audit: database.audit, admins: database.admins, accounts: database.accounts)
    }

    func origins() throws(StorageError) -> [(origin: String, source: String)] { try config.origins() }

    func addOrigin(_ origin: String, source: String, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> Bool {
        try config.addOrigin(origin, source: source, audit: audit, redeeming: redeeming)
    }

    func removeOrigin(_ origin: String, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> Bool {
        try config.removeOrigin(origin, audit: audit, redeeming: redeeming)
    }

    func apps(rpId: String) throws(StorageError) -> [AppRecord] { try config.apps(rpId: rpId) }

    func putApp(_ app: AppRecord, created: AuditRecord, updated: AuditRecord, origins: AppOriginAudit,
                redeeming: StepUpRedemption?) throws(StorageError) -> AppChange {
        try config.putApp(app, created: created, updated: updated, origins: origins, redeeming: redeeming)
    }

    func removeApp(rpId: String, platform: String, appId: String, audit: AuditRecord, origins: AppOriginAudit,
                   redeeming: StepUpRedemption?) throws(StorageError) -> Bool {
        try config.removeApp(rpId: rpId, platform: platform, appId: appId, audit: audit, origins: origins, redeeming: redeeming)
    }

    func externalTicket(externalId: String, candidate: UserRecord, events: [OutboxEvent], ticket: NewTicket, audit: AuditTemplate,
                        redeeming: StepUpRedemption?) throws(StorageError) -> IssuedTicketRow {
        try accounts.externalTicket(externalId: externalId, candidate: candidate, events: events, ticket: ticket, audit: audit, redeeming: redeeming)
    }

    func accountTicket(_ account: TicketAccount, ticket: NewTicket, audit: AuditTemplate,
                       redeeming: StepUpRedemption?) throws(StorageError) -> IssuedTicketRow? {
        try accounts.accountTicket(account, ticket: ticket, audit: audit, redeeming: redeeming)
    }

    func createTicket(hash: [UInt8], userId: String, purpose: TicketPurpose, ttlSeconds: Int, audit: AuditRecord,
                      redeeming: StepUpRedemption?, holds: Bool) throws(StorageError) -> Date {
        try accounts.createTicket(hash: hash, userId: userId, purpose: purpose, ttlSeconds: ttlSeconds, audit: audit, redeeming: redeeming,
                                  holds: holds)
    }

    func auditEntries(_ query: AuditQuery) throws(StorageError) -> [AuditEntry] { try audit.entries(query) }

    func admins() throws(StorageError) -> [AdminRecord] { try admin.admins() }

    func createAdmin(_ user: UserRecord, by actor: String, audit: AuditRecord) throws(StorageError) -> UserRecord? {
        try admin.createAdmin(user, by: actor, audit: audit)
    }

    func enrolmentLink(username: String, hash: [UInt8], ttlSeconds: Int, audit: AuditTemplate) throws(StorageError) -> AdminLinkOutcome {
        try admin.enrolmentLink(username: username, hash: hash, ttlSeconds: ttlSeconds, audit: audit)
    }

    func grantCandidate(username: String) throws(StorageError) -> AdminGrantCandidate? { try admin.grantCandidate(username: username) }

    func grant(existing shown: AdminGrantCandidate, by actor: String, audit: AuditRecord, despitePending: Bool) throws(StorageError) -> AdminGrantOutcome {
        try admin.grant(existing: shown, by: actor, audit: audit, despitePending: despitePending)
    }

    func revoke(username: String, audit: AuditTemplate) throws(StorageError) -> UserRecord? { try admin.revoke(username: username, audit: audit) }

    func findUsers(usernamePrefix prefix: String, limit: Int) throws(StorageError) -> [UserSummary] {
        try admin.findUsers(usernamePrefix: prefix, limit: limit)
    }

    func userSummary(id: String) throws(StorageError) -> UserSummary? { try admin.userSummary(id: id) }

    func userPage(id: String) throws(StorageError) -> AdminUserPage? { try admin.userPage(id: id) }
}
