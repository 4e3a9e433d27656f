import Foundation
import JSON
@testable import LatchkeyServer
@testable import Storage
import Synchronization

/// `CIBAStore` in memory, on a test's clock, keeping PostgreSQL's rules (`Storage/CIBARepository`):
/// the limits' windows, a fourth pending request expiring the oldest, a decision only while pending
/// and unexpired, a step-up used once, a poll's compare-and-set and its interval's growth, the
/// tokens once and only while the approving session stands.
final class InMemoryCIBAStore: CIBAStore, Sendable {
    struct Request {
        var record: CIBANewRequest
        var status: CIBARequestRecord.Status = .pending
        var createdAt: Date
        var expiresAt: Date
        var decidedAt: Date? = nil
        var interval: Int
        var polls = 0
        var lastPoll: Date? = nil
        var grant: JSONValue? = nil
        var approvingFamily: String? = nil
    }

    struct Rows {
        var accounts: [String: String] = [:]  // username → user id
        var clientNames: [String: String] = [:]
        var requests: [String: Request] = [:]
        var order: [String] = []
        var unknownUsers: [(clientId: String, at: Date)] = []
        var usedStepUps: Set<String> = []
        var endedFamilies: Set<String> = []
        var audit: [AuditRecord] = []
        var events: [OutboxEvent] = []
        var issuedFamilies: [String] = []
        /// A device key's step-up (by its jti) → the session that enrolled the key.
        var stepUpKeySessions: [String: String] = [:]
        /// Ping notifications made due (event id → when).
        var pingsDue: [String: Date] = [:]
    }

    let rows = Mutex(Rows())
    let now: @Sendable () -> Date

    init(now: @escaping @Sendable () -> Date) { self.now = now }

    func addAccount(_ username: String, id: String) { rows.withLock { $0.accounts[username] = id } }
    func addClient(_ id: String, name: String) { rows.withLock { $0.clientNames[id] = name } }
    func endFamily(_ id: String) { rows.withLock { $0.endedFamilies.insert(id) } }
    /// The step-up `jti` was made by a live device key that session `sessionId` enrolled.
    func deviceKeyStepUp(_ jti: String, enrolledBy sessionId: String) { rows.withLock { $0.stepUpKeySessions[jti] = sessionId } }
    var pingsDue: [String: Date] { rows.withLock { $0.pingsDue } }
    var events: [OutboxEvent] { rows.withLock { $0.events } }
    var audit: [AuditRecord] { rows.withLock { $0.audit } }

    private func record(_ r: Request, _ t: Rows, at now: Date) -> CIBARequestRecord {
        var record = CIBARequestRecord(id: r.record.id, clientId: r.record.clientId, clientName: t.clientNames[r.record.clientId] ?? "",
                                       userId: r.record.userId, scope: r.record.scope, bindingMessage: r.record.bindingMessage,
                                       authorizationDetails: r.record.authorizationDetails, acrValues: r.record.acrValues,
                                       notificationToken: r.record.notificationToken, status: r.status, live: r.expiresAt > now,
                                       createdAt: r.createdAt, expiresAt: r.expiresAt)
        record.pingEvent = r.record.pingEvent
        return record
    }

    func authorizeRead(clientId: String, username: String?, userId: String?) throws(StorageError) -> CIBAAuthorizeRead {
        let now = now()
        return rows.withLock { t in
            let user = username.flatMap { t.accounts[$0] } ?? userId.flatMap { id in t.accounts.values.contains(id) ? id : nil }
            let mine = t.order.compactMap { t.requests[$0] }.filter { $0.record.userId == user }
            let denials = mine.filter { $0.record.clientId == clientId && $0.status == .denied }.compactMap(\.decidedAt)
            let blocked = denials.contains { d in
                d > now.addingTimeInterval(-86400) && denials.filter { $0 <= d && $0 >= d.addingTimeInterval(-86400) }.count >= 3
            }
            return CIBAAuthorizeRead(userId: user,
                                     unknownUsersLastHour: t.unknownUsers.filter { $0.clientId == clientId && $0.at > now.addingTimeInterval(-3600) }.count,
                                     pendingForUser: mine.filter { $0.status == .pending && $0.expiresAt > now }.count,
                                     clientRequestsLastHour: mine.filter { $0.record.clientId == clientId && $0.createdAt > now.addingTimeInterval(-3600) }.count,
                                     blocked: blocked)
        }
    }

    func unknownUser(clientId: String) throws(StorageError) {
        let now = now()
        rows.withLock { $0.unknownUsers.append((clientId, now)) }
    }

    func store(_ request: CIBANewRequest, maxPending: Int, audit: AuditRecord, events: [OutboxEvent], now due: Date) throws(StorageError) {
        let now = now()
        rows.withLock { t in
            let pending = t.order.filter { id in
                t.requests[id].map { $0.record.userId == request.userId && $0.status == .pending && $0.expiresAt > now } ?? false
            }
            for id in pending.dropLast(max(0, maxPending - 1)) {
                t.requests[id]?.status = .expired
                t.requests[id]?.decidedAt = now
                if let ping = t.requests[id]?.record.pingEvent { t.pingsDue[ping] = due }
            }
            t.requests[request.id] = Request(record: request, createdAt: now, expiresAt: now.addingTimeInterval(Double(request.expiresInSeconds)),
                                             interval: request.intervalSeconds)
            t.order.append(request.id)
            t.audit.append(audit)
            t.events += events
        }
    }

    func pending(userId: String) throws(StorageError) -> [CIBARequestRecord] {
        let now = now()
        return rows.withLock { t in
            t.order.compactMap { t.requests[$0] }.filter { $0.record.userId == userId && $0.status == .pending && $0.expiresAt > now }
                .map { record($0, t, at: now) }
        }
    }

    func request(id: String) throws(StorageError) -> CIBARequestRecord? {
        let now = now()
        return rows.withLock { t in t.requests[id].map { record($0, t, at: now) } }
    }

    func decide(id: String, userId: String, grant: JSONValue?, approvers: OAuthApprovers?, redeeming: StepUpRedemption?,
                keyOfSession: String?, audit: AuditRecord, events: [OutboxEvent], now due: Date) throws(StorageError) -> CIBADecision {
        let now = now()
        return try rows.withLock { (t: inout Rows) throws(StorageError) -> CIBADecision in
            guard let r = t.requests[id], r.record.userId == userId, r.status == .pending, r.expiresAt > now else { return .notPending }
            if let keyOfSession, let redeeming, t.stepUpKeySessions[redeeming.jti] != keyOfSession { return .notTheSessionsKey }
            if let redeeming {
                guard !t.usedStepUps.contains(redeeming.jti) else { throw StorageError.conflict(.stepUpUsed) }
                t.usedStepUps.insert(redeeming.jti)
            }
            if let ping = r.record.pingEvent { t.pingsDue[ping] = due }
            t.requests[id]?.status = grant == nil ? .denied : .approved
            t.requests[id]?.decidedAt = now
            t.requests[id]?.grant = grant
            t.requests[id]?.approvingFamily = approvers?.familyId
            t.audit.append(audit)
            t.events += events
            return .decided
        }
    }

    func pollRead(id: String) throws(StorageError) -> CIBAPollRead? {
        let now = now()
        return rows.withLock { t in
            t.requests[id].map { r in
                CIBAPollRead(clientId: r.record.clientId, userId: r.record.userId, status: r.status, live: r.expiresAt > now,
                             intervalSeconds: r.interval, sinceLastPoll: r.lastPoll.map { now.timeIntervalSince($0) }, polls: r.polls, grant: r.grant)
            }
        }
    }

    func polled(id: String, polls: Int, growBy: Int) throws(StorageError) -> Bool {
        let now = now()
        return rows.withLock { t in
            guard t.requests[id]?.polls == polls else { return false }
            t.requests[id]?.polls += 1
            t.requests[id]?.lastPoll = now
            t.requests[id]?.interval += growBy
            return true
        }
    }

    func issue(id: String, clientId: String, familyId: String, refreshHash: [UInt8], ttlSeconds: Int,
               issuedAudit: AuditRecord) throws(StorageError) -> CIBAIssue {
        let now = now()
        return rows.withLock { t in
            guard let r = t.requests[id], r.record.clientId == clientId, r.status == .approved, r.expiresAt > now else { return .gone }
            t.requests[id]?.status = .issued
            if let family = r.approvingFamily, t.endedFamilies.contains(family) { return .approverRevoked }
            t.issuedFamilies.append(familyId)
            t.audit.append(issuedAudit)
            return .started(userId: r.record.userId, grant: r.grant ?? .object([]))
        }
    }
}
