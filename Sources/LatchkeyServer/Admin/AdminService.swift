import Crypto
import DeviceKeys
import Foundation
import JSON
import Storage
import WellKnown

/// The admin API's work (SPEC "/admin/v1"): the origin allowlist, the associated apps, enrolment
/// tickets for app backends and the audit log. The CLI uses it too, with its own actor name.
public final class AdminService: Sendable {
    let store: any AdminStore
    let origins: any DroppedOnChange
    let wellKnown: any DroppedOnChange
    let events: OutboxEvents
    let policy: AdminPolicy
    let runtime: Runtime

    /// SPEC: enrolment tickets are single use and live 10 minutes.
    static let ticketTTL = 600

    init(store: any AdminStore, origins: any DroppedOnChange, wellKnown: any DroppedOnChange, events: OutboxEvents, policy: AdminPolicy,
         runtime: Runtime) {
        self.store = store
        self.events = events
        self.origins = origins
        self.wellKnown = wellKnown
        self.policy = policy
        self.runtime = runtime
    }

    /// For the CLI: the admin work straight on a database, without a server.
    public convenience init(database: Database, configuration: Configuration) {
        let origins = OriginCache(config: database.config, developmentMode: configuration.developmentMode, runtime: .system)
        self.init(store: PostgresAdminStore(database), origins: origins,
                  wellKnown: WellKnownService(store: database.config, relyingParty: RelyingParty(configuration), pinnedDirectory: configuration.wellKnownDirectory, runtime: .system),
                  events: OutboxEvents(runtime: .system, maxAgeSeconds: WebhookPolicy(configuration).maxAgeSeconds),
                  policy: AdminPolicy(configuration), runtime: .system)
    }

    // MARK: Who is asking

    /// `GET /admin/v1/me`: who the console is signed in as. `loaded`: the account the admin's
    /// caller resolution read with the role (`GuardLoads.adminPage`).
    func me(_ caller: AdminCaller, loaded: AdminPageRead? = nil) throws(ServiceError) -> AdminIdentity {
        guard caller.actor != AuditActor.adminKey else { return AdminIdentity(actor: caller.actor, user: nil) }
        if case .caller(let summary)? = loaded { return AdminIdentity(actor: caller.actor, user: summary) }
        let summary = try storage { () throws(StorageError) in try store.userSummary(id: caller.actor) }
        return AdminIdentity(actor: caller.actor, user: summary)
    }

    // MARK: Origins

    /// Start-up step of `serve`: the origins in LATCHKEY_ORIGINS join the allowlist.
    public func seedConfiguredOrigins() throws(ServiceError) {
        for origin in policy.relyingParty.origins { _ = try addValidOrigin(origin, source: "config", by: .named(AuditActor.server)) }
    }

    /// The allowlist: each origin with where it came from (`config`, `admin`, `app`). `loaded`: the
    /// allowlist the admin's caller resolution read with the role (`GuardLoads.adminPage`).
    public func listOrigins(loaded: AdminPageRead? = nil) throws(ServiceError) -> [(origin: String, source: String)] {
        if case .origins(let rows)? = loaded { return rows.map { ($0.origin, $0.source) } }
        return try storage { () throws(StorageError) in try store.origins() }
    }

    /// `{"origin"}` or `{"androidFingerprint"}` → (the normalised origin, added now?).
    public func addOrigin(_ body: JSONValue, by caller: AdminCaller) throws(ServiceError) -> (String, Bool) {
        let origin = try Self.checkedOrigin(body, policy)
        return (origin, try addValidOrigin(origin, source: "admin", by: caller))
    }

    /// The origin a `POST /admin/v1/origins` body names, normalised, or 400 `invalid_request`: its
    /// form (`http://` only in development mode), and whether it can ever work for the rpId. It needs
    /// only the request and the configuration, so the route checks it before the step-up (SPEC "Assurance").
    static func checkedOrigin(_ body: JSONValue, _ policy: AdminPolicy) throws(ServiceError) -> String {
        let candidate: String
        if let fingerprint = body["androidFingerprint"]?.stringValue {
            switch OriginRules.androidOrigin(fromFingerprint: fingerprint) {
            case .success(let o): candidate = o
            case .failure(let e): throw ServiceError.invalid(e.reason)
            }
        } else if let origin = body["origin"]?.stringValue {
            candidate = origin
        } else {
            throw ServiceError.invalid("origin or androidFingerprint is required")
        }
        let origin: String
        switch OriginRules.validate(candidate, developmentMode: policy.developmentMode) {
        case .success(let o): origin = o
        case .failure(let e): throw ServiceError.invalid(e.reason)
        }
        if let problem = Configuration.originReachProblem(origin, rpId: policy.relyingParty.id) { throw ServiceError.invalid(problem) }
        return origin
    }

    private func addValidOrigin(_ origin: String, source: String, by caller: AdminCaller) throws(ServiceError) -> Bool {
        let created = try storage { () throws(StorageError) in
            try store.addOrigin(origin, source: source, audit: caller.record(.originAdded, subject: origin), redeeming: caller.redemption)
        }
        origins.invalidate()
        return created
    }

    public func removeOrigin(_ origin: String, by caller: AdminCaller) throws(ServiceError) {
        guard try storage({ () throws(StorageError) in
            try store.removeOrigin(origin, audit: caller.record(.originRemoved, subject: origin), redeeming: caller.redemption)
        }) else { throw ServiceError.notFound("origin") }
        origins.invalidate()
    }

    // MARK: Apps

    /// The declared apps that still validate. `loaded`: the apps the admin's caller resolution read
    /// with the role (`GuardLoads.adminPage`, as `appsRead` asks).
    public func listApps(loaded: AdminPageRead? = nil) throws(ServiceError) -> [DeclaredApp] {
        let rows: [AppRecord]
        if case .apps(let read)? = loaded {
            rows = read
        } else {
            rows = try storage { () throws(StorageError) in try store.apps(rpId: policy.relyingParty.id) }
        }
        return rows.compactMap { r in AppDeclarations.app(r).map { DeclaredApp(app: $0, rpId: r.rpId, createdAt: r.createdAt) } }
    }

    /// Creates or replaces the app (same id) → (the app, created?). The allowlist follows in the same transaction.
    public func putApp(_ body: JSONValue, by caller: AdminCaller) throws(ServiceError) -> (DeclaredApp, Bool) {
        let app = try Self.checkedApp(body, policy)
        let record = AppDeclarations.record(app, rpId: policy.relyingParty.id)
        let detail: [(key: String, value: JSONValue)] = [
            ("rpId", .string(record.rpId)), ("platform", .string(record.platform)),
            ("fingerprints", .array(record.fingerprints.map { .string($0) })), ("handleAllUrls", .bool(record.handleAllURLs)),
        ]
        let subject = record.platform + ":" + record.appId
        let change = try storage { () throws(StorageError) in
            try store.putApp(record, created: caller.record(.appAdded, subject: subject, detail: detail),
                              updated: caller.record(.appUpdated, subject: subject, detail: detail),
                              origins: .appOrigins(actor: caller.actor), redeeming: caller.redemption)
        }
        changed()
        return (DeclaredApp(app: app, rpId: policy.relyingParty.id, createdAt: nil), change == .created)
    }

    /// The app a `POST /admin/v1/apps` body declares, or 400 `invalid_request` (a malformed Team ID,
    /// package or fingerprint; an iOS app on an rpId that cannot carry one). Request and configuration
    /// only: the route checks it before the step-up (SPEC "Assurance").
    static func checkedApp(_ body: JSONValue, _ policy: AdminPolicy) throws(ServiceError) -> AssociatedApp {
        let app = try AppDeclarations.parse(body)
        if case .ios = app {
            // SPEC: iOS apps report https://<rpId>; that origin must be a valid allowlist entry.
            if case .failure(let e) = OriginRules.validate("https://" + policy.relyingParty.id, developmentMode: policy.developmentMode) {
                throw ServiceError.invalid("rpId \(policy.relyingParty.id) cannot carry an iOS app: \(e.reason)")
            }
        }
        return app
    }

    public func removeApp(_ id: String, by caller: AdminCaller) throws(ServiceError) {
        // SPEC "Assurance": a path id that cannot be one names nothing (404), like an absent app.
        guard let (platform, appId) = AppDeclarations.parseIdentifier(id) else { throw ServiceError.notFound("app") }
        let rpId = policy.relyingParty.id
        guard try storage({ () throws(StorageError) in
            try store.removeApp(rpId: rpId, platform: platform, appId: appId,
                                 audit: caller.record(.appRemoved, subject: platform + ":" + appId,
                                                      detail: [("rpId", .string(rpId)), ("platform", .string(platform))]),
                                 origins: .appOrigins(actor: caller.actor), redeeming: caller.redemption)
        }) else { throw ServiceError.notFound("app") }
        changed()
    }

    /// What `listApps` reads, for the caller's resolution to read with an admin user's role.
    var appsRead: AdminPageRequest { .apps(rpId: policy.relyingParty.id) }

    /// This instance sees its own change at once; others hear it through the change feed (or within a second).
    private func changed() {
        origins.invalidate()
        wellKnown.invalidate()
    }

    // MARK: Tickets

    /// `POST /admin/v1/users/{externalId}/enrolment-tickets`: the app backend's user (created on first
    /// use) may enrol a passkey with this single-use, 10-minute ticket. The account, the ticket, its
    /// audit line and the step-up's redemption are one change: a taken username (409) or a used
    /// step-up leaves no account behind.
    func enrolmentTicket(externalId: String, body: JSONValue, by caller: AdminCaller) throws(ServiceError) -> IssuedTicket {
        guard !externalId.isEmpty, externalId.count <= 128 else { throw ServiceError.invalid("externalId must be 1 to 128 characters") }
        let (username, displayName) = try RequestFields.accountNames(body)
        let candidate = UserRecord(id: runtime.identifier(), userHandle: runtime.random(32), username: username, displayName: displayName)
        let ticket = OpaqueSecret(prefix: "lkt_", runtime: runtime)
        let issued: IssuedTicketRow
        do {
            issued = try store.externalTicket(externalId: externalId, candidate: candidate,
                                              events: [events.userCreated(userId: candidate.id, username: candidate.username)],
                                              ticket: NewTicket(hash: ticket.hash, purpose: .passkey, ttlSeconds: Self.ticketTTL),
                                              audit: caller.template(.ticketIssued), redeeming: caller.redemption)
        } catch .conflict(.usernameTaken) {
            throw ServiceError(.conflict, "that username is taken")
        } catch {
            throw ServiceError(error)
        }
        return IssuedTicket(ticket: ticket.token, expiresAt: issued.expiresAt, userId: issued.userId)
    }

    /// A single-use, 10-minute passkey-enrolment ticket for `userId` (`Authorization: Ticket …` on
    /// registration options), for the CLI's new admin.
    func passkeyTicket(userId: String, by caller: AdminCaller) throws(ServiceError) -> (String, Date) {
        let ticket = OpaqueSecret(prefix: "lkt_", runtime: runtime)
        let expires = try storage { () throws(StorageError) in
            try store.createTicket(hash: ticket.hash, userId: userId, purpose: .passkey, ttlSeconds: Self.ticketTTL,
                                   audit: caller.record(.ticketIssued, subject: userId), redeeming: caller.redemption, holds: false)
        }
        return (ticket.token, expires)
    }

    /// `POST /admin/v1/accounts/{userId}/enrolment-tickets` (SPEC "Admin console" → "Tickets."): a
    /// ticket for an existing account by Latchkey's id — the way back in for an account with no
    /// `externalId` that lost every way in. The passkey it registers is held even when the account
    /// has none, and its verified address (if any) hears of it with the cancel link. An unknown
    /// account: 404, the step-up not used.
    func accountTicket(userId: String, by caller: AdminCaller) throws(ServiceError) -> IssuedTicket {
        try existingTicket(.id(userId), purpose: .passkey, holds: true, prefix: "lkt_",
                           audit: caller.template(.ticketIssued, detail: [("holds", true)]), by: caller)
    }

    /// `POST /admin/v1/users/{externalId}/device-key-tickets`: the app backend vouches that its user
    /// (who must have enrolled before: the ticket is bound to that account) may enrol a device key,
    /// e.g. after its own strong check when the user has no passkey on this phone. Single use, 10
    /// minutes. An unknown user: 404, the step-up not used.
    func deviceKeyTicket(externalId: String, by caller: AdminCaller) throws(ServiceError) -> IssuedTicket {
        guard !externalId.isEmpty, externalId.count <= 128 else { throw ServiceError.invalid("externalId must be 1 to 128 characters") }
        return try existingTicket(.externalId(externalId), purpose: .deviceKey, holds: false, prefix: "lkd_",
                                  audit: caller.template(.deviceKeyTicketIssued), by: caller)
    }

    /// A single-use, 10-minute ticket for an account that exists (`prefix` + a fresh secret): one change.
    private func existingTicket(_ account: TicketAccount, purpose: TicketPurpose, holds: Bool, prefix: String, audit: AuditTemplate,
                                by caller: AdminCaller) throws(ServiceError) -> IssuedTicket {
        let ticket = OpaqueSecret(prefix: prefix, runtime: runtime)
        let new = NewTicket(hash: ticket.hash, purpose: purpose, ttlSeconds: Self.ticketTTL, holds: holds)
        guard let issued = try storage({ () throws(StorageError) in
            try store.accountTicket(account, ticket: new, audit: audit, redeeming: caller.redemption)
        }) else { throw ServiceError.notFound("user") }
        return IssuedTicket(ticket: ticket.token, expiresAt: issued.expiresAt, userId: issued.userId)
    }

    // MARK: Audit

    /// `GET /admin/v1/audit?limit=&before=&user=&action=`: newest first. `user` (a user id) keeps
    /// the lines that user made or that are about them; `action` keeps one action (`origin.removed`),
    /// or with a final `*` every action starting with the rest (`origin.*`).
    /// `loaded`: that page as the admin's caller resolution read it with the role (`GuardLoads.adminPage`).
    func auditLog(limit: Int64?, before: Int64?, user: String? = nil, action: String? = nil,
                  loaded: AdminPageRead? = nil) throws(ServiceError) -> [AuditEntry] {
        try auditLog(try Self.auditQuery(limit: limit, before: before, user: user, action: action), loaded: loaded)
    }

    func auditLog(_ query: AuditQuery, loaded: AdminPageRead? = nil) throws(ServiceError) -> [AuditEntry] {
        if case .audit(let entries)? = loaded { return entries }
        return try storage { () throws(StorageError) in try store.auditEntries(query) }
    }

    /// The page `auditLog` reads; 400 `invalid_request` for filters it refuses.
    static func auditQuery(limit: Int64?, before: Int64?, user: String?, action: String?) throws(ServiceError) -> AuditQuery {
        let user = user.flatMap { $0.isEmpty ? nil : $0 }
        var action = action.flatMap { $0.isEmpty ? nil : $0 }
        let prefix = action?.hasSuffix("*") ?? false
        if prefix { action?.removeLast() }
        guard (user?.utf8.count ?? 0) <= 128, (action?.utf8.count ?? 0) <= 128 else { throw ServiceError.invalid("filters are at most 128 characters") }
        return AuditQuery(limit: Int(min(max(limit ?? 100, 1), 1000)), before: before, user: user, action: action, actionPrefix: prefix)
    }
}

/// Who the console is signed in as: the admin key (no user) or an admin user's account.
struct AdminIdentity: Sendable {
    let actor: String
    let user: UserSummary?
}

/// A single-use, 10-minute ticket for `userId`, shown once.
struct IssuedTicket: Sendable {
    let ticket: String
    let expiresAt: Date
    let userId: String
}

/// Who makes an admin request: the admin key (`admin-key`), an admin user (their user id), or the
/// CLI; with a user token's change, the step-up approval that change redeems. Every admin audit
/// line is built here, so each names the actor and, when approved, the action hash and receipt.
public struct AdminCaller: Sendable {
    public let actor: String
    let approval: AdminApproval?

    public static func named(_ actor: String) -> AdminCaller { AdminCaller(actor: actor, approval: nil) }
    static let adminKey = AdminCaller(actor: AuditActor.adminKey, approval: nil)

    var redemption: StepUpRedemption? { approval?.redemption }

    func record(_ action: AuditAction, subject: String?, detail: [(key: String, value: JSONValue)] = []) -> AuditRecord {
        AuditRecord(action, actor: actor, subject: subject, detail: approved(detail))
    }

    /// `record` for a line whose subject the change's row gives.
    func template(_ action: AuditAction, detail: [(key: String, value: JSONValue)] = []) -> AuditTemplate {
        AuditTemplate(action, actor: actor, detail: approved(detail))
    }

    private func approved(_ detail: [(key: String, value: JSONValue)]) -> [(key: String, value: JSONValue)] {
        guard let approval else { return detail }
        return detail + [("actionHash", .string(Base64URL.encode(approval.actionHash))), ("receiptId", .string(approval.receiptId))]
    }
}

/// A checked `Latchkey-Step-Up` for one admin change (`StepUpRule.adminChange`), not yet redeemed.
struct AdminApproval: Sendable {
    let redemption: StepUpRedemption
    let receiptId: String
    let actionHash: [UInt8]
}
