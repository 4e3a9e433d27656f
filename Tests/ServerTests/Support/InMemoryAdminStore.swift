import Foundation
import JSON
@testable import LatchkeyServer
@testable import Storage

/// `AdminStore` in memory over `InMemoryAdminTables`, keeping the SQL's rules: an origin once, its
/// step-up used even when it was present already; an app's change syncing the app-derived origins
/// (hand-added ones left alone) and an unchanged app writing nothing but the redemption; a ticket
/// single use and expiring on the store's clock, an admin's fresh link using up the unused one;
/// the audit log newest first, paged by id, filtered by user and action.
struct InMemoryAdminStore: AdminStore {
    let tables: InMemoryAdminTables

    // MARK: Origins and apps

    func origins() throws(StorageError) -> [(origin: String, source: String)] {
        try tables.read { r in r.origins.sorted { $0.key < $1.key }.map { (origin: $0.key, source: $0.value) } }
    }

    func addOrigin(_ origin: String, source: String, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> Bool {
        try tables.change { (r: inout InMemoryAdminTables.Rows, at: Date) throws(StorageError) -> Bool in
            let added = r.origins[origin] == nil
            if added { r.origins[origin] = source }
            try InMemoryAdminTables.redeem(redeeming, &r)
            if added { InMemoryAdminTables.audit([audit], &r, at: at) }
            return added
        }
    }

    func removeOrigin(_ origin: String, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> Bool {
        try tables.change { (r: inout InMemoryAdminTables.Rows, at: Date) throws(StorageError) -> Bool in
            guard r.origins.removeValue(forKey: origin) != nil else { return false }
            try InMemoryAdminTables.redeem(redeeming, &r)
            InMemoryAdminTables.audit([audit], &r, at: at)
            return true
        }
    }

    func apps(rpId: String) throws(StorageError) -> [AppRecord] {
        try tables.read { r in InMemoryAppStore.ordered(r.apps.filter { $0.rpId == rpId }) }
    }

    func putApp(_ app: AppRecord, created: AuditRecord, updated: AuditRecord, origins: AppOriginAudit,
                redeeming: StepUpRedemption?) throws(StorageError) -> AppChange {
        try tables.change { (r: inout InMemoryAdminTables.Rows, at: Date) throws(StorageError) -> AppChange in
            let change: AppChange
            if let i = r.apps.firstIndex(where: { $0.rpId == app.rpId && $0.platform == app.platform && $0.appId == app.appId }) {
                if r.apps[i].fingerprints == app.fingerprints, r.apps[i].handleAllURLs == app.handleAllURLs {
                    try InMemoryAdminTables.redeem(redeeming, &r)
                    return .unchanged
                }
                r.apps[i].fingerprints = app.fingerprints
                r.apps[i].handleAllURLs = app.handleAllURLs
                change = .updated
            } else {
                var stored = app
                stored.createdAt = at
                r.apps.append(stored)
                change = .created
            }
            try InMemoryAdminTables.redeem(redeeming, &r)
            InMemoryAdminTables.audit([change == .created ? created : updated], &r, at: at)
            InMemoryAdminTables.syncAppOrigins(origins, &r, at: at)
            return change
        }
    }

    func removeApp(rpId: String, platform: String, appId: String, audit: AuditRecord, origins: AppOriginAudit,
                   redeeming: StepUpRedemption?) throws(StorageError) -> Bool {
        try tables.change { (r: inout InMemoryAdminTables.Rows, at: Date) throws(StorageError) -> Bool in
            guard let i = r.apps.firstIndex(where: { $0.rpId == rpId && $0.platform == platform && $0.appId == appId }) else { return false }
            r.apps.remove(at: i)
            try InMemoryAdminTables.redeem(redeeming, &r)
            InMemoryAdminTables.audit([audit], &r, at: at)
            InMemoryAdminTables.syncAppOrigins(origins, &r, at: at)
            return true
        }
    }

    // MARK: Tickets

    func externalTicket(externalId: String, candidate: UserRecord, events: [OutboxEvent], ticket: NewTicket, audit: AuditTemplate,
                        redeeming: StepUpRedemption?) throws(StorageError) -> IssuedTicketRow {
        try tables.change { (r: inout InMemoryAdminTables.Rows, at: Date) throws(StorageError) -> IssuedTicketRow in
            try InMemoryAdminTables.redeem(redeeming, &r)
            let user: UserRecord
            if let existing = r.users.first(where: { $0.externalId == externalId }) {
                user = existing.record
            } else {
                guard !r.users.contains(where: { $0.record.username == candidate.username }) else { throw StorageError.conflict(.usernameTaken) }
                r.users.append(InMemoryAdminTables.User(record: candidate, externalId: externalId, createdAt: at))
                InMemoryAdminTables.write(events, &r, at: at)
                user = candidate
            }
            return Self.store(ticket, for: user.id, audit: audit, &r, at: at)
        }
    }

    func accountTicket(_ account: TicketAccount, ticket: NewTicket, audit: AuditTemplate,
                       redeeming: StepUpRedemption?) throws(StorageError) -> IssuedTicketRow? {
        try tables.change { (r: inout InMemoryAdminTables.Rows, at: Date) throws(StorageError) -> IssuedTicketRow? in
            let found = r.users.first { u in
                switch account {
                case .id(let id): u.record.id == id
                case .externalId(let externalId): u.externalId == externalId
                }
            }
            guard let user = found?.record else { return nil }
            try InMemoryAdminTables.redeem(redeeming, &r)
            return Self.store(ticket, for: user.id, audit: audit, &r, at: at)
        }
    }

    private static func store(_ ticket: NewTicket, for userId: String, audit: AuditTemplate, _ r: inout InMemoryAdminTables.Rows,
                              at: Date) -> IssuedTicketRow {
        let expires = at.addingTimeInterval(Double(ticket.ttlSeconds))
        r.tickets.append(InMemoryAdminTables.Ticket(hash: ticket.hash, userId: userId, purpose: ticket.purpose, expiresAt: expires,
                                                    holds: ticket.holds))
        InMemoryAdminTables.audit(audit, subject: userId, &r, at: at)
        return IssuedTicketRow(userId: userId, expiresAt: expires)
    }

    func createTicket(hash: [UInt8], userId: String, purpose: TicketPurpose, ttlSeconds: Int, audit: AuditRecord,
                      redeeming: StepUpRedemption?, holds: Bool) throws(StorageError) -> Date {
        try tables.change { (r: inout InMemoryAdminTables.Rows, at: Date) throws(StorageError) -> Date in
            try InMemoryAdminTables.redeem(redeeming, &r)
            guard r.users.contains(where: { $0.record.id == userId }) else { throw StorageError.notFound }
            let expires = at.addingTimeInterval(Double(ttlSeconds))
            r.tickets.append(InMemoryAdminTables.Ticket(hash: hash, userId: userId, purpose: purpose, expiresAt: expires, holds: holds))
            InMemoryAdminTables.audit([audit], &r, at: at)
            return expires
        }
    }

    /// What the registration that redeems a ticket does (`AccountRepository.register`'s
    /// `redeemingTicket`): a valid one — unused, unexpired, of that purpose — once.
    func redeemTicket(hash: [UInt8], purpose: TicketPurpose) throws(StorageError) -> String? {
        try tables.change { (r: inout InMemoryAdminTables.Rows, at: Date) throws(StorageError) -> String? in
            guard let i = r.tickets.firstIndex(where: { $0.hash == hash && $0.purpose == purpose && $0.usedAt == nil && $0.expiresAt > at })
            else { return nil }
            r.tickets[i].usedAt = at
            return r.tickets[i].userId
        }
    }

    // MARK: Audit log

    func auditEntries(_ query: AuditQuery) throws(StorageError) -> [AuditEntry] {
        try tables.read { r in
            Array(r.audit.reversed().filter { a in
                a.id < (query.before ?? Int64.max)
                    && (query.user.map { u in a.actor == u || (a.subject == u && a.subject != a.actor) } ?? true)
                    && (query.action.map { x in query.actionPrefix ? a.action.hasPrefix(x) : a.action == x } ?? true)
            }.prefix(query.limit))
        }
    }

    // MARK: Admins

    func admins() throws(StorageError) -> [AdminRecord] {
        try tables.read { r in
            r.admins.compactMap { a in
                r.users.first { $0.record.id == a.userId }.map { AdminRecord(user: $0.record, createdAt: a.createdAt, createdBy: a.createdBy) }
            }.sorted { ($0.createdAt, $0.user.username) < ($1.createdAt, $1.user.username) }
        }
    }

    func createAdmin(_ user: UserRecord, by actor: String, audit: AuditRecord) throws(StorageError) -> UserRecord? {
        try tables.change { (r: inout InMemoryAdminTables.Rows, at: Date) throws(StorageError) -> UserRecord? in
            guard !r.users.contains(where: { $0.record.username == user.username }) else { return nil }
            r.users.append(InMemoryAdminTables.User(record: user, externalId: nil, createdAt: at))
            r.admins.append(InMemoryAdminTables.Admin(userId: user.id, createdAt: at, createdBy: actor))
            InMemoryAdminTables.audit([audit], &r, at: at)
            return user
        }
    }

    func enrolmentLink(username: String, hash: [UInt8], ttlSeconds: Int, audit: AuditTemplate) throws(StorageError) -> AdminLinkOutcome {
        try tables.change { (r: inout InMemoryAdminTables.Rows, at: Date) throws(StorageError) -> AdminLinkOutcome in
            guard let user = r.users.first(where: { $0.record.username == username })?.record else { return .unknownUser }
            guard r.admins.contains(where: { $0.userId == user.id }) else { return .notAdmin }
            guard !r.passkeys.contains(where: { $0.userId == user.id && !r.revokedPasskeys.contains($0.id) }) else { return .hasPasskey }
            var replaced = 0
            for i in r.tickets.indices where r.tickets[i].userId == user.id && r.tickets[i].purpose == .passkey && r.tickets[i].usedAt == nil {
                r.tickets[i].usedAt = at
                replaced += 1
            }
            let expires = at.addingTimeInterval(Double(ttlSeconds))
            r.tickets.append(InMemoryAdminTables.Ticket(hash: hash, userId: user.id, purpose: .passkey, expiresAt: expires, holds: false))
            InMemoryAdminTables.audit(audit, subject: user.id, members: [("replaced", .number(Double(replaced)))], &r, at: at)
            return .issued(user: user, expiresAt: expires)
        }
    }

    private static func live(_ r: InMemoryAdminTables.Rows, _ userId: String) -> (passkeys: [CredentialRecord], deviceKeys: [DeviceKeyRecord]) {
        (r.passkeys.filter { $0.userId == userId && !r.revokedPasskeys.contains($0.id) }.sorted { $0.createdAt < $1.createdAt },
         r.deviceKeys.filter { $0.userId == userId && $0.revokedAt == nil }.sorted { $0.createdAt < $1.createdAt })
    }

    func grantCandidate(username: String) throws(StorageError) -> AdminGrantCandidate? {
        try tables.read { r in
            guard let user = r.users.first(where: { $0.record.username == username })?.record else { return nil }
            let (passkeys, deviceKeys) = Self.live(r, user.id)
            var candidate = AdminGrantCandidate(user: user, isAdmin: r.admins.contains { $0.userId == user.id }, passkeys: passkeys,
                                                deviceKeys: deviceKeys)
            let now = tables.now()
            candidate.heldPasskeys = Set(passkeys.filter { ($0.approvesFrom ?? .distantPast) > now }.map(\.id))
            return candidate
        }
    }

    func grant(existing shown: AdminGrantCandidate, by actor: String, audit: AuditRecord, despitePending: Bool) throws(StorageError) -> AdminGrantOutcome {
        try tables.change { (r: inout InMemoryAdminTables.Rows, at: Date) throws(StorageError) -> AdminGrantOutcome in
            guard r.users.contains(where: { $0.record.id == shown.user.id }) else { return .unknownUser }
            let (passkeys, deviceKeys) = Self.live(r, shown.user.id)
            guard Set(passkeys.map(\.id)) == Set(shown.passkeys.map(\.id)), Set(deviceKeys.map(\.id)) == Set(shown.deviceKeys.map(\.id)) else {
                return .changed
            }
            if !despitePending, passkeys.contains(where: { ($0.approvesFrom ?? .distantPast) > at }) { return .pending }
            guard !r.admins.contains(where: { $0.userId == shown.user.id }) else { return .alreadyAdmin }
            r.admins.append(InMemoryAdminTables.Admin(userId: shown.user.id, createdAt: at, createdBy: actor))
            InMemoryAdminTables.audit([audit], &r, at: at)
            return .granted
        }
    }

    func revoke(username: String, audit: AuditTemplate) throws(StorageError) -> UserRecord? {
        try tables.change { (r: inout InMemoryAdminTables.Rows, at: Date) throws(StorageError) -> UserRecord? in
            guard let user = r.users.first(where: { $0.record.username == username })?.record,
                  let i = r.admins.firstIndex(where: { $0.userId == user.id }) else { return nil }
            r.admins.remove(at: i)
            InMemoryAdminTables.audit(audit, subject: user.id, &r, at: at)
            return user
        }
    }

    // MARK: The console's users page

    private static func summary(_ u: InMemoryAdminTables.User, _ r: InMemoryAdminTables.Rows) -> UserSummary {
        UserSummary(user: u.record, externalId: u.externalId, createdAt: u.createdAt, isAdmin: r.admins.contains { $0.userId == u.record.id })
    }

    func findUsers(usernamePrefix prefix: String, limit: Int) throws(StorageError) -> [UserSummary] {
        try tables.read { r in
            r.users.filter { $0.record.username.hasPrefix(prefix) }
                .sorted { a, b in
                    let (ea, eb) = (a.record.username == prefix, b.record.username == prefix)
                    return ea != eb ? ea : Array(a.record.username.utf8).lexicographicallyPrecedes(Array(b.record.username.utf8))
                }
                .prefix(limit).map { Self.summary($0, r) }
        }
    }

    func userSummary(id: String) throws(StorageError) -> UserSummary? {
        try tables.read { r in r.users.first { $0.record.id == id }.map { Self.summary($0, r) } }
    }

    func userPage(id: String) throws(StorageError) -> AdminUserPage? {
        try tables.read { r in
            guard let u = r.users.first(where: { $0.record.id == id }) else { return nil }
            let (passkeys, deviceKeys) = Self.live(r, id)
            let sessions = r.sessions.filter { $0.userId == id && !$0.revoked }.map(\.record)
                .sorted { ($0.createdAt, $1.id) > ($1.createdAt, $0.id) }
            return AdminUserPage(summary: Self.summary(u, r), passkeys: passkeys, deviceKeys: deviceKeys, sessions: sessions)
        }
    }
}

/// `AppStore` in memory: the same rows as the admin store's apps and allowlist.
struct InMemoryAppStore: AppStore {
    let tables: InMemoryAdminTables

    /// `ORDER BY platform DESC, app_id`: iOS first.
    static func ordered(_ apps: [AppRecord]) -> [AppRecord] {
        apps.sorted { ($1.platform, $0.appId) < ($0.platform, $1.appId) }
    }

    func apps(rpId: String) throws(StorageError) -> [AppRecord] {
        try tables.read { r in Self.ordered(r.apps.filter { $0.rpId == rpId }) }
    }

    func declarations(rpId: String) throws(StorageError) -> AppDeclarationRows {
        try tables.read { r in
            AppDeclarationRows(apps: Self.ordered(r.apps.filter { $0.rpId == rpId }),
                               origins: r.origins.sorted { $0.key < $1.key }.map { .init(origin: $0.key, source: $0.value) })
        }
    }
}

/// `WebhookStore` in memory: endpoints soft-deleted (their history kept), a deletion cancelling
/// their pending deliveries in the same change; deliveries newest first.
struct InMemoryWebhookStore: WebhookStore {
    let tables: InMemoryAdminTables

    func create(_ endpoint: NewWebhookEndpoint, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> WebhookEndpointRecord {
        try tables.change { (r: inout InMemoryAdminTables.Rows, at: Date) throws(StorageError) -> WebhookEndpointRecord in
            try InMemoryAdminTables.redeem(redeeming, &r)
            let record = WebhookEndpointRecord(id: endpoint.id, url: endpoint.url, events: endpoint.events, sealedSecret: endpoint.sealedSecret,
                                               createdAt: at)
            r.endpoints.append(InMemoryAdminTables.Endpoint(record: record))
            InMemoryAdminTables.audit([audit], &r, at: at)
            return record
        }
    }

    func list() throws(StorageError) -> [WebhookEndpointRecord] {
        try tables.read { r in
            r.endpoints.filter { $0.deletedAt == nil }.map(\.record).sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }
        }
    }

    func delete(id: String, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> Bool {
        try tables.change { (r: inout InMemoryAdminTables.Rows, at: Date) throws(StorageError) -> Bool in
            guard let i = r.endpoints.firstIndex(where: { $0.record.id == id && $0.deletedAt == nil }) else { return false }
            r.endpoints[i].deletedAt = at
            try InMemoryAdminTables.redeem(redeeming, &r)
            for d in r.deliveries.indices where r.deliveries[d].target == id && r.deliveries[d].status == .pending {
                r.deliveries[d].status = .cancelled
            }
            InMemoryAdminTables.audit([audit], &r, at: at)
            return true
        }
    }

    func deliveries(endpointId: String, limit: Int) throws(StorageError) -> [DeliveryRecord]? {
        try tables.read { r in
            guard r.endpoints.contains(where: { $0.record.id == endpointId && $0.deletedAt == nil }) else { return nil }
            return r.deliveries.filter { $0.target == endpointId }.sorted { $0.seq > $1.seq }.prefix(limit).map { d in
                DeliveryRecord(eventId: d.event.id, type: d.event.type, status: d.status, attempts: d.attempts, lastStatusCode: d.lastStatusCode,
                               lastError: nil, nextAttemptAt: d.status == .pending ? d.nextAttemptAt : nil, createdAt: d.event.createdAt)
            }
        }
    }
}
