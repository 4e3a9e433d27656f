import Foundation
import JSON
@testable import LatchkeyServer
@testable import Storage
import Synchronization

/// The rows the admin, app and webhook in-memory stores share (`InMemoryAdminStore`,
/// `InMemoryAppStore`, `InMemoryWebhookStore`), under one lock so each store call is atomic, as its
/// transaction is in PostgreSQL; a call that fails part-way (a step-up already used) writes
/// nothing. `now` plays the database's `now()`: ticket expiries are the store's to decide.
final class InMemoryAdminTables: Sendable {
    struct User {
        var record: UserRecord
        var externalId: String?
        var createdAt: Date
    }

    struct Admin {
        var userId: String
        var createdAt: Date
        var createdBy: String
    }

    struct Ticket {
        var hash: [UInt8]
        var userId: String
        var purpose: TicketPurpose
        var expiresAt: Date
        var holds: Bool
        var usedAt: Date?
    }

    struct Endpoint {
        var record: WebhookEndpointRecord
        var deletedAt: Date?
    }

    struct Delivery {
        var seq: Int
        var target: String
        var event: OutboxEvent
        var status: DeliveryRecord.Status = .pending
        var attempts = 0
        var lastStatusCode: Int?
        var nextAttemptAt: Date
    }

    struct Session {
        var record: SessionRecord
        var userId: String
        var revoked = false
    }

    struct Rows {
        var users: [User] = []
        var admins: [Admin] = []
        /// origin → source (`config`, `admin`, `app`).
        var origins: [String: String] = [:]
        var apps: [AppRecord] = []
        var tickets: [Ticket] = []
        /// Ids rise from 1, as `audit_log.id` does.
        var audit: [AuditEntry] = []
        var events: [OutboxEvent] = []
        var endpoints: [Endpoint] = []
        var deliveries: [Delivery] = []
        var passkeys: [CredentialRecord] = []
        var revokedPasskeys: Set<[UInt8]> = []
        var deviceKeys: [DeviceKeyRecord] = []
        var sessions: [Session] = []
        /// Step-up receipts an admin change may redeem: consumed or not.
        var receipts: [(redemption: StepUpRedemption, consumed: Bool)] = []
    }

    let rows = Mutex(Rows())
    let now: @Sendable () -> Date
    /// While set, every call fails as a database that went away does (`.unavailable`).
    let down = Mutex(false)

    init(now: @escaping @Sendable () -> Date) { self.now = now }

    func read<T>(_ body: (Rows) throws(StorageError) -> T) throws(StorageError) -> T {
        if down.withLock({ $0 }) { throw StorageError.unavailable("in-memory store set down") }
        let copy = rows.withLock { $0 }
        return try body(copy)
    }

    /// One transaction: `body` edits a copy, which replaces the rows only if it returns.
    func change<T: Sendable>(_ body: (inout Rows, Date) throws(StorageError) -> T) throws(StorageError) -> T {
        if down.withLock({ $0 }) { throw StorageError.unavailable("in-memory store set down") }
        let now = self.now()
        return try rows.allOrNothing { (r: inout Rows) throws(StorageError) -> T in try body(&r, now) }
    }

    var snapshot: Rows { rows.withLock { $0 } }

    // MARK: The statements' shared parts

    /// `StepUpRedemption.redeem`: the receipt for exactly this token, user and action, unconsumed;
    /// `.conflict(.stepUpUsed)` otherwise (the caller's change then writes nothing).
    static func redeem(_ redemption: StepUpRedemption?, _ r: inout Rows) throws(StorageError) {
        guard let redemption else { return }
        guard let i = r.receipts.firstIndex(where: { $0.redemption == redemption && !$0.consumed }) else {
            throw StorageError.conflict(.stepUpUsed)
        }
        r.receipts[i].consumed = true
    }

    /// `AuditRepository.write`.
    static func audit(_ records: [AuditRecord], _ r: inout Rows, at: Date) {
        for a in records {
            let actorUsername = r.users.first { $0.record.id == a.actor }?.record.username
            r.audit.append(AuditEntry(id: Int64(r.audit.count + 1), at: at, actor: a.actor, action: a.action, subject: a.subject,
                                      detail: a.detail, actorUsername: actorUsername))
        }
    }

    /// `AuditTemplate.rows`: one line per affected row, its subject the row's, the row's members winning.
    static func audit(_ template: AuditTemplate, subject: String, members: [(key: String, value: JSONValue)] = [],
                      _ r: inout Rows, at: Date) {
        let kept = (template.detail.objectValue ?? []).filter { m in !members.contains { $0.key == m.key } }
        audit([AuditRecord(actor: template.actor ?? subject, action: template.action, subject: subject, detail: .object(kept + members))],
              &r, at: at)
    }

    /// `OutboxRepository.write`: each event stored, with one delivery per live webhook endpoint
    /// subscribed to its type at write time (`.webhooks`), or its direct delivery.
    static func write(_ events: [OutboxEvent], _ r: inout Rows, at: Date) {
        for e in events {
            var targets: [String] = []
            var direct = false
            for fan in e.fanOut {
                switch fan {
                case .webhooks:
                    targets += r.endpoints.filter { $0.deletedAt == nil && $0.record.events.contains(e.type) }.map(\.record.id)
                case .direct:
                    direct = true
                }
            }
            // No endpoint subscribed and no other fan-out: the event is not stored at all.
            guard direct || !targets.isEmpty else { continue }
            r.events.append(e)
            for t in targets { r.deliveries.append(Delivery(seq: r.deliveries.count + 1, target: t, event: e, nextAttemptAt: at)) }
        }
    }

    /// `ConfigRepository.syncAppOrigins`: origins with source `app` are exactly those the apps need
    /// (an Android fingerprint's, `https://<rpId>` for an rpId with an iOS app); an origin added by
    /// hand stays as it is. Each origin added or dropped is audited.
    static func syncAppOrigins(_ audit: AppOriginAudit, _ r: inout Rows, at: Date) {
        var needed = Set<String>()
        for app in r.apps {
            if app.platform == "android" { for fp in app.fingerprints { needed.insert("android:apk-key-hash:" + fp) } }
            if app.platform == "ios" { needed.insert("https://" + app.rpId) }
        }
        for origin in needed.sorted() where r.origins[origin] == nil {
            r.origins[origin] = "app"
            Self.audit(audit.added, subject: origin, &r, at: at)
        }
        for (origin, source) in r.origins.sorted(by: { $0.key < $1.key }) where source == "app" && !needed.contains(origin) {
            r.origins[origin] = nil
            Self.audit(audit.removed, subject: origin, &r, at: at)
        }
    }

    // MARK: What a test sets up

    @discardableResult
    func addUser(_ username: String, externalId: String? = nil, admin: Bool = false) -> UserRecord {
        let user = UserRecord(id: "usr_" + username, userHandle: Array(username.utf8), username: username, displayName: username.capitalized)
        let at = now()
        rows.withLock { r in
            r.users.append(User(record: user, externalId: externalId, createdAt: at))
            if admin { r.admins.append(Admin(userId: user.id, createdAt: at, createdBy: "test")) }
        }
        return user
    }

    /// A receipt an admin change may redeem once.
    func approval(_ redemption: StepUpRedemption) { rows.withLock { $0.receipts.append((redemption, false)) } }

    func addPasskey(_ user: UserRecord, id: [UInt8], name: String, createdAt: Date) {
        rows.withLock { r in
            r.passkeys.append(CredentialRecord(id: id, userId: user.id, publicKey: [1], alg: -7, signCount: 0, aaguid: [UInt8](repeating: 0, count: 16),
                                               transports: ["internal"], backupEligible: true, backedUp: true, attestationFormat: "none",
                                               attestationType: "none", name: name, createdAt: createdAt))
        }
    }

    func addSession(_ user: UserRecord, id: String, createdAt: Date) {
        rows.withLock { r in
            r.sessions.append(Session(record: SessionRecord(id: id, method: .passkey, credentialId: nil, createdAt: createdAt, lastUsedAt: createdAt,
                                                            authTime: createdAt, browser: false, clientId: nil, clientName: nil),
                                      userId: user.id))
        }
    }
}
