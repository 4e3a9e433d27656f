import Crypto
import HTTP
import JSON
import Storage
import WellKnown

/// The admin API's work (SPEC "/admin/v1"): the origin allowlist, the associated apps, enrolment
/// tickets for app backends and the audit log. The CLI uses it too, with its own actor name.
public final class AdminService: Sendable {
    let config: ConfigRepository
    let accounts: AccountRepository
    let audit: AuditRepository
    let origins: OriginCache
    let wellKnown: WellKnownService
    let sessions: SessionService?
    let events: OutboxEvents
    let configuration: Configuration
    let runtime: Runtime

    /// SPEC: enrolment tickets are single use and live 10 minutes.
    static let ticketTTL = 600

    init(config: ConfigRepository, accounts: AccountRepository, audit: AuditRepository, origins: OriginCache, wellKnown: WellKnownService,
         sessions: SessionService?, events: OutboxEvents, configuration: Configuration, runtime: Runtime) {
        self.events = events
        self.config = config
        self.accounts = accounts
        self.audit = audit
        self.origins = origins
        self.wellKnown = wellKnown
        self.sessions = sessions
        self.configuration = configuration
        self.runtime = runtime
    }

    /// For the CLI: the admin work straight on a database, without a server.
    public convenience init(database: Database, configuration: Configuration) {
        let origins = OriginCache(config: database.config)
        self.init(config: database.config, accounts: database.accounts, audit: database.audit, origins: origins,
                  wellKnown: WellKnownService(config: database.config, origins: origins, configuration: configuration),
                  sessions: nil, events: OutboxEvents(runtime: .system, maxAgeSeconds: configuration.webhookMaxAge),
                  configuration: configuration, runtime: .system)
    }

    // MARK: Who is asking

    /// Admin routes take the admin key as a bearer credential (compared in constant time against
    /// its hash). A valid user token there is 403, anything else 401.
    func requireAdmin(_ request: Request) throws(ServiceError) {
        guard let presented = BearerCredentials.value(request, scheme: "Bearer") else { throw ServiceError.unauthorized }
        if isAdminKey(presented) { return }
        if sessions?.isAccessToken(presented) == true { throw ServiceError(.forbidden, "this token does not grant admin access") }
        if configuration.adminKeyHash == nil { throw ServiceError(.forbidden, "the admin API is off (LATCHKEY_ADMIN_KEY is not set)") }
        throw ServiceError.unauthorized
    }

    private func isAdminKey(_ presented: String) -> Bool {
        configuration.adminKeyHash.map { AdminKey.matches(presented, hash: $0) } ?? false
    }

    // MARK: Origins

    /// Start-up step of `serve`: the origins in LATCHKEY_ORIGINS join the allowlist.
    public func seedConfiguredOrigins() throws(ServiceError) {
        for origin in configuration.origins { _ = try addValidOrigin(origin, source: "config", actor: AuditActor.server) }
    }

    public func listOrigins() throws(ServiceError) -> JSONValue {
        .object([("origins", .array(try storage { () throws(StorageError) in try config.origins() }.map {
            .object([("origin", .string($0.origin)), ("source", .string($0.source))])
        }))])
    }

    /// `{"origin"}` or `{"androidFingerprint"}` → (the normalised origin, added now?).
    public func addOrigin(_ body: JSONValue, actor: String = AuditActor.admin) throws(ServiceError) -> (String, Bool) {
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
        switch OriginRules.validate(candidate, developmentMode: configuration.developmentMode) {
        case .success(let o): origin = o
        case .failure(let e): throw ServiceError.invalid(e.reason)
        }
        return (origin, try addValidOrigin(origin, source: "admin", actor: actor))
    }

    private func addValidOrigin(_ origin: String, source: String, actor: String) throws(ServiceError) -> Bool {
        let created = try storage { () throws(StorageError) in
            try config.addOrigin(origin, source: source, audit: AuditRecord(.originAdded, actor: actor, subject: origin))
        }
        origins.invalidate()
        return created
    }

    public func removeOrigin(_ origin: String, actor: String = AuditActor.admin) throws(ServiceError) {
        guard try storage({ () throws(StorageError) in
            try config.removeOrigin(origin, audit: AuditRecord(.originRemoved, actor: actor, subject: origin))
        }) else { throw ServiceError.notFound("origin") }
        origins.invalidate()
    }

    // MARK: Apps

    public func listApps() throws(ServiceError) -> JSONValue {
        let rows = try storage { () throws(StorageError) in try config.apps(rpId: configuration.rpId) }
        return .object([("apps", .array(rows.compactMap { r in
            AppDeclarations.app(r).map { AppDeclarations.json($0, rpId: r.rpId, createdAt: r.createdAt) }
        }))])
    }

    /// Creates or replaces the app (same id) → (app JSON, created?). The allowlist follows in the same transaction.
    public func putApp(_ body: JSONValue, actor: String = AuditActor.admin) throws(ServiceError) -> (JSONValue, Bool) {
        let app = try AppDeclarations.parse(body)
        if case .ios = app {
            // SPEC: iOS apps report https://<rpId>; that origin must be a valid allowlist entry.
            if case .failure(let e) = OriginRules.validate("https://" + configuration.rpId, developmentMode: configuration.developmentMode) {
                throw ServiceError.invalid("rpId \(configuration.rpId) cannot carry an iOS app: \(e.reason)")
            }
        }
        let record = AppDeclarations.record(app, rpId: configuration.rpId)
        let change = try storage { () throws(StorageError) in
            try config.putApp(record, audit: { change in
                AuditRecord(change == .created ? .appAdded : .appUpdated, actor: actor, subject: record.platform + ":" + record.appId, detail: [
                    ("rpId", .string(record.rpId)), ("platform", .string(record.platform)),
                    ("fingerprints", .array(record.fingerprints.map { .string($0) })), ("handleAllUrls", .bool(record.handleAllURLs)),
                ])
            }, originAudit: { origin, added in AuditRecord.appOrigin(origin, added: added, actor: actor) })
        }
        changed()
        return (AppDeclarations.json(app, rpId: configuration.rpId), change == .created)
    }

    public func removeApp(_ id: String, actor: String = AuditActor.admin) throws(ServiceError) {
        guard let (platform, appId) = AppDeclarations.parseIdentifier(id) else {
            throw ServiceError.invalid("app ids are ios:TEAMID.bundle.id or android:package.name")
        }
        let rpId = configuration.rpId
        guard try storage({ () throws(StorageError) in
            try config.removeApp(rpId: rpId, platform: platform, appId: appId,
                                 audit: AuditRecord(.appRemoved, actor: actor, subject: platform + ":" + appId,
                                                    detail: [("rpId", .string(rpId)), ("platform", .string(platform))]),
                                 originAudit: { origin, added in AuditRecord.appOrigin(origin, added: added, actor: actor) })
        }) else { throw ServiceError.notFound("app") }
        changed()
    }

    /// This instance sees its own change at once; others hear it through the change feed (or within a second).
    private func changed() {
        origins.invalidate()
        wellKnown.invalidate()
    }

    // MARK: Tickets

    /// `POST /admin/v1/users/{externalId}/enrolment-tickets`: the app backend's user (created on first
    /// use) may enrol a passkey with this single-use, 10-minute ticket.
    func enrolmentTicket(externalId: String, body: JSONValue) throws(ServiceError) -> JSONValue {
        guard !externalId.isEmpty, externalId.count <= 128 else { throw ServiceError.invalid("externalId must be 1 to 128 characters") }
        guard let username = body["username"]?.stringValue else { throw ServiceError.invalid("username is required") }
        let displayName = body["displayName"]?.stringValue ?? username
        try validateName(username, "username")
        try validateName(displayName, "displayName")
        let candidate = UserRecord(id: runtime.identifier(), userHandle: runtime.random(32), username: username, displayName: displayName)
        let user: UserRecord
        do {
            user = try accounts.upsertExternalUser(externalId: externalId, candidate: candidate,
                                                   events: [events.userCreated(userId: candidate.id, username: candidate.username)]).0
        } catch .conflict(.usernameTaken) {
            throw ServiceError(.conflict, "that username is taken")
        } catch {
            throw ServiceError(error)
        }
        let ticket = OpaqueSecret(prefix: "lkt_", runtime: runtime)
        let expires = try storage { () throws(StorageError) in
            try accounts.createTicket(hash: ticket.hash, userId: user.id, ttlSeconds: Self.ticketTTL,
                                      audit: AuditRecord(.ticketIssued, actor: AuditActor.admin, subject: user.id))
        }
        return .object([("ticket", .string(ticket.token)), ("expiresAt", .string(iso8601(expires))), ("userId", .string(user.id))])
    }

    /// `POST /admin/v1/users/{externalId}/device-key-tickets`: the app backend vouches that its user
    /// (who must have enrolled before: the ticket is bound to that account) may enrol a device key,
    /// e.g. after its own strong check when the user has no passkey on this phone. Single use, 10 minutes.
    func deviceKeyTicket(externalId: String) throws(ServiceError) -> JSONValue {
        guard !externalId.isEmpty, externalId.count <= 128 else { throw ServiceError.invalid("externalId must be 1 to 128 characters") }
        guard let user = try storage({ () throws(StorageError) in try accounts.user(externalId: externalId) }) else {
            throw ServiceError.notFound("user")
        }
        let ticket = OpaqueSecret(prefix: "lkd_", runtime: runtime)
        let expires = try storage { () throws(StorageError) in
            try accounts.createTicket(hash: ticket.hash, userId: user.id, purpose: .deviceKey, ttlSeconds: Self.ticketTTL,
                                      audit: AuditRecord(.deviceKeyTicketIssued, actor: AuditActor.admin, subject: user.id))
        }
        return .object([("ticket", .string(ticket.token)), ("expiresAt", .string(iso8601(expires))), ("userId", .string(user.id))])
    }

    // MARK: Audit

    func auditLog(limit: String?, before: String?) throws(ServiceError) -> JSONValue {
        let n = min(max(Int(limit ?? "100") ?? 100, 1), 1000)
        let cursor = before.flatMap { Int64($0) }
        let entries = try storage { () throws(StorageError) in try audit.entries(limit: n, before: cursor) }
        return .object([("entries", .array(entries.map { e in
            .object([("id", .number(Double(e.id))), ("at", .string(iso8601(e.at))), ("actor", .string(e.actor)),
                     ("action", .string(e.action)), ("subject", e.subject.map { .string($0) } ?? .null), ("detail", e.detail)])
        }))])
    }
}
