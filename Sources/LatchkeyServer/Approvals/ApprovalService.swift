import Crypto
import DeviceKeys
import Foundation
import JSON
import Storage

/// An approval's state as SPEC "Quorum approvals" names it: `approved` and `expired` follow from
/// the stored state and the time.
enum ApprovalState: String, Sendable {
    case collecting, waiting, approved, used, vetoed, expired
}

/// An approval as a caller sees it: the record and its state now.
struct ApprovalView: Sendable {
    let approval: ApprovalRecord
    let state: ApprovalState
}

/// A policy with its name (the admin API's resource).
struct NamedApprovalPolicy: Sendable {
    let name: String
    let policy: ApprovalPolicy
}

/// Quorum approvals (SPEC "Quorum approvals"): policies (admin changes), and approvals that collect
/// distinct accounts' step-ups on one action, wait out a time lock the subject can stop, and are
/// used once. Decides purely from one read (time and randomness from `Runtime`) and makes one write.
///
/// `approved` and `expired` follow from time; their events (`approval.approved`,
/// `approval.expired`) are written once, by the first request that finds the approval in that
/// state: the approval that completes a quorum without delay, a use, or any read or refused change
/// of it afterwards (`announce`).
final class ApprovalService: Sendable {
    let store: any ApprovalStore
    let mail: any ApprovalMail
    let events: OutboxEvents
    let runtime: Runtime
    /// `LATCHKEY_ADMIN_QUORUM`: above 1, the built-in policy `latchkey.admin` (`adminPolicy`).
    let adminQuorum: Int

    /// SPEC: a requester may open at most 10 approvals an hour.
    static let openedPerHour = 10

    init(store: any ApprovalStore, mail: any ApprovalMail, events: OutboxEvents, runtime: Runtime, adminQuorum: Int = 1) {
        self.store = store
        self.mail = mail
        self.events = events
        self.runtime = runtime
        self.adminQuorum = adminQuorum
    }

    /// SPEC "Admin quorum": the policy every admin change is approved under when the quorum is above 1.
    static let adminPolicyName = "latchkey.admin"

    var adminPolicy: ApprovalPolicy? {
        guard adminQuorum > 1 else { return nil }
        return ApprovalPolicy(approvers: [.admins], requesters: [.admins], needed: adminQuorum, delay: 0, expires: 86_400, notifyOwner: false,
                              breakGlass: false, requesterCounts: true)
    }

    // MARK: Policies (admin changes)

    func policies() throws(ServiceError) -> [NamedApprovalPolicy] {
        var out: [NamedApprovalPolicy] = []
        for record in try storage({ () throws(StorageError) in try store.policies() }) { out.append(try Self.named(record)) }
        return out
    }

    func policy(name: String) throws(ServiceError) -> NamedApprovalPolicy {
        guard ApprovalPolicy.isName(name), let found = try storage({ () throws(StorageError) in try store.policy(name: name) }) else {
            throw ServiceError.notFound("approval policy")
        }
        return try Self.named(found)
    }

    /// `PUT /admin/v1/approval-policies/{name}`: true when the policy was created.
    func setPolicy(_ command: SetApprovalPolicy, by caller: AdminCaller) throws(ServiceError) -> (NamedApprovalPolicy, created: Bool) {
        let document = String(decoding: command.policy.json.serialized(), as: UTF8.self)
        let created = try storage { () throws(StorageError) in
            try store.setPolicy(name: command.name, document: document, by: caller.actor,
                                audit: caller.record(.approvalPolicySet, subject: command.name, detail: [("policy", command.policy.json)]),
                                redeeming: caller.redemption)
        }
        return (NamedApprovalPolicy(name: command.name, policy: command.policy), created)
    }

    /// `DELETE /admin/v1/approval-policies/{name}`; approvals opened under it keep their copy.
    func deletePolicy(name: String, by caller: AdminCaller) throws(ServiceError) {
        guard ApprovalPolicy.isName(name), try storage({ () throws(StorageError) in
            try store.deletePolicy(name: name, audit: caller.record(.approvalPolicyDeleted, subject: name), redeeming: caller.redemption)
        }) else { throw ServiceError.notFound("approval policy") }
    }

    static func named(_ r: ApprovalPolicyRecord) throws(ServiceError) -> NamedApprovalPolicy {
        guard let policy = ApprovalPolicy(stored: r.document) else { throw ServiceError(.internalError, "a stored approval policy cannot be read") }
        return NamedApprovalPolicy(name: r.name, policy: policy)
    }

    // MARK: Opening

    /// The window of the requester's opening limit (`openedPerHour`).
    static let openingWindow: TimeInterval = 3600

    /// `POST /v1/approvals` by `requester` (a not-held passkey session): 403 unless the policy
    /// names the caller as a requester, 400 for an unknown subject, 429 past ten an hour.
    /// `loaded`: the opening's read as the caller's resolution made it (`GuardPreload.approvalOpening`),
    /// used when it was made for this command and requester.
    func open(_ command: OpenApproval, requester: String, loaded: LoadedOpening? = nil) throws(ServiceError) -> ApprovalView {
        let now = clock()
        let since: Date, read: ApprovalOpenRead
        if let loaded, loaded.policy == command.policy, loaded.subject == command.subject, loaded.requester == requester {
            (since, read) = (loaded.since, loaded.read)
        } else {
            since = now.addingTimeInterval(-Self.openingWindow)
            read = try storage { () throws(StorageError) in
                try store.openRead(policy: command.policy, requester: requester, subject: command.subject, since: since)
            }
        }
        var stored = read.policy
        if command.policy == Self.adminPolicyName, let builtIn = adminPolicy {
            // Only admin changes are approved under it (the action an admin change's guard builds).
            let adminTypes = [GatedActionType.adminChange, GatedActionType.adminExport, GatedActionType.adminImport]
            guard let type = command.action.value["type"]?.stringValue, adminTypes.contains(type) else {
                throw ServiceError.invalid("the policy latchkey.admin approves admin changes: {\"type\":\"latchkey.admin\",\"method\",\"path\",\"body\"}, "
                                           + "an export {\"type\":\"latchkey.admin.export\"} or an import {\"type\":\"latchkey.admin.import\",\"sha256\"}")
            }
            stored = ApprovalPolicyRecord(name: Self.adminPolicyName, document: String(decoding: builtIn.json.serialized(), as: UTF8.self),
                                          updatedAt: now, updatedBy: "LATCHKEY_ADMIN_QUORUM")
        }
        guard let stored, let policy = ApprovalPolicy(stored: stored.document),
              policy.isRequester(requester, isAdmin: read.requesterIsAdmin) else {
            throw ServiceError(.forbidden, "no approval policy named \(command.policy) names you as a requester")
        }
        if command.subject != nil, !read.subjectExists { throw ServiceError.invalid("subject is not a user id this server knows") }
        if read.openedSince >= Self.openedPerHour { throw rateLimited(oldest: read.oldestSince, now: now) }
        let approval = ApprovalRecord(
            id: runtime.identifier(), policy: stored.name, policyDocument: stored.document, requester: requester, subject: command.subject,
            action: String(decoding: command.action.canonical, as: UTF8.self), actionHash: command.action.hash,
            display: command.display.map { String(decoding: $0.serialized(), as: UTF8.self) }, needed: policy.needed, delaySeconds: policy.delay,
            breakGlass: policy.breakGlass, createdAt: now, expiresAt: now.addingTimeInterval(Double(policy.expires)))
        // SPEC: `notifyOwner` mails the subject's verified address, with a link that vetoes.
        var notice: [MailToSend] = []
        var cancelHash: [UInt8]? = nil
        if policy.notifyOwner, let subject = command.subject, let to = read.subjectEmail.flatMap({ EmailAddress($0) }) {
            let cancel = OpaqueSecret(prefix: Self.cancelTokenPrefix, runtime: runtime)
            cancelHash = cancel.hash
            let link = mail.vetoLink(cancel.token)
            let usable = now.addingTimeInterval(Double(policy.delay))
            notice.append(mail.compose(.approvalRequested, to: to, userId: subject, language: read.subjectLanguage) { l in
                (l[.approvalRequestedSubject], l[.approvalRequestedBody, ["action": Self.describe(command.action), "policy": stored.name,
                                                                          "needed": String(policy.needed), "date": l.dateTime(usable),
                                                                          "link": link]])
            })
        }
        let audit = AuditRecord(.approvalOpened, actor: requester, subject: approval.id, detail: [
            ("policy", .string(stored.name)), ("actionHash", .string(Base64URL.encode(approval.actionHash))),
            ("subject", command.subject.map(JSONValue.string) ?? .null), ("notified", .bool(!notice.isEmpty)),
        ])
        let opened = try storage { () throws(StorageError) in
            try store.open(approval, limit: Self.openedPerHour, since: since, cancelHash: cancelHash, mail: notice, audit: audit,
                           requested: template(.approvalRequested))
        }
        guard opened else { throw rateLimited(oldest: read.oldestSince, now: now) }
        return ApprovalView(approval: approval, state: .collecting)
    }

    static let cancelTokenPrefix = "lkv_"

    func rateLimited(oldest: Date?, now: Date) -> ServiceError {
        let wait = oldest.map { max(1, Int(($0.addingTimeInterval(3600).timeIntervalSince(now)).rounded(.up))) } ?? 3600
        return ServiceError(.rateLimited, "at most \(Self.openedPerHour) approvals an hour may be opened", headers: [("Retry-After", String(wait))])
    }

    /// What the subject's notice says is asked: the action's type, or its canonical JSON when it has none to show.
    static func describe(_ action: StepUpAction) -> String {
        action.value["type"]?.stringValue ?? String(decoding: action.canonical, as: UTF8.self)
    }

    /// The approval `id` if it is `userId`'s own, approved now under `latchkey.admin`, for exactly
    /// `action` (an admin change's guard, SPEC "Admin quorum"); else 403 `approval_required`.
    func approvedAdminChange(id: String, userId: String, action: StepUpAction, loaded: LoadedApproval? = nil) throws(ServiceError) -> String {
        let refused = ServiceError(.approvalRequired, "Latchkey-Approval must name your approved latchkey.admin approval of exactly this change")
        guard Identifiers.opaque(id) != nil else { throw refused }
        let found: ApprovalRead?
        if let loaded, loaded.id == id { found = loaded.read } else {
            found = try storage { () throws(StorageError) in try store.read(id: id, caller: userId) }
        }
        guard let read = found else { throw refused }
        let a = read.approval
        guard a.requester == userId, a.policy == Self.adminPolicyName, constantTimeEquals(a.actionHash, action.hash),
              Self.state(a, at: clock()) == .approved else { throw refused }
        return a.id
    }

    /// `GET /admin/v1/approvals`: the admin changes waiting for admins' approvals (policy
    /// `latchkey.admin`), oldest first, each with who approved it and their receipts.
    func pendingAdminChanges() throws(ServiceError) -> [ApprovalView] {
        let now = clock()
        return try storage { () throws(StorageError) in try store.pending(policy: Self.adminPolicyName, now: now, limit: 200) }
            .map { ApprovalView(approval: $0, state: Self.state($0, at: now)) }
    }

    // MARK: Reading

    /// `GET /v1/approvals/{id}`: for the requester, the subject and the policy's approvers; 404 for anyone else.
    func show(id: String, caller: String) throws(ServiceError) -> ApprovalView {
        let read = try visible(id: id, caller: caller)
        return try observed(read)
    }

    /// The approval `id` if `caller` may see it, else 404 (SPEC: "unknown, or not this account's").
    /// `loaded`: the approval as the caller's resolution read it for this caller, used when it is
    /// this one (nil there: none with that id); else it is read here.
    func visible(id: String, caller: String, loaded: LoadedApproval? = nil) throws(ServiceError) -> ApprovalRead {
        let found: ApprovalRead?
        if let loaded, loaded.id == id { found = loaded.read } else {
            found = try storage { () throws(StorageError) in try store.read(id: id, caller: caller) }
        }
        guard let read = found, Self.sees(read, caller: caller) else { throw ServiceError.notFound("approval") }
        return read
    }

    static func sees(_ read: ApprovalRead, caller: String) -> Bool {
        let a = read.approval
        return a.requester == caller || a.subject == caller || policy(a).namesApprover(caller, isAdmin: read.callerIsAdmin)
    }

    /// The approval's policy as it was opened (a stored copy that no longer parses approves nobody).
    static func policy(_ a: ApprovalRecord) -> ApprovalPolicy {
        ApprovalPolicy(stored: a.policyDocument)
            ?? ApprovalPolicy(approvers: [], requesters: [], needed: a.needed, delay: a.delaySeconds, expires: 0, notifyOwner: false,
                              breakGlass: a.breakGlass, requesterCounts: false)
    }

    /// SPEC: the subject never counts; the requester counts only when the policy says so.
    static func mayApprove(_ read: ApprovalRead, caller: String) -> Bool {
        let a = read.approval
        let policy = policy(a)
        return policy.namesApprover(caller, isAdmin: read.callerIsAdmin) && a.subject != caller
            && (policy.requesterCounts || a.requester != caller)
    }

    static func state(_ a: ApprovalRecord, at now: Date) -> ApprovalState {
        switch a.state {
        case .used: return .used
        case .vetoed: return .vetoed
        case .collecting: return now >= a.expiresAt ? .expired : .collecting
        case .waiting:
            if now >= a.expiresAt { return .expired }
            return (a.usableAt.map { now >= $0 } ?? false) ? .approved : .waiting
        }
    }

    /// The view now, with the event of a state time brought about written if nobody wrote it yet.
    func observed(_ read: ApprovalRead) throws(ServiceError) -> ApprovalView {
        var a = read.approval
        let state = Self.state(a, at: clock())
        if let (to, type) = Self.unannounced(a, state) {
            let from = a.announced
            _ = try storage { () throws(StorageError) in try store.announce(id: a.id, from: from, to: to, event: template(type)) }
            a.announced = to
        }
        return ApprovalView(approval: a, state: state)
    }

    /// `approval.approved` once the delay is over, `approval.expired` once expired, if not written yet.
    static func unannounced(_ a: ApprovalRecord, _ state: ApprovalState) -> (String, EventType)? {
        switch (state, a.announced) {
        case (.approved, "requested"): ("approved", .approvalApproved)
        case (.expired, "requested"), (.expired, "approved"): ("expired", .approvalExpired)
        default: nil
        }
    }

    /// `Runtime.now` in whole milliseconds: what is stored (microseconds) reads back as the same
    /// instant, so a state computed from the write's answer agrees with one computed on a later read.
    func clock() -> Date {
        Date(timeIntervalSince1970: (runtime.now().timeIntervalSince1970 * 1000).rounded(.down) / 1000)
    }

    func template(_ type: EventType) -> ApprovalEventTemplate { ApprovalEventTemplate(events.template(type)) }

    /// A refusal because of the approval's state (409), after writing what time brought about.
    func conflict(_ read: ApprovalRead, _ detail: (ApprovalState) -> String) throws(ServiceError) -> ServiceError {
        let view = try observed(read)
        return ServiceError(.conflict, detail(view.state))
    }
}

/// An opening's read as a route's guard made it with the caller's standing
/// (`GuardPreload.approvalOpening`): for this policy, requester and subject, counting since `since`.
struct LoadedOpening: Sendable {
    let policy: String
    let requester: String
    let subject: String?
    let since: Date
    let read: ApprovalOpenRead
}

/// An approval as a route's guard read it with the caller's standing (`GuardPreload.approval`):
/// the id asked for and what was found (nil: no approval has it).
struct LoadedApproval: Sendable {
    let id: String
    let read: ApprovalRead?
}
