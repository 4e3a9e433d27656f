import Foundation
import JSON
@testable import LatchkeyServer
@testable import Storage
import Synchronization

/// `ApprovalStore` in memory, with `ApprovalRepository`'s rules: the requester's hourly limit
/// checked by the write, one count per account decided on the approval as it is now, the quorum's
/// state and time lock, the step-up redeemed once with the vote (and only with it), a cancel link
/// used once while its approval can be vetoed, a single use, each time-brought event once.
final class InMemoryApprovalStore: ApprovalStore {
    struct Tables {
        var users: Set<String> = []
        var admins: Set<String> = []
        var emails: [String: String] = [:]
        var policies: [String: ApprovalPolicyRecord] = [:]
        var approvals: [String: ApprovalRecord] = [:]
        var counted: [String: [String]] = [:]
        var cancelLinks: [[UInt8]: (approvalId: String, expiresAt: Date, used: Bool)] = [:]
        /// Step-up receipts not used yet (jti).
        var redeemable: Set<String> = []
        var audit: [AuditRecord] = []
        /// Approval events written: type and approval id.
        var events: [(type: EventType, approvalId: String)] = []
        var mail: [MailToSend] = []
    }

    let tables = Mutex(Tables())
    let now: @Sendable () -> Date

    init(now: @escaping @Sendable () -> Date) { self.now = now }

    func addUser(_ id: String, admin: Bool = false, email: String? = nil) {
        tables.withLock { t in
            t.users.insert(id)
            if admin { t.admins.insert(id) }
            if let email { t.emails[id] = email }
        }
    }

    /// A step-up `userId` made for `actionHash`, stored unused.
    func stepUp(_ userId: String, _ actionHash: [UInt8], jti: String) -> StepUpRedemption {
        tables.withLock { _ = $0.redeemable.insert(jti) }
        return StepUpRedemption(jti: jti, userId: userId, actionHash: actionHash)
    }

    var snapshot: Tables { tables.withLock { $0 } }

    func policies() throws(StorageError) -> [ApprovalPolicyRecord] { tables.withLock { $0.policies.values.sorted { $0.name < $1.name } } }

    func policy(name: String) throws(StorageError) -> ApprovalPolicyRecord? { tables.withLock { $0.policies[name] } }

    func setPolicy(name: String, document: String, by actor: String, audit: AuditRecord,
                   redeeming: StepUpRedemption?) throws(StorageError) -> Bool {
        try tables.withLock { t throws(StorageError) in
            if let r = redeeming { guard t.redeemable.remove(r.jti) != nil else { throw .conflict(.stepUpUsed) } }
            let created = t.policies[name] == nil
            t.policies[name] = ApprovalPolicyRecord(name: name, document: document, updatedAt: now(), updatedBy: actor)
            t.audit.append(audit)
            return created
        }
    }

    func deletePolicy(name: String, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> Bool {
        try tables.withLock { t throws(StorageError) in
            guard t.policies[name] != nil else { return false }
            if let r = redeeming { guard t.redeemable.remove(r.jti) != nil else { throw .conflict(.stepUpUsed) } }
            t.policies[name] = nil
            t.audit.append(audit)
            return true
        }
    }

    func openRead(policy: String, requester: String, subject: String?, since: Date) throws(StorageError) -> ApprovalOpenRead {
        tables.withLock { t in
            let recent = t.approvals.values.filter { $0.requester == requester && $0.createdAt > since }
            return ApprovalOpenRead(policy: t.policies[policy], requesterIsAdmin: t.admins.contains(requester),
                                    subjectExists: subject.map { t.users.contains($0) } ?? false, subjectEmail: subject.flatMap { t.emails[$0] },
                                    subjectLanguage: nil, openedSince: recent.count, oldestSince: recent.map(\.createdAt).min())
        }
    }

    func open(_ a: ApprovalRecord, limit: Int, since: Date, cancelHash: [UInt8]?, mail: [MailToSend], audit: AuditRecord,
              requested: ApprovalEventTemplate?) throws(StorageError) -> Bool {
        tables.withLock { t in
            guard t.approvals.values.filter({ $0.requester == a.requester && $0.createdAt > since }).count < limit else { return false }
            t.approvals[a.id] = a
            t.counted[a.id] = []
            if let cancelHash { t.cancelLinks[cancelHash] = (a.id, a.expiresAt, false) }
            t.mail += mail
            t.audit.append(audit)
            if let requested { t.events.append((requested.template.type, a.id)) }
            return true
        }
    }

    func read(id: String, caller: String) throws(StorageError) -> ApprovalRead? {
        tables.withLock { t in
            guard let a = t.approvals[id] else { return nil }
            return ApprovalRead(approval: a, callerIsAdmin: t.admins.contains(caller), subjectEmail: a.subject.flatMap { t.emails[$0] },
                                subjectLanguage: nil)
        }
    }

    func approve(id: String, userId: String, receiptId: String, now: Date, redeeming: StepUpRedemption, mail: [MailToSend],
                 audit: AuditRecord, approved: ApprovalEventTemplate, breakGlass: ApprovalEventTemplate?) throws(StorageError) -> ApprovalChange? {
        try tables.withLock { t throws(StorageError) in
            guard var a = t.approvals[id], a.state == .collecting, a.expiresAt > now, !(t.counted[id] ?? []).contains(userId) else { return nil }
            guard redeeming.userId == userId, t.redeemable.remove(redeeming.jti) != nil else { throw .conflict(.stepUpUsed) }
            t.counted[id, default: []].append(userId)
            a.entries.append(ApprovalEntryRecord(userId: userId, receiptId: receiptId, approvedAt: now, breakGlass: a.breakGlass))
            if (t.counted[id] ?? []).count >= a.needed {
                a.state = .waiting
                a.usableAt = now.addingTimeInterval(Double(a.delaySeconds))
                if a.delaySeconds == 0 {
                    a.announced = "approved"
                    t.events.append((approved.template.type, id))
                }
            }
            if let breakGlass { t.events.append((breakGlass.template.type, id)) }
            t.approvals[id] = a
            t.mail += mail
            t.audit.append(audit)
            return ApprovalChange(state: a.state, announced: a.announced, usableAt: a.usableAt)
        }
    }

    func veto(id: String, by: String, now: Date, audit: AuditRecord, vetoed: ApprovalEventTemplate) throws(StorageError) -> ApprovalChange? {
        tables.withLock { t in
            guard var a = t.approvals[id], [.collecting, .waiting].contains(a.state), a.expiresAt > now else { return nil }
            a.state = .vetoed
            a.announced = "vetoed"
            t.approvals[id] = a
            t.audit.append(audit)
            t.events.append((vetoed.template.type, id))
            return ApprovalChange(state: a.state, announced: a.announced, usableAt: a.usableAt)
        }
    }

    func veto(cancelHash: [UInt8], now: Date, audit: AuditTemplate, vetoed: ApprovalEventTemplate) throws(StorageError) -> String? {
        tables.withLock { t in
            guard let link = t.cancelLinks[cancelHash], !link.used, link.expiresAt > now, var a = t.approvals[link.approvalId],
                  [.collecting, .waiting].contains(a.state), a.expiresAt > now else { return nil }
            a.state = .vetoed
            a.announced = "vetoed"
            t.approvals[a.id] = a
            t.cancelLinks[cancelHash]?.used = true
            t.audit.append(AuditRecord(actor: a.subject ?? a.requester, action: audit.action, subject: a.subject ?? a.requester, detail: audit.detail))
            t.events.append((vetoed.template.type, a.id))
            return a.id
        }
    }

    func consume(id: String, requester: String, actionHash: [UInt8], now: Date, audit: AuditRecord,
                 approved: ApprovalEventTemplate) throws(StorageError) -> ApprovalChange? {
        tables.withLock { t in
            guard var a = t.approvals[id], a.requester == requester, a.actionHash == actionHash, a.state == .waiting,
                  let usable = a.usableAt, usable <= now, a.expiresAt > now else { return nil }
            if a.announced == "requested" { t.events.append((approved.template.type, id)) }
            a.state = .used
            a.announced = "used"
            t.approvals[id] = a
            t.audit.append(audit)
            return ApprovalChange(state: a.state, announced: a.announced, usableAt: a.usableAt)
        }
    }

    func pending(policy: String, now: Date, limit: Int) throws(StorageError) -> [ApprovalRecord] {
        tables.withLock { t in
            Array(t.approvals.values.filter { $0.policy == policy && [.collecting, .waiting].contains($0.state) && $0.expiresAt > now }
                .sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }.prefix(limit))
        }
    }

    func announce(id: String, from: String, to: String, event: ApprovalEventTemplate) throws(StorageError) -> Bool {
        tables.withLock { t in
            guard var a = t.approvals[id], a.announced == from else { return false }
            a.announced = to
            t.approvals[id] = a
            t.events.append((event.template.type, id))
            return true
        }
    }
}

/// Mail as the approvals service composes it, without a server; the texts kept in order.
final class RecordingApprovalMail: ApprovalMail {
    private let sent = Mutex<[String]>([])
    var texts: [String] { sent.withLock { $0 } }

    func compose(_ event: MailMessage.Event, to: EmailAddress, userId: String, language: String?,
                 _ render: (MailCatalog) -> (subject: String, text: String)) -> MailToSend {
        let (subject, text) = render(MailCatalog(language: language))
        let message = MailMessage(event: event, from: "latchkey@approvals.test", to: to.value, subject: subject, text: text, messageId: "m",
                                  date: Date(timeIntervalSince1970: 0))
        sent.withLock { $0.append(String(decoding: message.bytes, as: UTF8.self)) }
        let id = "mail_" + UUID().uuidString
        return MailToSend(id: id, recipient: to.value, message: message.bytes,
                          event: OutboxEvent(id: "evt_" + UUID().uuidString, type: .mailMessage, accountId: userId, data: .object([]),
                                             fanOut: [.direct(channel: .mail, target: id)], maxAgeSeconds: 60,
                                             createdAt: Date(timeIntervalSince1970: 0)))
    }

    func vetoLink(_ token: String) -> String { "https://approvals.test/?cancel=" + token }
}
