import Crypto
import DeviceKeys
import Foundation
import JSON
@testable import LatchkeyServer
@testable import Storage
import Testing

/// SPEC "Quorum approvals": the state machine over the in-memory store, on a clock the test steps:
/// distinct accounts counted once, the subject never, the requester only when the policy says so,
/// the time lock, expiry, veto (also by the mailed link), single use and break glass.
@Suite("Quorum approvals, in memory")
struct ApprovalServiceTests {
    /// Opaque user ids (22 base64url characters, 16 bytes).
    static func user(_ n: UInt8) -> String { Base64URL.encode(Array(repeating: n, count: 16)) }
    static let requester = user(1), ana = user(2), ben = user(3), cy = user(4), subject = user(5), stranger = user(6)

    struct World {
        let clock = ManualClock(start: Date(timeIntervalSince1970: 1_760_000_000))
        let store: InMemoryApprovalStore
        let service: ApprovalService
        var jti = 0

        init() {
            let clock = self.clock
            store = InMemoryApprovalStore(now: clock.now)
            let runtime = clock.runtime(random: SeededRandom(seed: 35).bytes)
            service = ApprovalService(store: store, mail: RecordingApprovalMail(), events: OutboxEvents(runtime: runtime, maxAgeSeconds: 3600),
                                      runtime: runtime)
            for u in [requester, ana, ben, cy, stranger] { store.addUser(u) }
            store.addUser(subject, email: "subject@approvals.test")
        }

        func policy(_ name: String = "pay", approvers: [JSONValue] = [.object([("user", .string(ana))]), .object([("user", .string(ben))]),
                                                                        .object([("user", .string(cy))])],
                    needed: Int = 2, delay: Int = 0, expires: Int = 3600, notifyOwner: Bool = false, breakGlass: Bool = false,
                    requesterCounts: Bool = true, requesters: [JSONValue] = [.object([("user", .string(requester))])]) throws {
            let body: JSONValue = .object([("approvers", .array(approvers)), ("requesters", .array(requesters)),
                                           ("needed", .number(Double(needed))), ("delay", .number(Double(delay))),
                                           ("expires", .number(Double(expires))), ("notifyOwner", .bool(notifyOwner)),
                                           ("breakGlass", .bool(breakGlass)), ("requesterCounts", .bool(requesterCounts))])
            _ = try service.setPolicy(try SetApprovalPolicy(name: name, body: body), by: .adminKey)
        }

        func open(_ policy: String = "pay", by: String = requester, subject: String? = nil,
                  action: JSONValue = .object([("type", "payment"), ("amount", 200)])) throws -> ApprovalView {
            var members: [(key: String, value: JSONValue)] = [("policy", .string(policy)), ("action", action)]
            if let subject { members.append(("subject", .string(subject))) }
            return try service.open(try OpenApproval(.object(members)), requester: by)
        }

        /// `user` approves with a fresh step-up for exactly this approval.
        mutating func approve(_ id: String, by user: String) throws -> ApprovalView {
            jti += 1
            let (_, action) = try service.voteNeed(id: id, caller: user)
            let redemption = store.stepUp(user, action.hash, jti: "jti-\(jti)")
            return try service.approve(id: id, caller: user, step: (redemption, "rcpt-\(jti)"), loaded: nil)
        }

        func events(_ type: EventType) -> Int { store.snapshot.events.filter { $0.type == type }.count }
    }

    @Test("policies are parsed strictly: unknown or missing members, wrong types and ranges, break glass with a quorum → 400")
    func strictPolicies() throws {
        let w = World()
        let good: [(key: String, value: JSONValue)] = [
            ("approvers", .array([.object([("role", "admin")])])), ("requesters", .array([.object([("user", .string(Self.requester))])])),
            ("needed", 2), ("delay", 0), ("expires", 3600), ("notifyOwner", false), ("breakGlass", false), ("requesterCounts", true),
        ]
        func with(_ key: String, _ value: JSONValue?) -> JSONValue {
            .object(good.compactMap { $0.key == key ? value.map { (key, $0) } : $0 } + (good.contains { $0.key == key } ? [] : [(key, value ?? .null)]))
        }
        _ = try SetApprovalPolicy(name: "ok", body: .object(good))
        for bad in [with("needed", nil), with("needed", 0), with("needed", 1.5), with("needed", "2"), with("delay", -1),
                    with("expires", 10), with("delay", 7200), with("approvers", .array([])), with("approvers", .array([.object([("role", "root")])])),
                    with("approvers", .array([.object([("user", "not-an-id")])])), with("requesters", nil), with("notifyOwner", 1),
                    with("extra", true), with("breakGlass", true),
                    with("approvers", .array([.object([("user", .string(Self.ana))])]))] {
            expectRefusal(.invalidRequest) { _ = try SetApprovalPolicy(name: "p", body: bad) }
        }
        expectRefusal(.invalidRequest) { _ = try SetApprovalPolicy(name: "no spaces", body: .object(good)) }
        #expect(w.store.snapshot.policies.isEmpty)
    }

    @Test("only a requester the policy names opens; an unknown subject is 400; the answer is collecting with no approvals")
    func opening() throws {
        let w = World()
        try w.policy()
        expectRefusal(.forbidden) { _ = try w.open(by: Self.ana) }
        expectRefusal(.forbidden) { _ = try w.open("nope") }
        expectRefusal(.invalidRequest) { _ = try w.open(subject: Self.user(99)) }
        let v = try w.open(subject: Self.subject)
        #expect(v.state == .collecting && v.approval.entries.isEmpty && v.approval.needed == 2)
        #expect(v.approval.actionHash == (try StepUpAction(.object([("type", "payment"), ("amount", 200)]))).hash)
        let rendered = ApprovalRenderer.opened(v)
        #expect(rendered.objectValue?.map(\.key) == ["id", "state", "needed", "approvals", "actionHash", "expiresAt"])
        #expect(w.events(.approvalRequested) == 1 && w.store.snapshot.mail.isEmpty, "no notice unless the policy asks for it")
        #expect(w.store.snapshot.audit.last?.action == "approval.opened")
    }

    @Test("quorum counts accounts: one account approving twice counts once; the subject and a stranger cannot approve")
    func distinctAccounts() throws {
        var w = World()
        try w.policy(approvers: [.object([("user", .string(Self.ana))]), .object([("user", .string(Self.ben))]),
                                 .object([("user", .string(Self.cy))]), .object([("user", .string(Self.subject))])])
        let id = try w.open(subject: Self.subject).approval.id
        #expect(try w.approve(id, by: Self.ana).state == .collecting)
        expectRefusal(.conflict) { _ = try w.approve(id, by: Self.ana) }
        expectRefusal(.forbidden) { _ = try w.approve(id, by: Self.subject) }
        expectRefusal(.notFound) { _ = try w.approve(id, by: Self.stranger) }
        let done = try w.approve(id, by: Self.ben)
        #expect(done.state == .approved && done.approval.entries.map(\.userId) == [Self.ana, Self.ben])
        #expect(w.events(.approvalApproved) == 1)
        expectRefusal(.conflict, "complete: it takes no more approvals") { _ = try w.approve(id, by: Self.cy) }
    }

    @Test("a step-up is redeemed with the vote, once: the same token again is refused")
    func stepUpOnce() throws {
        let w = World()
        try w.policy()
        let id = try w.open().approval.id
        let (_, action) = try w.service.voteNeed(id: id, caller: Self.ana)
        let r = w.store.stepUp(Self.ana, action.hash, jti: "once")
        _ = try w.service.approve(id: id, caller: Self.ana, step: (r, "rcpt"), loaded: nil)
        expectRefusal(.conflict) { _ = try w.service.approve(id: id, caller: Self.ana, step: (r, "rcpt"), loaded: nil) }
        expectRefusal(.stepUpRequired) { _ = try w.service.approve(id: id, caller: Self.ben, step: nil, loaded: nil) }
        let stolen = StepUpRedemption(jti: "never-stored", userId: Self.ben, actionHash: action.hash)
        expectRefusal(.stepUpRequired) { _ = try w.service.approve(id: id, caller: Self.ben, step: (stolen, "rcpt"), loaded: nil) }
        #expect(w.store.snapshot.approvals[id]?.entries.count == 1)
    }

    @Test("requesterCounts false: the requester may not approve its own approval; true: it counts")
    func requesterCounts() throws {
        var w = World()
        let both: [JSONValue] = [.object([("user", .string(Self.requester))]), .object([("user", .string(Self.ana))])]
        try w.policy("no-self", approvers: both, needed: 1, requesterCounts: false)
        try w.policy("self", approvers: both, needed: 1, requesterCounts: true)
        let a = try w.open("no-self").approval.id
        expectRefusal(.forbidden) { _ = try w.approve(a, by: Self.requester) }
        #expect(try w.approve(a, by: Self.ana).state == .approved)
        let b = try w.open("self").approval.id
        #expect(try w.approve(b, by: Self.requester).state == .approved)
    }

    @Test("the time lock: waiting until the delay has passed, then approved (its event written once, by whoever sees it first)")
    func delay() throws {
        var w = World()
        try w.policy(delay: 600)
        let id = try w.open().approval.id
        _ = try w.approve(id, by: Self.ana)
        let waiting = try w.approve(id, by: Self.ben)
        #expect(waiting.state == .waiting && waiting.approval.usableAt == w.clock.now().addingTimeInterval(600))
        let hash = waiting.approval.actionHash
        expectRefusal(.conflict) { _ = try w.service.consume(id: id, caller: Self.requester, ConsumeApproval(.object([("actionHash", .string(Base64URL.encode(hash)))]))) }
        #expect(w.events(.approvalApproved) == 0)
        w.clock.advance(600)
        #expect(try w.service.show(id: id, caller: Self.ana).state == .approved)
        #expect(try w.service.show(id: id, caller: Self.requester).state == .approved)
        #expect(w.events(.approvalApproved) == 1, "observed twice, announced once")
    }

    @Test("single use: the requester's consume with the right hash is 200 once, then 409; another hash is action_mismatch")
    func singleUse() throws {
        var w = World()
        try w.policy(needed: 1)
        let id = try w.open().approval.id
        let hash = try #require(w.store.snapshot.approvals[id]?.actionHash)
        func consume(_ h: [UInt8], by: String = Self.requester) throws -> ApprovalView {
            try w.service.consume(id: id, caller: by, ConsumeApproval(.object([("actionHash", .string(Base64URL.encode(h)))])))
        }
        expectRefusal(.conflict) { _ = try consume(hash) }
        _ = try w.approve(id, by: Self.ana)
        expectRefusal(.actionMismatch) { _ = try consume(Array(repeating: 7, count: 32)) }
        expectRefusal(.forbidden) { _ = try consume(hash, by: Self.ana) }
        #expect(try consume(hash).state == .used)
        expectRefusal(.conflict) { _ = try consume(hash) }
        #expect(try w.service.show(id: id, caller: Self.requester).state == .used)
        expectRefusal(.conflict) { _ = try w.service.veto(id: id, caller: Self.ana) }
    }

    @Test("expiry: no approval after expiresAt (409), the state expired, approval.expired written once")
    func expiry() throws {
        var w = World()
        try w.policy(expires: 120)
        let id = try w.open().approval.id
        _ = try w.approve(id, by: Self.ana)
        w.clock.advance(120)
        expectRefusal(.conflict) { _ = try w.approve(id, by: Self.ben) }
        #expect(try w.service.show(id: id, caller: Self.requester).state == .expired)
        #expect(w.events(.approvalExpired) == 1)
        expectRefusal(.conflict) { _ = try w.service.veto(id: id, caller: Self.ana) }
        #expect(w.events(.approvalExpired) == 1)
    }

    @Test("veto: by the subject or an approver, before use; never by the requester; the mailed link vetoes once without a session")
    func veto() throws {
        var w = World()
        try w.policy(delay: 300, notifyOwner: true)
        let first = try w.open(subject: Self.subject).approval.id
        expectRefusal(.forbidden) { _ = try w.service.veto(id: first, caller: Self.requester) }
        expectRefusal(.notFound) { _ = try w.service.veto(id: first, caller: Self.stranger) }
        #expect(try w.service.veto(id: first, caller: Self.subject).state == .vetoed)
        expectRefusal(.conflict) { _ = try w.approve(first, by: Self.ana) }
        #expect(w.events(.approvalVetoed) == 1)

        let second = try w.open(subject: Self.subject).approval.id
        let notice = try #require(w.store.snapshot.mail.last)
        let text = String(decoding: notice.message, as: UTF8.self)
        #expect(notice.recipient == "subject@approvals.test" && text.contains("X-Latchkey-Event: approval.requested"))
        // The link in the (quoted-printable) mail: the token follows `cancel=`.
        let flat = text.replacingOccurrences(of: "=\r\n", with: "").replacingOccurrences(of: "=3D", with: "=")
        let token = try #require(flat.components(separatedBy: "cancel=").last?.prefix { !$0.isWhitespace })
        _ = try w.approve(second, by: Self.ana)
        _ = try w.approve(second, by: Self.ben)
        expectRefusal(.notFound) { try w.service.veto(VetoByLink(.object([("cancelToken", "lkv_wrong")]))) }
        try w.service.veto(VetoByLink(.object([("cancelToken", .string(String(token)))])))
        #expect(try w.service.show(id: second, caller: Self.subject).state == .vetoed)
        expectRefusal(.notFound) { try w.service.veto(VetoByLink(.object([("cancelToken", .string(String(token)))]))) }
    }

    @Test("break glass: approved at once by one approver, marked, the subject mailed at once, approval.break_glass sent")
    func breakGlass() throws {
        var w = World()
        try w.policy("glass", needed: 1, breakGlass: true)
        let id = try w.open("glass", subject: Self.subject).approval.id
        #expect(w.store.snapshot.mail.isEmpty)
        let v = try w.approve(id, by: Self.cy)
        #expect(v.state == .approved && v.approval.breakGlass && v.approval.entries.first?.breakGlass == true)
        #expect(ApprovalRenderer.approval(v)["breakGlass"] == .bool(true))
        #expect(w.events(.approvalBreakGlass) == 1 && w.events(.approvalApproved) == 1)
        let mail = try #require(w.store.snapshot.mail.last)
        #expect(String(decoding: mail.message, as: UTF8.self).contains("X-Latchkey-Event: approval.break_glass"))
    }

    @Test("at most 10 approvals an hour per requester, then 429 with Retry-After")
    func hourlyLimit() throws {
        let w = World()
        try w.policy()
        for _ in 0..<10 { _ = try w.open() }
        do {
            _ = try w.open()
            Issue.record("the eleventh opened")
        } catch let error as ServiceError {
            #expect(error.code == .rateLimited && error.headers.contains { $0.0 == "Retry-After" })
        }
        w.clock.advance(3601)
        _ = try w.open()
    }

    @Test("GET shows the approval to the requester, the subject and the approvers, 404 to anyone else")
    func visibility() throws {
        let w = World()
        try w.policy(approvers: [.object([("role", "admin")])], needed: 1)
        w.store.addUser(Self.cy, admin: true)
        let id = try w.open(subject: Self.subject).approval.id
        for who in [Self.requester, Self.subject, Self.cy] { #expect(try w.service.show(id: id, caller: who).approval.id == id) }
        expectRefusal(.notFound) { _ = try w.service.show(id: id, caller: Self.ana) }
        let shown = ApprovalRenderer.approval(try w.service.show(id: id, caller: Self.cy))
        #expect(shown.objectValue?.map(\.key) == ["id", "policy", "state", "needed", "actionHash", "action", "display", "subject", "requester",
                                                  "approvals", "expiresAt", "usableAt", "breakGlass"])
        #expect(shown["action"] == .object([("amount", 200), ("type", "payment")]))
    }
}
