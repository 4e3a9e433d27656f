import Crypto
import Foundation
import JSON
import LatchkeyServer
import Storage
import Testing
import WebAuthn
import WebAuthnTesting

/// SPEC "Admin console": admins are users with the admin role; the admin API takes the admin key
/// (automation, unchanged) or an admin's access token from a user-verified passkey ceremony; with a
/// user token every change needs `Latchkey-Step-Up` for exactly `{"type":"latchkey.admin","method",
/// "path","body"}`, redeemed once, in the change's own transaction, and audited with the admin,
/// the action hash and the receipt.
@Suite("Admin console API")
struct AdminConsoleTests {
    /// A database of its own: the origin allowlist is one table for every rpId, and the origins these
    /// tests add would otherwise count as related origins in other suites' well-known checks.
    static let scratch = Result { try TestDatabase.Scratch() }
    static let fixture = Result {
        let database = try scratch.get()
        return try TestServer(name: "console") {
            $0.databaseURL = database.url
            $0.stepUpTTL = 60
            $0.wellKnownDirectory = "/nonexistent-\(uniqueSuffix())"  // the preview shows built files
        }
    }

    typealias Admin = EnrolledAdmin

    func admin(_ server: TestServer) throws -> Admin { try server.enrolAdmin() }

    static func action(_ method: String, _ path: String, _ body: JSONValue?) -> JSONValue {
        .object([("type", "latchkey.admin"), ("method", .string(method)), ("path", .string(path)), ("body", body ?? .null)])
    }

    func approval(_ a: Admin, _ action: JSONValue) throws -> String { try a.stepUp(action) }

    func send(_ client: Client, _ method: String, _ path: String, _ body: JSONValue?, bearer: String, stepUp: String? = nil) throws -> Reply {
        try client.send(method, path, body: body?.serialized() ?? [], authorization: bearer,
                        headers: stepUp.map { [("Latchkey-Step-Up", $0)] } ?? [])
    }

    func origins(_ server: TestServer) throws -> [String] {
        let r = try server.client().get("/admin/v1/origins", authorization: "Bearer \(server.adminKey)")
        return (r.json?["origins"]?.arrayValue ?? []).compactMap { $0["origin"]?.stringValue }
    }

    static let fingerprint = "14:6D:E9:83:C5:73:06:50:D8:EE:B9:95:2F:34:FC:64:16:A0:83:42:E6:1D:BE:A8:8A:04:96:B2:3F:CF:44:E5"

    /// Every change the admin API offers, as (method, path, body), against fresh targets.
    func changes(_ server: TestServer, victim: Session) throws -> (list: [(String, String, JSONValue?)], kept: String, absent: String) {
        let key = "Bearer \(server.adminKey)"
        let c = server.client()
        let origin = "https://gone-\(uniqueSuffix()).example"
        #expect(try c.post("/admin/v1/origins", .object([("origin", .string(origin))]), authorization: key).status == 201)
        let package = "com.example.gone\(uniqueSuffix())"
        #expect(try c.post("/admin/v1/apps", .object([("platform", "android"), ("packageName", .string(package)),
                                                       ("fingerprints", .array([.string(Self.fingerprint)]))]), authorization: key).status == 201)
        let credentialId = try #require(victim.passkey["id"]?.stringValue)
        let added = "https://new-\(uniqueSuffix()).example"
        return ([
            ("POST", "/admin/v1/origins", .object([("origin", .string(added))])),
            ("POST", "/admin/v1/origins", .object([("androidFingerprint", .string(Self.fingerprint))])),
            ("DELETE", "/admin/v1/origins/" + origin.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!, nil),
            ("POST", "/admin/v1/apps", .object([("platform", "ios"), ("teamId", "ABCDE12345"), ("bundleId", "com.example.new")])),
            ("DELETE", "/admin/v1/apps/android:\(package)", nil),
            ("POST", "/admin/v1/users/ext-\(uniqueSuffix())/enrolment-tickets", .object([("username", .string(server.username("t")))])),
            ("POST", "/admin/v1/users/ext-\(uniqueSuffix())/device-key-tickets", nil),
            ("DELETE", "/admin/v1/users/\(victim.userId)/passkeys/\(credentialId)", nil),
            ("POST", "/admin/v1/accounts/\(victim.userId)/enrolment-tickets", nil),
            ("DELETE", "/admin/v1/users/\(victim.userId)/device-keys/none", nil),
            ("DELETE", "/admin/v1/users/\(victim.userId)/sessions/none", nil),
        ], origin, added)
    }

    @Test("every admin change with a user token but no step-up is 403 step_up_required, and nothing changes")
    func changesNeedStepUp() throws {
        let server = try Self.fixture.get()
        let a = try admin(server)
        let victim = try server.client().signUp(SoftAuthenticator(), username: server.username("victim"))
        // A recovery code: revoking the victim's only passkey is not refused as the last way in (409) first.
        try LastWayInTests.giveRecoveryCode(victim.userId, url: try Self.scratch.get().url)
        let (list, kept, absent) = try changes(server, victim: victim)
        for (method, path, body) in list {
            let r = try send(a.client, method, path, body, bearer: a.bearer)
            #expect(r.status == 403 && r.code == "step_up_required", "\(method) \(path): \(r)")
            // An access token is no step-up token.
            let t = try send(a.client, method, path, body, bearer: a.bearer, stepUp: a.accessToken)
            #expect(t.status == 403 && t.code == "step_up_required", "\(method) \(path): \(t)")
        }
        #expect(try origins(server).contains(kept) && !origins(server).contains(absent))
        // The victim's passkey is still live.
        #expect(try server.client().get("/v1/passkeys", authorization: victim.bearer).status == 200)
    }

    /// Issue 33, point 9: the console asked for the passkey first and was refused after. What the
    /// request and the configuration alone decide is 400 before the step-up (SPEC "Assurance").
    @Test("origins and apps: checks that need only the request and the configuration answer 400 before step_up_required")
    func requestChecksBeforeTheStepUp() throws {
        let server = try Self.fixture.get()
        let a = try admin(server)
        let refused: [(String, JSONValue)] = [
            ("/admin/v1/origins", .object([("origin", "http://localhost:4321")])),           // http:// outside dev mode
            ("/admin/v1/origins", .object([("origin", "https://192.0.2.7")])),               // never under the rpId, never related
            ("/admin/v1/origins", .object([("origin", "https://co.uk")])),                   // a public suffix
            ("/admin/v1/origins", .object([("androidFingerprint", "AB:CD:EF")])),            // a malformed fingerprint
            ("/admin/v1/origins", .object([])),
            ("/admin/v1/apps", .object([("platform", "ios"), ("teamId", "ABCDE"), ("bundleId", "com.example.short")])),
            ("/admin/v1/apps", .object([("platform", "android"), ("packageName", "com.example.fp"), ("fingerprints", .array(["SHA256: AB:CD"]))])),
        ]
        for (path, body) in refused {
            let r = try send(a.client, "POST", path, body, bearer: a.bearer)
            #expect(r.status == 400 && r.code == "invalid_request", "\(path) \(String(decoding: body.serialized(), as: UTF8.self)): \(r)")
        }
        // Well-formed (the keytool line too): the step-up is asked for, and nothing changed without it.
        let accepted: [(String, JSONValue)] = [
            ("/admin/v1/origins", .object([("origin", .string("https://www.\(server.rpId)"))])),
            ("/admin/v1/origins", .object([("origin", .string("https://related-\(uniqueSuffix()).example"))])),
            ("/admin/v1/origins", .object([("androidFingerprint", .string("SHA256: " + Self.fingerprint))])),
            ("/admin/v1/apps", .object([("platform", "android"), ("packageName", "com.example.keytool"),
                                        ("fingerprints", .array([.string("SHA256: " + Self.fingerprint)]))])),
        ]
        for (path, body) in accepted {
            let r = try send(a.client, "POST", path, body, bearer: a.bearer)
            #expect(r.status == 403 && r.code == "step_up_required", "\(path) \(String(decoding: body.serialized(), as: UTF8.self)): \(r)")
        }
    }

    @Test("a step-up for another change (path, body or method) is refused; the right one works once")
    func stepUpBoundToTheChange() throws {
        let server = try Self.fixture.get()
        let a = try admin(server)
        let key = "Bearer \(server.adminKey)"
        let first = "https://one-\(uniqueSuffix()).example", second = "https://two-\(uniqueSuffix()).example"
        for o in [first, second] { #expect(try a.client.post("/admin/v1/origins", .object([("origin", .string(o))]), authorization: key).status == 201) }
        let path1 = "/admin/v1/origins/" + first.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let path2 = "/admin/v1/origins/" + second.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!

        // Approved for the first origin, presented for the second: refused, and the second stays.
        let forFirst = try approval(a, Self.action("DELETE", path1, nil))
        let wrongPath = try send(a.client, "DELETE", path2, nil, bearer: a.bearer, stepUp: forFirst)
        #expect(wrongPath.status == 403 && wrongPath.code == "step_up_required", "\(wrongPath)")
        #expect(try origins(server).contains(second))
        // Another method on the same path.
        let wrongMethod = try approval(a, Self.action("GET", path1, nil))
        #expect(try send(a.client, "DELETE", path1, nil, bearer: a.bearer, stepUp: wrongMethod).code == "step_up_required")
        // Another body.
        let third = "https://three-\(uniqueSuffix()).example"
        let forOther = try approval(a, Self.action("POST", "/admin/v1/origins", .object([("origin", "https://evil.example")])))
        let wrongBody = try send(a.client, "POST", "/admin/v1/origins", .object([("origin", .string(third))]), bearer: a.bearer, stepUp: forOther)
        #expect(wrongBody.status == 403 && wrongBody.code == "step_up_required", "\(wrongBody)")
        #expect(try !origins(server).contains(third) && !origins(server).contains("https://evil.example"))
        // An app's step-up (not latchkey.admin) is refused too.
        let transfer = try approval(a, StepUpTests.transfer)
        #expect(try send(a.client, "DELETE", path1, nil, bearer: a.bearer, stepUp: transfer).code == "step_up_required")

        // The right one: 204 once; the same approval again is used up (and the origin re-added stays).
        let ok = try send(a.client, "DELETE", path1, nil, bearer: a.bearer, stepUp: forFirst)
        #expect(ok.status == 204, "\(ok)")
        #expect(try !origins(server).contains(first))
        #expect(try a.client.post("/admin/v1/origins", .object([("origin", .string(first))]), authorization: key).status == 201)
        let again = try send(a.client, "DELETE", path1, nil, bearer: a.bearer, stepUp: forFirst)
        #expect(again.status == 403 && again.code == "step_up_required", "\(again)")
        #expect(try origins(server).contains(first))

        // A refused change (404) does not use the approval up.
        let absent = "https://absent-\(uniqueSuffix()).example"
        let absentPath = "/admin/v1/origins/" + absent.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let forAbsent = try approval(a, Self.action("DELETE", absentPath, nil))
        #expect(try send(a.client, "DELETE", absentPath, nil, bearer: a.bearer, stepUp: forAbsent).status == 404)
        #expect(try a.client.post("/admin/v1/origins", .object([("origin", .string(absent))]), authorization: key).status == 201)
        #expect(try send(a.client, "DELETE", absentPath, nil, bearer: a.bearer, stepUp: forAbsent).status == 204)
    }

    @Test("a change that finds nothing to do still uses its step-up up: a replay is step_up_required, not 200 again")
    func noOpChangeUsesTheStepUpUp() throws {
        let server = try Self.fixture.get()
        let a = try admin(server)
        let origin = "https://noop-\(uniqueSuffix()).example"
        let body: JSONValue = .object([("origin", .string(origin))])
        let approved = try approval(a, Self.action("POST", "/admin/v1/origins", body))
        let added = try send(a.client, "POST", "/admin/v1/origins", body, bearer: a.bearer, stepUp: approved)
        #expect(added.status == 201, "\(added)")
        // The same request again, the origin now present: nothing would change, yet the step-up is spent.
        let replay = try send(a.client, "POST", "/admin/v1/origins", body, bearer: a.bearer, stepUp: approved)
        #expect(replay.status == 403 && replay.code == "step_up_required", "\(replay)")
        // A fresh approval for the already-present origin: answered once, then used up as well.
        let fresh = try approval(a, Self.action("POST", "/admin/v1/origins", body))
        let present = try send(a.client, "POST", "/admin/v1/origins", body, bearer: a.bearer, stepUp: fresh)
        #expect(present.status < 300, "\(present)")
        let again = try send(a.client, "POST", "/admin/v1/origins", body, bearer: a.bearer, stepUp: fresh)
        #expect(again.status == 403 && again.code == "step_up_required", "\(again)")
    }

    @Test("another admin's step-up is refused")
    func anotherAdminsStepUp() throws {
        let server = try Self.fixture.get()
        let a = try admin(server), b = try admin(server)
        let body: JSONValue = .object([("origin", .string("https://b-\(uniqueSuffix()).example"))])
        let bApproval = try approval(b, Self.action("POST", "/admin/v1/origins", body))
        let r = try send(a.client, "POST", "/admin/v1/origins", body, bearer: a.bearer, stepUp: bApproval)
        #expect(r.status == 403 && r.code == "step_up_required", "\(r)")
        #expect(try send(b.client, "POST", "/admin/v1/origins", body, bearer: b.bearer, stepUp: bApproval).status == 201)
    }

    @Test("apps and tickets with a user token: another admin's step-up writes nothing, no account either; the admin's own works once")
    func appAndTicketChangesWriteAllOrNothing() throws {
        let server = try Self.fixture.get()
        let a = try admin(server), b = try admin(server)
        let key = "Bearer \(server.adminKey)"
        func apps() throws -> [String] {
            (try a.client.get("/admin/v1/apps", authorization: key).json?["apps"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue }
        }
        func accounts(_ username: String) throws -> Int {
            try a.client.get("/admin/v1/users?username=\(username)", authorization: key).json?["users"]?.arrayValue?.count ?? -1
        }
        let package = "com.example.stepped\(uniqueSuffix())"
        let app: JSONValue = .object([("platform", "android"), ("packageName", .string(package)),
                                      ("fingerprints", .array([.string(Self.fingerprint)]))])
        let externalId = "ext-\(uniqueSuffix())", username = server.username("ticketed")
        let ticketPath = "/admin/v1/users/\(externalId)/enrolment-tickets", deviceKeyPath = "/admin/v1/users/\(externalId)/device-key-tickets"
        let names: JSONValue = .object([("username", .string(username))])
        let changes: [(String, String, JSONValue?)] = [("POST", "/admin/v1/apps", app), ("POST", ticketPath, names)]
        for (method, path, body) in changes {
            let theirs = try approval(b, Self.action(method, path, body))
            let refused = try send(a.client, method, path, body, bearer: a.bearer, stepUp: theirs)
            #expect(refused.status == 403 && refused.code == "step_up_required", "\(path): \(refused)")
        }
        #expect(try !apps().contains("android:\(package)"))
        #expect(try accounts(username) == 0, "a refused ticket leaves no account behind")
        // Unknown to Latchkey yet: the device-key ticket is 404 and its step-up is not used up.
        let forDeviceKey = try approval(a, Self.action("POST", deviceKeyPath, nil))
        expectProblem(try send(a.client, "POST", deviceKeyPath, nil, bearer: a.bearer, stepUp: forDeviceKey), 404, "not_found")
        for (method, path, body) in changes + [("POST", deviceKeyPath, nil)] {
            let mine = path == deviceKeyPath ? forDeviceKey : try approval(a, Self.action(method, path, body))
            let done = try send(a.client, method, path, body, bearer: a.bearer, stepUp: mine)
            #expect(done.status == 201, "\(path): \(done)")
            let replay = try send(a.client, method, path, body, bearer: a.bearer, stepUp: mine)
            #expect(replay.status == 403 && replay.code == "step_up_required", "\(path): \(replay)")
        }
        #expect(try apps().contains("android:\(package)"))
        #expect(try accounts(username) == 1)
        let lines = try server.database.audit.entries(limit: 100, before: nil, user: a.userId).filter { $0.actor == a.userId }
        for action in ["app.added", "ticket.issued", "device_key_ticket.issued"] {
            #expect(lines.filter { $0.action == action }.count == 1, "\(action): \(lines.map(\.action))")
        }
        // Removing the app: another admin's step-up leaves it; the admin's own removes it once.
        let removal = "/admin/v1/apps/android:\(package)"
        let theirs = try approval(b, Self.action("DELETE", removal, nil))
        #expect(try send(a.client, "DELETE", removal, nil, bearer: a.bearer, stepUp: theirs).code == "step_up_required")
        #expect(try apps().contains("android:\(package)"))
        let mine = try approval(a, Self.action("DELETE", removal, nil))
        #expect(try send(a.client, "DELETE", removal, nil, bearer: a.bearer, stepUp: mine).status == 204)
        #expect(try send(a.client, "DELETE", removal, nil, bearer: a.bearer, stepUp: mine).status == 404)
        #expect(try !apps().contains("android:\(package)"))
    }

    @Test("an approved change is audited with the admin's user id, the action hash and the receipt")
    func auditNamesTheAdmin() throws {
        let server = try Self.fixture.get()
        let a = try admin(server)
        let origin = "https://audited-\(uniqueSuffix()).example"
        let body: JSONValue = .object([("origin", .string(origin))])
        let token = try approval(a, Self.action("POST", "/admin/v1/origins", body))
        #expect(try send(a.client, "POST", "/admin/v1/origins", body, bearer: a.bearer, stepUp: token).status == 201)
        let claims = try StepUpTests.claims(token)
        let audit = try a.client.get("/admin/v1/audit?action=origin.added&user=\(a.userId)", authorization: a.bearer)
        #expect(audit.status == 200, "\(audit)")
        let entry = try #require(audit.json?["entries"]?.arrayValue?.first { $0["subject"]?.stringValue == origin }, "\(audit)")
        #expect(entry["actor"]?.stringValue == a.userId)
        #expect(entry["actorUsername"]?.stringValue?.hasPrefix("admin-") == true)
        #expect(entry["detail"]?["actionHash"]?.stringValue == claims["action_hash"]?.stringValue)
        #expect(entry["detail"]?["receiptId"]?.stringValue == claims["receipt_id"]?.stringValue)
        // The filters: another action, or another user, leave it out.
        let other = try a.client.get("/admin/v1/audit?action=origin.removed&user=\(a.userId)", authorization: a.bearer)
        #expect(other.json?["entries"]?.arrayValue?.contains { $0["subject"]?.stringValue == origin } == false)
        let prefixed = try a.client.get("/admin/v1/audit?action=origin.*&user=\(a.userId)", authorization: a.bearer)
        #expect(prefixed.json?["entries"]?.arrayValue?.contains { $0["subject"]?.stringValue == origin } == true)
    }

    @Test("the admin key keeps working for automation, audited as admin-key")
    func adminKeyUnchanged() throws {
        let server = try Self.fixture.get()
        let c = server.client(), key = "Bearer \(server.adminKey)"
        let origin = "https://auto-\(uniqueSuffix()).example"
        #expect(try c.post("/admin/v1/origins", .object([("origin", .string(origin))]), authorization: key).status == 201)
        #expect(try c.send("DELETE", "/admin/v1/origins/" + origin.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!,
                           authorization: key).status == 204)
        #expect(try c.enrolmentTicket(externalId: "auto-\(uniqueSuffix())", username: server.username("auto")).status == 201)
        let audit = try c.get("/admin/v1/audit?action=origin.removed", authorization: key)
        let entry = try #require(audit.json?["entries"]?.arrayValue?.first { $0["subject"]?.stringValue == origin })
        #expect(entry["actor"]?.stringValue == "admin-key")
        #expect(try c.get("/admin/v1/me", authorization: key).json?["actor"]?.stringValue == "admin-key")
    }

    @Test("a non-admin's token is 403 forbidden on reads and changes; no token or a bad one is 401")
    func nonAdminForbidden() throws {
        let server = try Self.fixture.get()
        let c = server.client()
        let user = try c.signUp(SoftAuthenticator(), username: server.username("plain"))
        for (method, path) in [("GET", "/admin/v1/me"), ("GET", "/admin/v1/origins"), ("GET", "/admin/v1/users?username=a"),
                               ("GET", "/admin/v1/audit"), ("DELETE", "/admin/v1/origins/x")] {
            let r = try c.send(method, path, authorization: user.bearer)
            #expect(r.status == 403 && r.code == "forbidden", "\(method) \(path): \(r)")
        }
        #expect(try c.post("/admin/v1/origins", .object([("origin", "https://x.example")]), authorization: user.bearer).code == "forbidden")
        #expect(try c.get("/admin/v1/origins").status == 401)
        #expect(try c.get("/admin/v1/origins", authorization: "Bearer nonsense").status == 401)
    }

    @Test("a refreshed token (not a user-verified ceremony) or a removed admin is 403 forbidden")
    func onlyUserVerifiedAdmins() throws {
        let server = try Self.fixture.get()
        let a = try admin(server)
        #expect(try a.client.get("/admin/v1/me", authorization: a.bearer).status == 200)
        let refreshed = try a.client.send("POST", "/v1/token", body: Array("grant_type=refresh_token&refresh_token=\(a.refreshToken)".utf8),
                                          contentType: "application/x-www-form-urlencoded")
        let minted = try #require(refreshed.json?["access_token"]?.stringValue, "\(refreshed)")
        #expect(try a.client.get("/admin/v1/me", authorization: "Bearer \(minted)").code == "forbidden")
        let username = try #require(try a.client.get("/admin/v1/me", authorization: a.bearer).json?["user"]?["username"]?.stringValue)
        #expect(try server.services.admin.removeAdmin(username: username, by: .named("cli")))
        #expect(try a.client.get("/admin/v1/me", authorization: a.bearer).code == "forbidden")
    }

    @Test("find a user, see their passkeys and sessions, revoke a passkey with a step-up: their sessions end")
    func usersPage() throws {
        let server = try Self.fixture.get()
        let a = try admin(server)
        let name = server.username("found")
        let victim = try server.client().signUp(SoftAuthenticator(), username: name)
        // A recovery code keeps a way in: the admin may revoke the account's only passkey.
        try LastWayInTests.giveRecoveryCode(victim.userId, url: try Self.scratch.get().url)
        let found = try a.client.get("/admin/v1/users?username=\(name)", authorization: a.bearer)
        let summary = try #require(found.json?["users"]?.arrayValue?.first, "\(found)")
        #expect(summary["id"]?.stringValue == victim.userId && summary["admin"]?.boolValue == false)
        let detail = try a.client.get("/admin/v1/users/\(victim.userId)", authorization: a.bearer)
        let passkeys = try #require(detail.json?["passkeys"]?.arrayValue, "\(detail)")
        #expect(passkeys.count == 1 && passkeys[0]["provider"] != nil)
        #expect(detail.json?["sessions"]?.arrayValue?.count == 1)
        #expect(detail.json?["deviceKeys"]?.arrayValue?.isEmpty == true)
        let credentialId = try #require(passkeys[0]["id"]?.stringValue)
        let path = "/admin/v1/users/\(victim.userId)/passkeys/\(credentialId)"
        let token = try approval(a, Self.action("DELETE", path, nil))
        #expect(try send(a.client, "DELETE", path, nil, bearer: a.bearer, stepUp: token).status == 204)
        #expect(try server.client().get("/v1/passkeys", authorization: victim.bearer).status == 401)
        #expect(try a.client.get("/admin/v1/users/\(victim.userId)", authorization: a.bearer).json?["passkeys"]?.arrayValue?.isEmpty == true)
        #expect(try a.client.get("/admin/v1/users/nobody", authorization: a.bearer).status == 404)
    }

    @Test("the well-known preview shows the files a declaration would serve and the checker's verdict, changing nothing")
    func preview() throws {
        let server = try Self.fixture.get()
        let a = try admin(server)
        let package = "com.example.preview\(uniqueSuffix())"
        let app: JSONValue = .object([("platform", "android"), ("packageName", .string(package)), ("fingerprints", .array([.string(Self.fingerprint)]))])
        let r = try a.client.post("/admin/v1/wellknown/preview", .object([("app", app)]), authorization: a.bearer)
        #expect(r.status == 200, "\(r)")
        let files = try #require(r.json?["files"]?.arrayValue)
        let assetlinks = try #require(files.first { $0["name"]?.stringValue == "assetlinks.json" }?["content"]?.stringValue)
        #expect(assetlinks.contains(package) && assetlinks.contains(Self.fingerprint))
        #expect(r.json?["origins"]?.arrayValue?.contains("android:apk-key-hash:FG3pg8VzBlDY7rmVLzT8ZBagg0LmHb6oigSWsj_PROU") == true)
        #expect(r.json?["problems"]?.arrayValue != nil)
        let apps = try a.client.get("/admin/v1/apps", authorization: a.bearer)
        #expect(apps.json?["apps"]?.arrayValue?.contains { $0["packageName"]?.stringValue == package } == false, "a preview declares nothing")
        let bad = try a.client.post("/admin/v1/wellknown/preview", .object([("app", app.setting("fingerprints", .array(["AB:CD"])))]),
                                    authorization: a.bearer)
        #expect(bad.status == 400 && bad.code == "invalid_request", "\(bad)")
    }
}
