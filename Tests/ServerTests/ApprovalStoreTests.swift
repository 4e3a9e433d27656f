import Crypto
import DeviceKeys
import Foundation
import JSON
@testable import LatchkeyServer
import PostgreSQL
@testable import Storage
import Testing
import WebAuthnTesting

/// SPEC "Quorum approvals" on PostgreSQL (`ApprovalRepository`) with a clock the test steps: the
/// time lock, the events time brings about written once however often they are observed, expiry,
/// the subject's mailed veto link used once, and each event's `data` exactly SPEC's members.
@Suite("Quorum approvals on PostgreSQL, stepped clock")
struct ApprovalStoreTests {
    static let fixture = Result { try TestServer(name: "approvalstore") }

    struct World {
        let server: TestServer
        let clock: ManualClock
        let service: ApprovalService
        let db: PostgresConnection
        let mailer: RecordingApprovalMail
    }

    func world() throws -> World {
        let server = try Self.fixture.get()
        let clock = ManualClock()
        let runtime = clock.runtime()
        let mailer = RecordingApprovalMail()
        return World(server: server, clock: clock,
                     service: ApprovalService(store: server.database.approvals, mail: mailer,
                                              events: OutboxEvents(runtime: runtime, maxAgeSeconds: 3600), runtime: runtime),
                     db: try TestDatabase.connect(), mailer: mailer)
    }

    func events(_ w: World, _ id: String) throws -> [(type: String, data: JSONValue)] {
        try w.db.query("SELECT type, data::text AS data FROM outbox_events WHERE data->>'approvalId' = \(id) ORDER BY seq")
            .map { (try $0.string("type"), try JSONParser.parse(Array(try $0.string("data").utf8))) }
    }

    @Test("waiting, then approved once the delay has passed (approval.approved written once), used once; expiry announced once; the veto link")
    func stateMachine() throws {
        let w = try world()
        let client = w.server.client()
        let admin = "Bearer \(w.server.endpoint.adminKey ?? "")"
        // Events are stored only for a subscribed endpoint; this one is deleted at the end.
        let hook = try client.post("/admin/v1/webhooks", .object([("url", "https://hooks.example.com/approvals"),
                                                                  ("events", .array(EventType.webhookTypes.filter { $0.rawValue.hasPrefix("approval.") }
                                                                    .map { .string($0.rawValue) }))]), authorization: admin)
        #expect(hook.status == 201, "\(hook)")
        defer { _ = try? client.send("DELETE", "/admin/v1/webhooks/\(hook.json?["id"]?.stringValue ?? "")", authorization: admin) }

        let authenticator = SoftAuthenticator()
        let people = try (0..<3).map { n in try client.signUp(n == 1 ? authenticator : SoftAuthenticator(), username: w.server.username("aps\(n)")) }
        let (requester, ana, subject) = (people[0], people[1], people[2])
        try w.db.execute("INSERT INTO account_emails (user_id, email) VALUES (\(subject.userId), \("subject-\(subject.userId)@approvals.test"))")
        let name = "locked-\(uniqueSuffix())"
        _ = try w.service.setPolicy(try SetApprovalPolicy(name: name, body: .object([
            ("approvers", .array([.object([("user", .string(ana.userId))])])), ("requesters", .array([.object([("user", .string(requester.userId))])])),
            ("needed", 1), ("delay", 600), ("expires", 3600), ("notifyOwner", true), ("breakGlass", false), ("requesterCounts", true),
        ])), by: .named("test"))
        func open() throws -> ApprovalView {
            try w.service.open(try OpenApproval(.object([("policy", .string(name)), ("action", .object([("type", "open-record"), ("record", "r1")])),
                                                         ("subject", .string(subject.userId))])), requester: requester.userId)
        }

        // 1. The time lock, with a real passkey step-up of the approver.
        let first = try open()
        let id = first.approval.id
        let vote = try StepUpAction.approvalVote(approvalId: id, actionHash: first.approval.actionHash).value
        let c = try client.post("/v1/step-up/challenges", .object([("method", "passkey"), ("action", vote)]), authorization: ana.bearer)
        let assertion = try client.assertion(authenticator, options: try #require(c.json?["publicKey"])).json()
        let verified = try #require(try client.post("/v1/step-up/verify", .object([("challengeId", c.json!["challengeId"]!), ("credential", assertion)]),
                                                    authorization: ana.bearer).json)
        let token = try #require(verified["access_token"]?.stringValue)
        let claims = try #require(try JSONParser.parse(try #require(Base64URL.decode(String(token.split(separator: ".")[1])))))
        let redemption = StepUpRedemption(jti: try #require(claims["jti"]?.stringValue), userId: ana.userId,
                                          actionHash: try StepUpAction.approvalVote(approvalId: id, actionHash: first.approval.actionHash).hash)
        let receiptId = try #require(verified["receiptId"]?.stringValue)
        let waiting = try w.service.approve(id: id, caller: ana.userId, step: (redemption, receiptId), loaded: nil)
        #expect(waiting.state == .waiting)
        expectRefusal(.conflict, "the step-up is spent, and the account counted") {
            try w.service.approve(id: id, caller: ana.userId, step: (redemption, receiptId), loaded: nil)
        }
        #expect(try w.service.show(id: id, caller: requester.userId).state == .waiting)
        #expect(try events(w, id).map(\.type) == ["approval.requested"])
        w.clock.advance(600)
        for who in [requester.userId, ana.userId, subject.userId] { #expect(try w.service.show(id: id, caller: who).state == .approved) }
        #expect(try events(w, id).map(\.type) == ["approval.requested", "approval.approved"], "observed three times, written once")
        let hash = try ConsumeApproval(.object([("actionHash", .string(Base64URL.encode(first.approval.actionHash)))]))
        #expect(try w.service.consume(id: id, caller: requester.userId, hash).state == .used)
        expectRefusal(.conflict) { try w.service.consume(id: id, caller: requester.userId, hash) }
        let entries = try w.db.query("SELECT user_id, receipt_id FROM approval_entries WHERE approval_id = \(id)")
        #expect(entries.count == 1)
        #expect(try entries[0].string("receipt_id") == receiptId)
        let data = try #require(try events(w, id).last?.data)
        #expect(data.objectValue.map { Set($0.map(\.key)) } == ["approvalId", "policy", "subject", "actionHash"], "SPEC's members, no more: \(data)")
        #expect(data["approvalId"]?.stringValue == id && data["policy"]?.stringValue == name && data["subject"]?.stringValue == subject.userId
                && data["actionHash"]?.stringValue == Base64URL.encode(first.approval.actionHash))

        // 2. Expiry: announced once, by whoever sees it first.
        let second = try open().approval.id
        w.clock.advance(3600)
        #expect(try w.service.show(id: second, caller: requester.userId).state == .expired)
        expectRefusal(.conflict) { try w.service.veto(id: second, caller: subject.userId) }
        #expect(try events(w, second).map(\.type) == ["approval.requested", "approval.expired"])

        // 3. The subject's mailed link vetoes once, without a session.
        let third = try open().approval.id
        let texts = w.mailer.texts.map { $0.replacingOccurrences(of: "=\r\n", with: "").replacingOccurrences(of: "=3D", with: "=") }
        #expect(texts.count == 3 && texts.allSatisfy { $0.contains("X-Latchkey-Event: approval.requested") })
        var vetoed = false
        if let text = texts.last, let token = text.components(separatedBy: "cancel=").last?.prefix(while: { !$0.isWhitespace }) {
            try w.service.veto(VetoByLink(.object([("cancelToken", .string(String(token)))])))
            vetoed = true
            expectRefusal(.notFound, "used once") { try w.service.veto(VetoByLink(.object([("cancelToken", .string(String(token)))]))) }
        }
        #expect(vetoed, "the third approval's link vetoes it")
        #expect(try w.service.show(id: third, caller: subject.userId).state == .vetoed)
        #expect(try events(w, third).map(\.type) == ["approval.requested", "approval.vetoed"])
        let line = try w.db.query("SELECT actor, subject FROM audit_log WHERE action = 'approval.vetoed' AND detail->>'approvalId' = \(third)")
        #expect(line.count == 1)
        #expect(try line.first?.string("actor") == subject.userId)
    }
}
