import Foundation
import JSON
import PostgreSQL
@testable import LatchkeyServer
import Storage
import Testing
import WebAuthnTesting

/// SPEC "Quorum approvals" → "Admin quorum": with `LATCHKEY_ADMIN_QUORUM=2` an admin change needs
/// `Latchkey-Approval` of the admin's own approved `latchkey.admin` approval for exactly that change
/// (approved by two admins' passkey step-ups), used once; without it 403 `approval_required`; the
/// admin key makes no admin change (403 `forbidden`).
@Suite("Admin quorum")
struct AdminQuorumTests {
    static let fixture = Result { try TestServer(name: "adminquorum", tracing: true) { $0.adminQuorum = 2 } }

    typealias Admin = EnrolledAdmin

    func admin(_ server: TestServer) throws -> Admin { try server.enrolAdmin("qadmin") }

    func stepUp(_ a: Admin, _ action: JSONValue) throws -> String { try a.stepUp(action) }

    func vote(_ a: Admin, _ id: String, _ hash: String) throws -> Reply {
        let token = try stepUp(a, .object([("type", "latchkey.approval"), ("approvalId", .string(id)), ("actionHash", .string(hash))]))
        return try a.client.send("POST", "/v1/approvals/\(id)/approve", authorization: a.bearer, headers: [("Latchkey-Step-Up", token)])
    }

    @Test("two admins approve one exact change; it is made once with Latchkey-Approval; without one, or by the admin key, refused")
    func quorumChange() throws {
        let server = try Self.fixture.get()
        let ana = try admin(server), ben = try admin(server)
        let body: JSONValue = .object([("url", .string("https://hooks.example.com/quorum-\(uniqueSuffix())")), ("events", .array(["user.created"]))])
        let action: JSONValue = .object([("type", "latchkey.admin"), ("method", "POST"), ("path", "/admin/v1/webhooks"), ("body", body)])
        func change(_ a: Admin, approval: String?, stepUp: String? = nil) throws -> Reply {
            var headers: [(String, String)] = []
            if let approval { headers.append(("Latchkey-Approval", approval)) }
            if let stepUp { headers.append(("Latchkey-Step-Up", stepUp)) }
            return try a.client.send("POST", "/admin/v1/webhooks", body: body.serialized(), authorization: a.bearer, headers: headers)
        }

        let byKey = try server.client().post("/admin/v1/webhooks", body, authorization: "Bearer \(server.adminKey)")
        #expect(byKey.status == 403 && byKey.code == "forbidden", "\(byKey)")
        let alone = try change(ana, approval: nil, stepUp: try stepUp(ana, action))
        #expect(alone.status == 403 && alone.code == "approval_required", "one admin's step-up is not a quorum: \(alone)")

        let opened = try ana.client.post("/v1/approvals", .object([("policy", "latchkey.admin"), ("action", action)]), authorization: ana.bearer)
        #expect(opened.status == 201 && opened.json?["needed"] == 2, "\(opened)")
        let id = try #require(opened.json?["id"]?.stringValue), hash = try #require(opened.json?["actionHash"]?.stringValue)
        #expect(try vote(ana, id, hash).json?["state"] == "collecting")
        // The console's changes waiting for other admins: this one, with ana's receipt.
        let waiting = try ben.client.get("/admin/v1/approvals", authorization: ben.bearer)
        let listed = try #require(waiting.json?["approvals"]?.arrayValue?.first { $0["id"]?.stringValue == id }, "\(waiting)")
        #expect(listed["action"]?["path"] == "/admin/v1/webhooks" && listed["approvals"]?.arrayValue?.first?["userId"]?.stringValue == ana.userId)
        let early = try change(ana, approval: id)
        #expect(early.status == 403 && early.code == "approval_required", "\(early)")
        // The approval is read with the admin's role and standing, in the caller's one read.
        let refusedWork = try #require(server.traces?.lastWork("POST /admin/v1/webhooks"))
        #expect(refusedWork.roundTrips.reads == 1 && refusedWork.roundTrips.writes == 0, "\(refusedWork.statements)")
        #expect(try vote(ben, id, hash).json?["state"] == "approved")
        // Approved and not yet made: still listed, so the asking admin finds it from any browser.
        let approvedListed = try ana.client.get("/admin/v1/approvals", authorization: ana.bearer).json?["approvals"]?.arrayValue?
            .first { $0["id"]?.stringValue == id }
        #expect(approvedListed?["state"] == "approved" && approvedListed?["requester"]?.stringValue == ana.userId, "\(String(describing: approvedListed))")

        let notMine = try change(ben, approval: id)
        #expect(notMine.status == 403 && notMine.code == "approval_required", "the requester's own approval: \(notMine)")
        let other = try ana.client.send("DELETE", "/admin/v1/webhooks/wh_AAAAAAAAAAAAAAAAAAAAAA", authorization: ana.bearer,
                                        headers: [("Latchkey-Approval", id)])
        #expect(other.status == 403 && other.code == "approval_required", "another change: \(other)")
        let made = try change(ana, approval: id)
        #expect(made.status == 201, "\(made)")
        // One read (the caller with the approval) and one write (the change using the approval up).
        let madeWork = try #require(server.traces?.lastWork("POST /admin/v1/webhooks"))
        #expect(madeWork.roundTrips.reads == 1 && madeWork.roundTrips.writes == 1, "\(madeWork.statements)")
        let again = try change(ana, approval: id)
        #expect(again.status == 403 && again.code == "approval_required", "used once: \(again)")
        #expect(try ben.client.get("/admin/v1/approvals", authorization: ben.bearer).json?["approvals"]?.arrayValue?
            .contains { $0["id"]?.stringValue == id } == false, "used: no longer waiting")
        let shown = try ana.client.get("/v1/approvals/\(id)", authorization: ana.bearer)
        #expect(shown.json?["state"] == "used" && shown.json?["approvals"]?.arrayValue?.count == 2, "\(shown)")
        let audit = try ana.client.get("/admin/v1/audit?action=webhook.created", authorization: ana.bearer)
        #expect(audit.json?["entries"]?.arrayValue?.first?["detail"]?["receiptId"]?.stringValue == id, "\(audit)")
        _ = try? server.database.webhooks.delete(id: made.json?["id"]?.stringValue ?? "", audit: AuditRecord(actor: "test", action: "webhook.deleted", subject: nil),
                                                 redeeming: nil)
    }
}
