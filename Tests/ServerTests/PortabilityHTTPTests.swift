import Crypto
import Foundation
import JSON
import LatchkeyServer
import PostgreSQL
import Storage
import Testing
import WebAuthn
import WebAuthnTesting

/// SPEC "Portability" over the admin API: `GET /admin/v1/export` with an admin's step-up for
/// `{"type":"latchkey.admin.export"}` (or the admin key), `POST /admin/v1/import` with an admin
/// user's step-up for `{"type":"latchkey.admin.import","sha256"}` (never the admin key), both JSON
/// Lines; two deployments (two databases, one rpId), and the same authenticator signs in at the second.
@Suite(.serialized) struct PortabilityHTTPTests {
    typealias Admin = EnrolledAdmin

    /// A deployment on a database of its own (an export is every account of it).
    static func deployment(_ name: String, rpId: String? = nil, configure: @escaping (inout Configuration) -> Void = { _ in }) throws
        -> (TestServer, TestDatabase.Scratch) {
        let scratch = try TestDatabase.Scratch()
        let server = try TestServer(name: name, rpIdOverride: rpId) {
            $0.databaseURL = scratch.url
            $0.stepUpTTL = 60
            configure(&$0)
        }
        return (server, scratch)
    }

    static func admin(_ server: TestServer) throws -> Admin { try server.enrolAdmin() }

    static func stepUp(_ a: Admin, _ action: JSONValue) throws -> String { try a.stepUp(action) }

    static let exportAction: JSONValue = .object([("type", "latchkey.admin.export")])

    static func importAction(_ body: [UInt8]) -> JSONValue {
        .object([("type", "latchkey.admin.import"), ("sha256", .string(Digest.sha256(body).map { String(format: "%02x", $0) }.joined()))])
    }

    static func export(_ a: Admin, stepUp: String?) throws -> Reply {
        try a.client.send("GET", "/admin/v1/export", contentType: nil, authorization: a.bearer,
                          headers: stepUp.map { [("Latchkey-Step-Up", $0)] } ?? [])
    }

    static func importFile(_ a: Admin, _ body: [UInt8], contentType: String = "application/jsonl", query: String = "",
                           stepUp: String?) throws -> Reply {
        try a.client.send("POST", "/admin/v1/import" + query, body: body, contentType: contentType, authorization: a.bearer,
                          headers: stepUp.map { [("Latchkey-Step-Up", $0)] } ?? [])
    }

    static func lines(_ reply: Reply) throws -> [JSONValue] {
        try reply.body.split(separator: 0x0A).map { try JSONParser.parse(Array($0)) }
    }

    static func count(_ scratch: TestDatabase.Scratch, _ sql: SQL) throws -> Int {
        try scratch.connect().query(sql).first?.int("n") ?? -1
    }

    @Test func moveBetweenDeploymentsOverHTTP() throws {
        let (first, firstDB) = try Self.deployment("http-move")
        let authenticator = SoftAuthenticator(signCount: 5)
        let username = "mover-\(uniqueSuffix())"
        let session = try first.client().signUp(authenticator, username: username)
        // A verified address at the first deployment: it arrives unverified at the second.
        let address = "mover-\(uniqueSuffix())@example.test"
        try firstDB.connect().execute("INSERT INTO account_emails (user_id, email) VALUES (\(session.userId), \(address))")
        let firstAdmin = try Self.admin(first)

        // Export: no step-up → 403; the admin's step-up for the export action → the file; once only.
        let refused = try Self.export(firstAdmin, stepUp: nil)
        #expect(refused.status == 403 && refused.code == "step_up_required", "\(refused)")
        let token = try Self.stepUp(firstAdmin, Self.exportAction)
        let exported = try Self.export(firstAdmin, stepUp: token)
        #expect(exported.status == 200, "\(exported)")
        #expect(exported.contentType == "application/jsonl")
        let file = exported.body
        let exportedLines = try Self.lines(exported)
        #expect(exportedLines.last?["count"]?.intValue == 2)  // the admin and the mover
        #expect(exportedLines.contains { $0["user"]?["username"]?.stringValue == username })
        let replay = try Self.export(firstAdmin, stepUp: token)
        #expect(replay.status == 403 && replay.code == "step_up_required", "\(replay)")
        // The admin key needs no step-up (automation); the export is audited.
        let byKey = try first.client().send("GET", "/admin/v1/export", contentType: nil, authorization: "Bearer \(first.adminKey)")
        #expect(byKey.status == 200 && byKey.body == file, "\(byKey)")
        #expect(try Self.count(firstDB, "SELECT count(*)::int AS n FROM audit_log WHERE action = 'accounts.exported'") == 2)

        let (second, secondDB) = try Self.deployment("http-move", rpId: first.rpId)
        let secondAdmin = try Self.admin(second)
        // The admin key may never import; an admin user needs the step-up for exactly this file.
        let byKeyImport = try second.client().send("POST", "/admin/v1/import", body: file, contentType: "application/jsonl",
                                                   authorization: "Bearer \(second.adminKey)")
        #expect(byKeyImport.status == 403 && byKeyImport.code == "forbidden", "\(byKeyImport)")
        #expect(try Self.importFile(secondAdmin, file, stepUp: nil).code == "step_up_required")
        let forOther = try Self.stepUp(secondAdmin, Self.importAction(file + [0x0A]))
        #expect(try Self.importFile(secondAdmin, file, stepUp: forOther).code == "step_up_required")

        // A dry run decides every account and writes nothing.
        let dry = try Self.importFile(secondAdmin, file, query: "?dryRun=true", stepUp: try Self.stepUp(secondAdmin, Self.importAction(file)))
        #expect(dry.status == 200 && dry.contentType == "application/jsonl", "\(dry)")
        #expect(try Self.lines(dry).map { $0["outcome"]?.stringValue } == ["created", "created"])
        #expect(try Self.count(secondDB, "SELECT count(*)::int AS n FROM users WHERE username = \(username)") == 0)

        let done = try Self.importFile(secondAdmin, file, stepUp: try Self.stepUp(secondAdmin, Self.importAction(file)))
        #expect(done.status == 200, "\(done)")
        let outcomes = try Self.lines(done)
        #expect(outcomes.count == 2)
        #expect(outcomes.allSatisfy { $0["outcome"]?.stringValue == "created" && $0["reason"] == .null })
        #expect(outcomes.contains { $0["username"]?.stringValue == username })
        // The same authenticator signs in at the second deployment, as the same account.
        #expect(try second.client().signIn(authenticator).userId == session.userId)
        // The address came unverified: not among the verified ones email sign-in and recovery read.
        #expect(try Self.count(secondDB, "SELECT count(*)::int AS n FROM account_emails WHERE user_id = \(session.userId)") == 0)
        #expect(try Self.count(secondDB, "SELECT count(*)::int AS n FROM unverified_addresses WHERE email = \(address)") == 1)
        let audit = try secondDB.connect().query("SELECT actor, detail::text AS d FROM audit_log WHERE action = 'account.imported' AND subject = \(session.userId)")
        #expect(try audit.first?.string("actor") == secondAdmin.userId)
        #expect(try audit.first?.string("d").contains(Digest.sha256(file).map { String(format: "%02x", $0) }.joined()) == true)

        // A re-run is skipped per account.
        let again = try Self.importFile(secondAdmin, file, stepUp: try Self.stepUp(secondAdmin, Self.importAction(file)))
        #expect(try Self.lines(again).map { $0["outcome"]?.stringValue } == ["skipped", "skipped"])

        // The second deployment's export carries the address, unverified.
        let reExport = try Self.export(secondAdmin, stepUp: try Self.stepUp(secondAdmin, Self.exportAction))
        let mover = try Self.lines(reExport).first { $0["user"]?["username"]?.stringValue == username }
        #expect(mover?["email"]?["address"]?.stringValue == address)
        #expect(mover?["email"]?["verifiedAt"] == .null)
        // Once its owner verifies an address, the unverified one is gone.
        try secondDB.connect().execute("INSERT INTO account_emails (user_id, email) VALUES (\(session.userId), \(address))")
        #expect(try Self.count(secondDB, "SELECT count(*)::int AS n FROM unverified_addresses WHERE user_id = \(session.userId)") == 0)
    }

    @Test func aCSVFileImportsOverHTTPThroughTheSameDispatch() throws {
        let (server, database) = try Self.deployment("http-csv") { _ in }
        defer { withExtendedLifetime(database) {} }
        let a = try Self.admin(server)
        let csv = try PortabilityFormatsTests.fixture("py-webauthn.csv")
        let imported = try Self.importFile(a, csv, contentType: "text/csv", stepUp: try Self.stepUp(a, Self.importAction(csv)))
        #expect(imported.status == 200, "\(imported)")
        #expect(try Self.lines(imported).map { $0["outcome"]?.stringValue } == ["created", "created"])
    }

    @Test func badRequestsAreRefusedBeforeTheStepUpAndBrokenFilesWhole() throws {
        let (server, database) = try Self.deployment("http-bad") { $0.importMaxBody = 4096 }
        let a = try Self.admin(server)
        let line = Array(#"{"v":1}"#.utf8) + [0x0A]
        // Formats: not one of the three → 415; CSV and a Keycloak export are read, so without a
        // step-up they reach the step-up check.
        for type in ["text/plain", "application/octet-stream"] {
            let r = try Self.importFile(a, line, contentType: type, stepUp: nil)
            #expect(r.status == 415 && r.isProblem, "\(type): \(r)")
        }
        for type in ["text/csv", "application/json"] {
            let r = try Self.importFile(a, line, contentType: type, stepUp: nil)
            #expect(r.status == 403 && r.code == "step_up_required", "\(type): \(r)")
        }
        let badQuery = try Self.importFile(a, line, query: "?dryRun=maybe", stepUp: nil)
        #expect(badQuery.status == 400 && badQuery.code == "invalid_request", "\(badQuery)")
        let empty = try Self.importFile(a, [], stepUp: nil)
        #expect(empty.status == 400 && empty.code == "invalid_request", "\(empty)")
        // Past LATCHKEY_IMPORT_MAX_BODY: 413; other routes keep LATCHKEY_MAX_BODY.
        let large = try Self.importFile(a, [UInt8](repeating: 0x20, count: 5000), stepUp: nil)
        #expect(large.status == 413 && large.code == "payload_too_large", "\(large)")
        // A truncated file (no trailer) and a wrong checksum: refused whole, nothing written, step-up unused.
        let truncated = Array(#"{"v":1,"rpId":"x"}"#.utf8) + [0x0A]
        let token = try Self.stepUp(a, Self.importAction(truncated))
        let r = try Self.importFile(a, truncated, stepUp: token)
        #expect(r.status == 200, "\(r)")
        #expect(try Self.lines(r) == [.object([("line", .number(0)), ("username", .null), ("outcome", "refused"), ("reason", "truncated")])])
        let tampered = truncated + Array(#"{"v":1,"count":1,"sha256":"00"}"#.utf8) + [0x0A]
        let t = try Self.importFile(a, tampered, stepUp: try Self.stepUp(a, Self.importAction(tampered)))
        #expect(try Self.lines(t).first?["reason"]?.stringValue == "checksum_mismatch")
        #expect(try Self.count(database, "SELECT count(*)::int AS n FROM audit_log WHERE action = 'accounts.imported'") == 0)
    }

    @Test func aPasskeyTheMetadataRevokedIsAConflict() throws {
        let (first, firstDB) = try Self.deployment("http-mds")
        defer { withExtendedLifetime(firstDB) {} }  // the database lives as long as its server
        let authenticator = SoftAuthenticator(aaguid: MDSFiles.aaguid)
        let username = "revoked-\(uniqueSuffix())"
        _ = try first.client().signUp(authenticator, username: username)
        let firstAdmin = try Self.admin(first)
        let file = try Self.export(firstAdmin, stepUp: try Self.stepUp(firstAdmin, Self.exportAction)).body

        let revoked = try MDSFiles.folder(entries: [MDSFiles.entry(status: "REVOKED")])
        let (second, secondDB) = try Self.deployment("http-mds", rpId: first.rpId, configure: MDSFiles.configure(revoked))
        let a = try Self.admin(second)
        let done = try Self.importFile(a, file, stepUp: try Self.stepUp(a, Self.importAction(file)))
        let line = try Self.lines(done).first { $0["username"]?.stringValue == username }
        #expect(line?["outcome"]?.stringValue == "conflict")
        #expect(line?["reason"]?.stringValue == "metadata_revoked")
        #expect(try Self.count(secondDB, "SELECT count(*)::int AS n FROM credentials WHERE id = \(authenticator.credentialId)") == 0)
    }

    @Test func aLargeExportStreamsEveryPageWithItsChecksum() throws {
        let (server, database) = try Self.deployment("http-pages")
        defer { withExtendedLifetime(database) {} }
        // More than two pages of 500, and more bytes than the stream holds back for a slow client.
        let count = 1_100
        for n in 0..<count {
            let account = PortableAccount(id: "pg\(n)-\(uniqueSuffix())", username: "paged-\(n)-\(uniqueSuffix())",
                                          displayName: String(repeating: "d", count: 200), externalId: nil,
                                          createdAt: "2026-01-01T00:00:00Z", userHandle: SecureRandom.bytes(32),
                                          email: nil, passkeys: [], deviceKeys: [])
            #expect(try server.database.portability.importAccount(account, audit: AuditRecord(actor: "test", action: "account.imported", subject: account.id)))
        }
        let a = try Self.admin(server)
        let reply = try Self.export(a, stepUp: try Self.stepUp(a, Self.exportAction))
        #expect(reply.status == 200 && reply.header("Transfer-Encoding")?.contains("chunked") != false, "\(reply.status)")
        let lines = PortabilityTests.lines(reply.body)
        #expect(lines.count == count + 2)  // the accounts, the admin, the trailer
        let verdict = PortableFile.verify(lines: lines)
        let trailer = try JSONParser.parse(Array(lines.last!.dropLast()))
        #expect(verdict.reason == nil && verdict.sha256 == trailer["sha256"]?.stringValue)
        #expect(trailer["count"]?.intValue == count + 1)
        #expect(reply.body.count > 256 * 1024)
    }

    @Test func underAnAdminQuorumTheExportNeedsAnApprovalAndTheAdminKeyNone() throws {
        let (server, database) = try Self.deployment("http-quorum") { $0.adminQuorum = 2 }
        defer { withExtendedLifetime(database) {} }
        let ana = try Self.admin(server), ben = try Self.admin(server)
        let byKey = try server.client().send("GET", "/admin/v1/export", contentType: nil, authorization: "Bearer \(server.adminKey)")
        #expect(byKey.status == 403 && byKey.code == "forbidden", "\(byKey)")
        let alone = try Self.export(ana, stepUp: try Self.stepUp(ana, Self.exportAction))
        #expect(alone.status == 403 && alone.code == "approval_required", "\(alone)")
        let opened = try ana.client.post("/v1/approvals", .object([("policy", "latchkey.admin"), ("action", Self.exportAction)]), authorization: ana.bearer)
        #expect(opened.status == 201, "\(opened)")
        let id = try #require(opened.json?["id"]?.stringValue), hash = try #require(opened.json?["actionHash"]?.stringValue)
        for a in [ana, ben] {
            let token = try Self.stepUp(a, .object([("type", "latchkey.approval"), ("approvalId", .string(id)), ("actionHash", .string(hash))]))
            let voted = try a.client.send("POST", "/v1/approvals/\(id)/approve", authorization: a.bearer, headers: [("Latchkey-Step-Up", token)])
            #expect(voted.status == 200, "\(voted)")
        }
        let made = try ana.client.send("GET", "/admin/v1/export", contentType: nil, authorization: ana.bearer, headers: [("Latchkey-Approval", id)])
        let madeLines = try Self.lines(made)
        #expect(made.status == 200 && madeLines.last?["count"]?.intValue == 2, "\(made.status)")
        let again = try ana.client.send("GET", "/admin/v1/export", contentType: nil, authorization: ana.bearer, headers: [("Latchkey-Approval", id)])
        #expect(again.status == 403 && again.code == "approval_required", "used once: \(again)")
    }
}
