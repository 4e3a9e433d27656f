import Crypto
import Foundation
import HTTP
import JSON
import PostgreSQL
import Storage
import Testing
import WebAuthnTesting
@testable import LatchkeyServer

/// SPEC "Performance targets" → "Round trips", for the console's reads with an admin user's token:
/// the admin role, the session's standing and what the route shows are one read (the route's
/// `preload`, handed over in `GuardLoads.adminPage`), and what was read reaches the handler only
/// once the guard allowed the caller. Each request's statements and round trips are traced
/// (`TestServer(tracing:)`); the server has a database of its own, so the origin and app added
/// here stay out of other suites' well-known checks.
@Suite("Admin console reads in one round trip", .serialized)
struct AdminReadTripsTests {
    static let scratch = Result { try TestDatabase.Scratch() }
    static let server = Result {
        let database = try scratch.get()
        return try TestServer(name: "console-trips", tracing: true) {
            $0.databaseURL = database.url
            $0.wellKnownDirectory = "/nonexistent-\(uniqueSuffix())"
        }
    }

    /// Each console read: (route as the trace names it, method, path, body, a text only the
    /// page's statement holds). A pipeline is one round trip, traced as its statements joined.
    static func reads(_ a: AdminConsoleTests.Admin, _ found: Session, username: String)
        -> [(route: String, method: String, path: String, body: JSONValue?, page: String)] {
        [
            ("GET /admin/v1/me", "GET", "/admin/v1/me", nil, "AS is_admin"),
            ("GET /admin/v1/origins", "GET", "/admin/v1/origins", nil, "FROM origins"),
            ("GET /admin/v1/apps", "GET", "/admin/v1/apps", nil, "FROM apps"),
            ("GET /admin/v1/webhooks", "GET", "/admin/v1/webhooks", nil, "FROM webhook_endpoints"),
            ("GET /admin/v1/audit", "GET", "/admin/v1/audit", nil, "FROM audit_log"),
            ("GET /admin/v1/audit", "GET", "/admin/v1/audit?limit=2&action=origin.*&user=\(a.userId)", nil, "FROM audit_log"),
            ("POST /admin/v1/wellknown/preview", "POST", "/admin/v1/wellknown/preview", .object([]), "FROM apps"),
            ("POST /admin/v1/wellknown/preview", "POST", "/admin/v1/wellknown/preview", .object([("app", Self.app)]), "FROM apps"),
            ("GET /admin/v1/users", "GET", "/admin/v1/users?username=\(username)", nil, "starts_with(u.username"),
            ("GET /admin/v1/users/{id}", "GET", "/admin/v1/users/\(found.userId)", nil, "FROM credentials"),
        ]
    }

    static let app: JSONValue = .object([("platform", "android"), ("packageName", "com.example.trips"),
                                         ("fingerprints", .array([.string(AdminConsoleTests.fingerprint)]))])

    static func measured(_ server: TestServer, _ route: String, _ method: String, _ path: String, _ body: JSONValue?,
                         bearer: String) throws -> (Reply, RoundTripCounts, [String]) {
        try server.fewestTrips(route, method, path, body: body, authorization: bearer)
    }

    @Test("with an admin user's token each console read is one read, the role and the standing included; the admin key's is one too")
    func oneRead() throws {
        let server = try Self.server.get()
        let a = try AdminConsoleTests().admin(server)
        let name = server.username("found")
        let found = try server.client().signUp(SoftAuthenticator(), username: name)
        let key = "Bearer \(server.adminKey)"
        // Something on each page: an origin and an app (the audit log records both).
        #expect(try server.client().post("/admin/v1/origins", .object([("origin", .string("https://trips-\(uniqueSuffix()).example"))]),
                                         authorization: key).status == 201)
        #expect(try server.client().post("/admin/v1/apps", Self.app, authorization: key).status == 201)
        for (route, method, path, body, page) in Self.reads(a, found, username: name) {
            let (reply, trips, statements) = try Self.measured(server, route, method, path, body, bearer: a.bearer)
            #expect(reply.status == 200, "\(method) \(path): \(reply)")
            #expect(trips == RoundTripCounts(reads: 1), "\(method) \(path) with an admin user: \(trips)")
            #expect(statements.count == 1 && statements[0].contains("FROM admins WHERE user_id") && statements[0].contains(page),
                    "\(method) \(path): the page rides with the role's read: \(statements)")
            let (byKey, keyTrips, _) = try Self.measured(server, route, method, path, body, bearer: key)
            if route == "GET /admin/v1/me" {
                #expect(keyTrips == RoundTripCounts() && byKey.json?["actor"]?.stringValue == "admin-key", "the admin key is no account: \(keyTrips)")
            } else {
                #expect(keyTrips == RoundTripCounts(reads: 1), "\(method) \(path) with the admin key: \(keyTrips)")
                #expect(reply.json == byKey.json, "\(method) \(path): the preloaded page is the page the handler reads")
            }
        }
        let me = try a.client.get("/admin/v1/me", authorization: a.bearer).json
        #expect(me?["actor"]?.stringValue == a.userId && me?["user"]?["id"]?.stringValue == a.userId, "\(String(describing: me))")
        let audit = try a.client.get("/admin/v1/audit?action=app.*", authorization: a.bearer).json?["entries"]?.arrayValue
        #expect(audit?.first?["action"]?.stringValue == "app.added", "\(String(describing: audit))")
    }

    @Test("a query or a body the handler refuses preloads nothing: the guard's read alone, and its 400")
    func refusedInputPreloadsNothing() throws {
        let server = try Self.server.get()
        let a = try AdminConsoleTests().admin(server)
        let refused: [(String, String, String, JSONValue?, String)] = [
            ("GET /admin/v1/audit", "GET", "/admin/v1/audit?action=" + String(repeating: "a", count: 129), nil, "audit_log"),
            ("GET /admin/v1/audit", "GET", "/admin/v1/audit?before=0", nil, "audit_log"),
            ("GET /admin/v1/audit", "GET", "/admin/v1/audit?limit=many", nil, "audit_log"),
            ("GET /admin/v1/audit", "GET", "/admin/v1/audit?limit=1001", nil, "audit_log"),
            ("POST /admin/v1/wellknown/preview", "POST", "/admin/v1/wellknown/preview", .object([("app", .object([("platform", "ios")]))]),
             "FROM apps"),
            ("POST /admin/v1/wellknown/preview", "POST", "/admin/v1/wellknown/preview",
             .object([("app", Self.app.setting("fingerprints", .array(["AB:CD"])))]), "FROM apps"),
            ("GET /admin/v1/users", "GET", "/admin/v1/users?username=", nil, "starts_with"),
        ]
        for (route, method, path, body, page) in refused {
            let (reply, trips, statements) = try Self.measured(server, route, method, path, body, bearer: a.bearer)
            #expect(reply.status == 400 && reply.code == "invalid_request", "\(method) \(path): \(reply)")
            #expect(trips == RoundTripCounts(reads: 1) && statements.count == 1 && !statements[0].contains(page),
                    "\(method) \(path): only the role and the standing: \(statements)")
        }
    }

    @Test("a non-admin's session is 403 on every console read, and the caller's resolution hands nothing over")
    func nonAdminGetsNothing() throws {
        let server = try Self.server.get()
        let name = server.username("plain")
        let plain = try server.client().signUp(SoftAuthenticator(), username: name)
        let a = try AdminConsoleTests().admin(server)
        for (_, method, path, body, _) in Self.reads(a, plain, username: name) {
            let r = try server.client().send(method, path, body: body?.serialized() ?? [], authorization: plain.bearer)
            #expect(r.status == 403 && r.code == "forbidden", "\(method) \(path): \(r)")
            #expect(r.json?["entries"] == nil && r.json?["users"] == nil && r.json?["origins"] == nil && r.json?["user"] == nil, "\(r)")
        }
        // At the resolver: the page was asked for, and only an admin user's resolution hands it on.
        let audit: GuardPreload = .adminPage(.audit(AuditQuery(limit: 5, before: nil, user: nil, action: nil, actionPrefix: false)))
        func resolve(_ bearer: String) -> (Result<RouteCaller, ServiceError>, AdminPageRead?) {
            var loads = GuardLoads()
            let request = Request(method: "GET", target: "/admin/v1/audit", headers: [("Authorization", bearer)])
            do {
                return (.success(try server.services.callers.resolve(.admin, request, preload: audit, loads: &loads)), loads.adminPage)
            } catch {
                return (.failure(error), loads.adminPage)
            }
        }
        let (refused, handedOn) = resolve(plain.bearer)
        guard case .failure(let error) = refused else { Issue.record("a non-admin resolved: \(refused)"); return }
        #expect(error.code == .forbidden && handedOn == nil)
        let (allowed, page) = resolve(a.bearer)
        guard case .success(.adminUser) = allowed, case .audit(let entries)? = page else {
            Issue.record("\(allowed), \(String(describing: page))")
            return
        }
        #expect(entries.count <= 5 && !entries.isEmpty)
        // The admin key reads nothing in the resolution: the handler reads the page.
        let (byKey, keyPage) = resolve("Bearer \(server.adminKey)")
        guard case .success(.adminKey) = byKey else { Issue.record("\(byKey)"); return }
        #expect(keyPage == nil)
    }

    @Test("an admin user's passkey revocation reads the last way in with the admin's role: one round trip before the step-up")
    func revocationReadRidesWithTheRole() throws {
        let server = try Self.server.get()
        let a = try AdminConsoleTests().admin(server)
        let authenticator = SoftAuthenticator()
        let user = try server.client().signUp(authenticator, username: server.username("lastway"))
        let route = "DELETE /admin/v1/users/{id}/passkeys/{credentialId}"
        let path = "/admin/v1/users/\(user.userId)/passkeys/\(Base64URL.encode(authenticator.credentialId))"
        // The account's only passkey: 409 last_passkey before any step-up is asked, from that one read.
        let (reply, trips, statements) = try Self.measured(server, route, "DELETE", path, nil, bearer: a.bearer)
        #expect(reply.status == 409 && reply.code == "last_passkey", "\(reply)")
        #expect(trips == RoundTripCounts(reads: 1), "\(trips)")
        #expect(statements.count == 1 && statements[0].contains("FROM admins WHERE user_id") && statements[0].contains("FROM recovery_codes"),
                "the last-way-in read rides with the role's: \(statements)")
        // Another passkey in the account: the same one read, then the step-up is asked for.
        let other = SoftAuthenticator().credentialId
        _ = try server.database.pool.query("""
            INSERT INTO credentials (id, user_id, public_key, alg, sign_count, aaguid, transports, backup_eligible, backed_up,
                                     attestation_format, attestation_type, name)
            VALUES (\(other), \(user.userId), \([UInt8](repeating: 1, count: 77)), -7, 0, \([UInt8](repeating: 0, count: 16)),
                    '["internal"]'::jsonb, false, false, 'none', 'none', 'second')
            """)
        let (asked, askedTrips, _) = try Self.measured(server, route, "DELETE", path, nil, bearer: a.bearer)
        #expect(asked.status == 403 && asked.code == "step_up_required", "\(asked)")
        #expect(askedTrips == RoundTripCounts(reads: 1), "\(askedTrips)")
    }
}
