import Crypto
import Foundation
import JSON
import LatchkeyServer
import PostgreSQL
import Receipts
import Storage
import Testing
import WebAuthn
import WebAuthnTesting

/// SPEC "Quorum approvals" over real HTTP and PostgreSQL: policies through the admin API, an
/// approval opened by a requester, approved by two accounts with real passkey step-ups (one count
/// per account), used exactly once under concurrent consumes, vetoed, and every bad input a 4xx.
@Suite("Quorum approvals")
struct ApprovalTests {
    static let fixture = Result { try TestServer(name: "approvals") }

    struct Person {
        let client: Client
        let session: Session
        let authenticator: SoftAuthenticator
        var bearer: String { session.bearer }
        var id: String { session.userId }
    }

    func person(_ server: TestServer, _ name: String) throws -> Person {
        let client = server.client()
        let authenticator = SoftAuthenticator()
        return Person(client: client, session: try client.signUp(authenticator, username: server.username(name)), authenticator: authenticator)
    }

    var adminKey: String { get throws { "Bearer \(try Self.fixture.get().endpoint.adminKey ?? "")" } }

    func policy(_ server: TestServer, _ name: String, approvers: [Person], requesters: [Person], needed: Int, delay: Int = 0,
                notifyOwner: Bool = false, breakGlass: Bool = false, requesterCounts: Bool = true) throws {
        let body: JSONValue = .object([
            ("approvers", .array(approvers.map { .object([("user", .string($0.id))]) })),
            ("requesters", .array(requesters.map { .object([("user", .string($0.id))]) })), ("needed", .number(Double(needed))),
            ("delay", .number(Double(delay))), ("expires", 3600), ("notifyOwner", .bool(notifyOwner)), ("breakGlass", .bool(breakGlass)),
            ("requesterCounts", .bool(requesterCounts)),
        ])
        let r = try server.client().send("PUT", "/admin/v1/approval-policies/\(name)", body: body.serialized(), authorization: try adminKey)
        #expect(r.status == 201, "\(r)")
    }

    /// A user-verified passkey step-up of `p` for approving approval `id` with `actionHash`.
    func vote(_ p: Person, id: String, actionHash: String) throws -> String {
        let action: JSONValue = .object([("type", "latchkey.approval"), ("approvalId", .string(id)), ("actionHash", .string(actionHash))])
        return try p.client.stepUpToken(p.authenticator, authorization: p.bearer, action: action)
    }

    func approve(_ p: Person, id: String, token: String?) throws -> Reply {
        try p.client.send("POST", "/v1/approvals/\(id)/approve", authorization: p.bearer,
                          headers: token.map { [("Latchkey-Step-Up", $0)] } ?? [])
    }

    @Test("two accounts approve with real step-ups, one count each; the subject's GET shows them; 8 concurrent consumes → exactly one 200")
    func quorumOverHTTP() throws {
        let server = try Self.fixture.get()
        let requester = try person(server, "req"), ana = try person(server, "ana"), ben = try person(server, "ben")
        let outsider = try person(server, "out")
        let name = "pay-\(uniqueSuffix())"
        try policy(server, name, approvers: [ana, ben], requesters: [requester], needed: 2)
        let got = try server.client().get("/admin/v1/approval-policies/\(name)", authorization: try adminKey)
        #expect(got.status == 200 && got.json?["needed"] == 2 && got.json?["name"]?.stringValue == name, "\(got)")

        let action: JSONValue = .object([("type", "payment"), ("amount", "5000.00"), ("currency", "EUR")])
        let refused = try outsider.client.post("/v1/approvals", .object([("policy", .string(name)), ("action", action)]), authorization: outsider.bearer)
        #expect(refused.status == 403 && refused.code == "forbidden", "\(refused)")
        let opened = try requester.client.post("/v1/approvals", .object([("policy", .string(name)), ("action", action), ("subject", .null)]),
                                               authorization: requester.bearer)
        #expect(opened.status == 201, "\(opened)")
        let o = try #require(opened.json)
        #expect(o.objectValue?.map(\.key) == ["id", "state", "needed", "approvals", "actionHash", "expiresAt"])
        #expect(o["state"] == "collecting" && o["needed"] == 2 && o["approvals"] == .array([]))
        let id = try #require(o["id"]?.stringValue), hash = try #require(o["actionHash"]?.stringValue)

        // Without a step-up, with another approval's, by someone the policy does not name.
        let bare = try approve(ana, id: id, token: nil)
        #expect(bare.status == 403 && bare.code == "step_up_required", "\(bare)")
        let stranger = try approve(outsider, id: id, token: nil)
        #expect(stranger.status == 404 && stranger.code == "not_found", "\(stranger)")
        let requesterVote = try approve(requester, id: id, token: nil)
        #expect(requesterVote.status == 403 && requesterVote.code == "forbidden", "\(requesterVote)")
        let otherHash = try approve(ana, id: id, token: try vote(ana, id: id, actionHash: Base64URL.encode(Array(repeating: 1, count: 32))))
        #expect(otherHash.status == 403 && otherHash.code == "step_up_required", "\(otherHash)")

        let first = try approve(ana, id: id, token: try vote(ana, id: id, actionHash: hash))
        #expect(first.status == 200 && first.json?["state"] == "collecting", "\(first)")
        let again = try approve(ana, id: id, token: try vote(ana, id: id, actionHash: hash))
        #expect(again.status == 409 && again.code == "conflict", "one account counts once, whatever it signs with: \(again)")
        let early = try requester.client.post("/v1/approvals/\(id)/consume", .object([("actionHash", .string(hash))]), authorization: requester.bearer)
        #expect(early.status == 409 && early.code == "conflict", "\(early)")

        let token = try vote(ben, id: id, actionHash: hash)
        let second = try approve(ben, id: id, token: token)
        #expect(second.status == 200 && second.json?["state"] == "approved", "\(second)")
        let replay = try approve(ben, id: id, token: token)
        #expect(replay.status == 409, "\(replay)")

        let shown = try requester.client.get("/v1/approvals/\(id)", authorization: requester.bearer)
        #expect(shown.status == 200, "\(shown)")
        let entries = try #require(shown.json?["approvals"]?.arrayValue)
        #expect(Set(entries.compactMap { $0["userId"]?.stringValue }) == [ana.id, ben.id])
        #expect(entries.allSatisfy { $0["receiptId"]?.stringValue?.isEmpty == false && $0["approvedAt"]?.stringValue != nil })
        // The action as its RFC 8785 form orders it.
        #expect(shown.json?["action"] == .object([("amount", "5000.00"), ("currency", "EUR"), ("type", "payment")]))
        #expect(shown.json?["requester"]?.stringValue == requester.id)
        // Each receipt is the approver's own step-up receipt for exactly this approval.
        for e in entries {
            let receiptId = try #require(e["receiptId"]?.stringValue)
            let receipt = try server.client().get("/admin/v1/step-up/receipts/\(receiptId)", authorization: try adminKey)
            #expect(receipt.status == 200 && receipt.json?["userId"] == e["userId"], "\(receipt)")
        }
        #expect(try outsider.client.get("/v1/approvals/\(id)", authorization: outsider.bearer).status == 404)

        let mismatch = try requester.client.post("/v1/approvals/\(id)/consume",
                                                 .object([("actionHash", .string(Base64URL.encode(Array(repeating: 2, count: 32))))]),
                                                 authorization: requester.bearer)
        #expect(mismatch.status == 400 && mismatch.code == "action_mismatch", "\(mismatch)")
        let body = JSONValue.object([("actionHash", .string(hash))]).serialized()
        let endpoint = server.endpoint, bearer = requester.bearer
        let outcomes = onThreads(8) { _, start -> String in
            let client = Client(endpoint)
            do {
                _ = try client.get("/healthz")
                start()
                let r = try client.send("POST", "/v1/approvals/\(id)/consume", body: body, authorization: bearer)
                return r.status == 200 ? "200" : "\(r.status) \(r.code ?? "?")"
            } catch {
                start()
                return "error: \(error)"
            }
        }
        #expect(outcomes.filter { $0 == "200" }.count == 1, "\(outcomes)")
        #expect(outcomes.filter { $0 == "409 conflict" }.count == 7, "\(outcomes)")
        let audit = try server.client().get("/admin/v1/audit?action=approval.used", authorization: try adminKey)
        #expect(audit.json?["entries"]?.arrayValue?.contains { $0["subject"]?.stringValue == id } == true, "\(audit)")
    }

    @Test("break glass: one approver approves at once, and that vote's receipt says breakGlass:true; another policy's vote's receipt does not")
    func breakGlassReceipt() throws {
        let server = try Self.fixture.get()
        let requester = try person(server, "bgreq"), ana = try person(server, "bgana")
        let glass = "glass-\(uniqueSuffix())", plain = "plain-\(uniqueSuffix())"
        try policy(server, glass, approvers: [ana], requesters: [requester], needed: 1, breakGlass: true)
        try policy(server, plain, approvers: [ana], requesters: [requester], needed: 1)

        func receiptOfVote(_ policyName: String) throws -> JSONValue {
            let action: JSONValue = .object([("type", "record.open"), ("record", .string(policyName))])
            let opened = try requester.client.post("/v1/approvals", .object([("policy", .string(policyName)), ("action", action)]),
                                                   authorization: requester.bearer)
            #expect(opened.status == 201, "\(opened)")
            let id = try #require(opened.json?["id"]?.stringValue), hash = try #require(opened.json?["actionHash"]?.stringValue)
            let voted = try approve(ana, id: id, token: try vote(ana, id: id, actionHash: hash))
            #expect(voted.status == 200 && voted.json?["state"] == "approved", "\(voted)")
            let shown = try requester.client.get("/v1/approvals/\(id)", authorization: requester.bearer)
            let receiptId = try #require(shown.json?["approvals"]?.arrayValue?.first?["receiptId"]?.stringValue, "\(shown)")
            let read = try server.client().get("/admin/v1/receipts/\(receiptId)", authorization: try adminKey)
            #expect(read.status == 200, "\(read)")
            let receipt = try #require(read.json?["receipt"])
            // The receipt a third party checks: every check holds with the member there.
            let checks = ReceiptChecker.check(receipt)
            #expect(!checks.isEmpty && checks.allSatisfy(\.passed), "\(checks)")
            return receipt
        }
        let broken = try receiptOfVote(glass)
        #expect(broken["breakGlass"] == .bool(true), "\(broken)")
        #expect(broken["action"]?["type"]?.stringValue == "latchkey.approval")
        let ordinary = try receiptOfVote(plain)
        #expect(ordinary["breakGlass"] == nil, "a vote for an ordinary policy is not marked: \(ordinary)")
    }

    static let traced = Result { try TestServer(name: "approvals-trips", tracing: true) }

    @Test("opening an approval is one read and one write: the caller's standing is read with the policy, the last hour and the subject")
    func openingIsOneRead() throws {
        let server = try Self.traced.get()
        let requester = try person(server, "tripreq"), ana = try person(server, "tripana")
        let name = "trip-\(uniqueSuffix())"
        let key = "Bearer \(server.adminKey)"
        let body: JSONValue = .object([
            ("approvers", .array([.object([("user", .string(ana.id))])])), ("requesters", .array([.object([("user", .string(requester.id))])])),
            ("needed", 1), ("delay", 0), ("expires", 3600), ("notifyOwner", false), ("breakGlass", false), ("requesterCounts", true),
        ])
        #expect(try server.client().send("PUT", "/admin/v1/approval-policies/\(name)", body: body.serialized(), authorization: key).status == 201)
        let open: JSONValue = .object([("policy", .string(name)), ("action", .object([("type", "record.open")])), ("subject", .string(ana.id))])
        let (opened, trips, statements) = try server.fewestTrips("POST /v1/approvals", "POST", "/v1/approvals", body: open,
                                                                  authorization: requester.bearer)
        #expect(opened.status == 201, "\(opened)")
        #expect(trips == RoundTripCounts(reads: 1, writes: 1), "\(trips) \(statements)")
        // Refused on the same one read: a caller the policy does not name, an unknown subject.
        let (refused, refusedTrips, _) = try server.fewestTrips("POST /v1/approvals", "POST", "/v1/approvals", body: open, authorization: ana.bearer)
        #expect(refused.status == 403 && refused.code == "forbidden" && refusedTrips == RoundTripCounts(reads: 1), "\(refused) \(refusedTrips)")
        let stranger: JSONValue = .object([("policy", .string(name)), ("action", .object([("type", "record.open")])),
                                           ("subject", .string(Base64URL.encode(Array(repeating: 7, count: 16))))])
        let (unknown, unknownTrips, _) = try server.fewestTrips("POST /v1/approvals", "POST", "/v1/approvals", body: stranger,
                                                                authorization: requester.bearer)
        #expect(unknown.status == 400 && unknown.code == "invalid_request" && unknownTrips == RoundTripCounts(reads: 1), "\(unknown) \(unknownTrips)")
    }

    @Test("the subject never counts and may veto; a vetoed approval takes no approval and is never used")
    func subjectVetoes() throws {
        let server = try Self.fixture.get()
        let requester = try person(server, "req"), ana = try person(server, "ana"), subject = try person(server, "sub")
        let name = "record-\(uniqueSuffix())"
        try policy(server, name, approvers: [ana, subject], requesters: [requester], needed: 1, delay: 600)
        let opened = try requester.client.post("/v1/approvals", .object([("policy", .string(name)), ("action", .object([("type", "open-record")])),
                                                                         ("subject", .string(subject.id))]), authorization: requester.bearer)
        #expect(opened.status == 201, "\(opened)")
        let id = try #require(opened.json?["id"]?.stringValue), hash = try #require(opened.json?["actionHash"]?.stringValue)
        let bySubject = try approve(subject, id: id, token: nil)
        #expect(bySubject.status == 403 && bySubject.code == "forbidden", "\(bySubject)")
        let waiting = try approve(ana, id: id, token: try vote(ana, id: id, actionHash: hash))
        #expect(waiting.status == 200 && waiting.json?["state"] == "waiting" && waiting.json?["usableAt"]?.stringValue != nil, "\(waiting)")
        let veto = try subject.client.send("POST", "/v1/approvals/\(id)/veto", authorization: subject.bearer)
        #expect(veto.status == 200 && veto.json?["state"] == "vetoed", "\(veto)")
        let twice = try subject.client.send("POST", "/v1/approvals/\(id)/veto", authorization: subject.bearer)
        #expect(twice.status == 409 && twice.code == "conflict", "\(twice)")
        let link = try server.client().post("/v1/approvals/veto", .object([("cancelToken", "lkv_nothing")]))
        #expect(link.status == 404 && link.code == "not_found", "\(link)")
    }

    @Test("bad input on every approvals route is a 4xx with SPEC's code, never a 5xx")
    func badInput() throws {
        let server = try Self.fixture.get()
        let requester = try person(server, "req"), ana = try person(server, "ana")
        let name = "bad-\(uniqueSuffix())"
        try policy(server, name, approvers: [ana], requesters: [requester], needed: 1)
        let admin = try adminKey
        let c = server.client()
        let policyBodies: [String] = ["", "[]", "{", "null", "{\"needed\":1}", "{\"approvers\":\"x\"}", "{\"approvers\":[{\"user\":\"\\u0000\"}]}",
                                      String(repeating: "[", count: 5000)]
        for body in policyBodies {
            let r = try c.send("PUT", "/admin/v1/approval-policies/\(name)", body: Array(body.utf8), authorization: admin)
            #expect(r.status == 400 && r.code == "invalid_request", "PUT \(body.prefix(40)): \(r)")
        }
        for path in ["%00", "a%00b", "%FF", String(repeating: "Z", count: 3000), "no%20such"] {
            let r = try c.get("/admin/v1/approval-policies/\(path)", authorization: admin)
            #expect(r.status == 404, "GET \(path.prefix(40)): \(r)")
            let d = try c.send("DELETE", "/admin/v1/approval-policies/\(path)", authorization: admin)
            #expect(d.status == 404, "DELETE \(path.prefix(40)): \(d)")
        }
        let openBodies: [JSONValue] = [
            .object([]), .object([("policy", .string(name))]), .object([("policy", .string(name)), ("action", "x")]),
            .object([("policy", .string(name)), ("action", .object([]))]),
            .object([("policy", .string(name)), ("action", .object([("type", "x")])), ("subject", 5)]),
            .object([("policy", .string(name)), ("action", .object([("type", "x")])), ("subject", "\u{0}")]),
            .object([("policy", .string(name)), ("action", .object([("type", "x")])), ("subject", .string(ana.id + "A"))]),
            .object([("policy", .string(name)), ("action", .object([("type", "x")])), ("display", "x")]),
            .object([("policy", .string(name)), ("action", .object([("type", "latchkey.admin")])),
                     ("display", .object([("lang", "en"), ("lines", .array(["a"]))]))]),
            .object([("policy", .string(name)), ("action", .object([("type", "x")])), ("extra", true)]),
        ]
        for body in openBodies {
            let r = try requester.client.post("/v1/approvals", body, authorization: requester.bearer)
            #expect(r.status == 400 && r.code == "invalid_request", "open \(body): \(r)")
        }
        let unknownSubject = try requester.client.post("/v1/approvals", .object([("policy", .string(name)), ("action", .object([("type", "x")])),
                                                                                 ("subject", .string(Base64URL.encode(Array(repeating: 9, count: 16))))]),
                                                       authorization: requester.bearer)
        #expect(unknownSubject.status == 400 && unknownSubject.code == "invalid_request", "\(unknownSubject)")
        for id in ["%00", "a%00b", "%FF", String(repeating: "Z", count: 3000), "AAAAAAAAAAAAAAAAAAAAAA"] {
            for (method, suffix) in [("GET", ""), ("POST", "/approve"), ("POST", "/veto"), ("POST", "/consume")] {
                let r = try requester.client.send(method, "/v1/approvals/\(id)\(suffix)", body: Array("{\"actionHash\":\"\(String(repeating: "A", count: 43))\"}".utf8),
                                                  authorization: requester.bearer)
                #expect((400..<500).contains(r.status) && r.isProblem, "\(method) \(id.prefix(30))\(suffix): \(r)")
            }
        }
        for body in ["", "{}", "{\"cancelToken\":5}", "{\"cancelToken\":\"\\u0000\"}", "[1]"] {
            let r = try c.send("POST", "/v1/approvals/veto", body: Array(body.utf8))
            #expect((400..<500).contains(r.status) && r.isProblem, "veto link \(body): \(r)")
        }
        let anonymous = try c.post("/v1/approvals", .object([("policy", .string(name)), ("action", .object([("type", "x")]))]))
        #expect(anonymous.status == 401, "\(anonymous)")
    }
}
