import Crypto
import Foundation
import HTTP
import JSON
import LatchkeyServer
import Synchronization
import Testing
import WebAuthnTesting

/// Issue 13, defect 1 — SPEC: "No input a client can send yields a 5xx or a crash." Every route of
/// the route table (read from it, so a new route is swept too) gets NUL bytes, control characters,
/// overlong and malformed values in each path parameter, each body member and the query, with the
/// credentials that get it past authentication; every answer must be a 2xx or a 4xx problem with
/// one of SPEC's codes. Then the cases the review found, each with its exact code.
@Suite("No input yields a 5xx")
struct InputSweepTests {
    static let fixture = Result { try TestServer(name: "sweep") }
    var server: TestServer { get throws { try Self.fixture.get() } }

    static let codes: Set<String> = Set(ServiceError.Code.allCases.map(\.rawValue)).subtracting(["internal_error"])

    /// Path segments as sent (percent-encoded on the wire).
    static let segments: [String] = [
        "%00", "a%00b", "AAAAAAAAAAAAAAAAAAAA%00A", "%01", "%1F", "%7F", "%C2%85", "%E2%80%AE", "%FF", "%FF%FE", "%C0%80",
        "%2F", "..", "%2E%2E", "%25", "A%20B", "%F0%9F%98%80", String(repeating: "A", count: 3000),
        "AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAA=", "https%3A%2F%2Fa%00.example",
        "ios:ABCDE12345.com.example%00", "android:com.example%00",
    ]

    /// Values for body members: strings a parser hands on as they are, and every other JSON type.
    static let values: [JSONValue] = [
        "\u{0}", "a\u{0}b", "AAAAAAAAAAAAAAAAAAAA\u{0}A", "\u{1}", "\u{1F}", "\u{7F}", "\u{85}", "x\u{202E}y", "\u{FEFF}", "",
        .string(String(repeating: "A", count: 5000)), .string(String(repeating: "é", count: 2000)), "https://a\u{0}.example",
        .number(1e300), .number(-1), .number(0.5), true, .null, [], .object([]), ["\u{0}"], .object([("\u{0}", "\u{0}")]),
    ]

    static let id16 = Base64URL.encode([UInt8](repeating: 7, count: 16))
    static let b32 = Base64URL.encode([UInt8](repeating: 9, count: 32))
    static let action: JSONValue = .object([("type", "payment"), ("amount", 1)])

    /// Every member a route reads, with a plausible value, so that one bad member at a time gets as
    /// far into the route as it can.
    static func base(_ suffix: String) -> [(key: String, value: JSONValue)] {
        [("username", .string("sweep-\(suffix)")), ("displayName", "Sweep"), ("name", "Sweep"), ("keyId", .string(id16)),
         ("action", action), ("challengeId", .string(b32)), ("signature", .string(b32)), ("deviceId", "device-1"),
         ("publicKey", .string(Base64URL.encode([0x04] + [UInt8](repeating: 1, count: 64)))), ("platform", "ios"),
         ("actionHash", .string(b32)), ("grant_type", "refresh_token"), ("refresh_token", "lkr_x"),
         ("origin", .string("https://sweep-\(suffix).latchkey.test")), ("teamId", "ABCDE12345"), ("bundleId", "com.example.sweep"),
         ("handleAllUrls", false)]
    }
    static let others = ["method", "credential", "attestation", "androidFingerprint", "appId", "packageName", "fingerprints"]

    struct Probe: Sendable {
        let method: String
        let target: String
        let body: [UInt8]
        let authorization: String?
        let contentType: String
    }

    /// Every probe for one route.
    static func probes(method: String, pattern: String, user: String, admin: String, suffix: String) -> [Probe] {
        let auth = pattern.hasPrefix("/admin/") ? admin : user
        let hasParameters = pattern.contains("{")
        func target(_ segment: String?) -> String {
            pattern.split(separator: "/", omittingEmptySubsequences: false).map { part in
                part.hasPrefix("{") ? (segment ?? "AAAAAAAAAAAAAAAAAAAAAA") : String(part)
            }.joined(separator: "/")
        }
        var out: [Probe] = []
        let takesBody = ["POST", "PATCH", "PUT"].contains(method)
        let good = JSONValue.object(base(suffix)).serialized()
        // Path parameters, with a plausible body where the route takes one.
        if hasParameters {
            for segment in segments {
                out.append(Probe(method: method, target: target(segment), body: takesBody ? good : [], authorization: auth,
                                 contentType: "application/json"))
            }
        }
        // Queries (the audit log reads limit, before, user and action, the users page username;
        // others must ignore them).
        for query in ["limit=%00&before=%00", "limit=-1&before=99999999999999999999999", "limit=1e400", "%00=%00",
                      "user=%00&action=%00&username=%00", "user=a%00b&action=a%01*&username=a%00"] {
            out.append(Probe(method: method, target: target(nil) + "?" + query, body: [], authorization: auth, contentType: "application/json"))
        }
        guard takesBody else { return out }
        // Body members, one bad value at a time: in a body that has every other member, and alone
        // beside a valid action (so the branch that member selects is the one taken).
        let names = base(suffix).map(\.key) + others
        for name in names {
            for value in values {
                let full = JSONValue.object(base(suffix)).setting(name, value).serialized()
                out.append(Probe(method: method, target: target(nil), body: full, authorization: auth, contentType: "application/json"))
                if case .string = value {
                    let alone = JSONValue.object([(name, value), ("action", action)]).serialized()
                    out.append(Probe(method: method, target: target(nil), body: alone, authorization: auth, contentType: "application/json"))
                }
            }
            // The action's members too.
            let nested = JSONValue.object(base(suffix)).setting("action", .object([("type", .string("\u{0}")), (name, .string("\u{0}"))])).serialized()
            out.append(Probe(method: method, target: target(nil), body: nested, authorization: auth, contentType: "application/json"))
        }
        // Form bodies (OAuth's /v1/token), and member names that are themselves bad.
        for form in ["grant_type=refresh_token&refresh_token=%00", "grant_type=%00", "%00=%00", "grant_type=refresh_token&refresh_token=%FF"] {
            out.append(Probe(method: method, target: target(nil), body: Array(form.utf8), authorization: auth,
                             contentType: "application/x-www-form-urlencoded"))
        }
        out.append(Probe(method: method, target: target(nil), body: Array(#"{"\u0000":"\u0000","a\u0001":1}"#.utf8),
                         authorization: auth, contentType: "application/json"))
        return out
    }

    /// SPEC "OpenID Provider": `/oauth2/*` answers OAuth's own formats — RFC 6749 §5.2 JSON with a
    /// registered `error`, the 400 page that never redirects, or a 303 redirect carrying `error`.
    static let oauthErrors: Set<String> = ["invalid_request", "invalid_client", "invalid_grant", "unauthorized_client", "unsupported_grant_type",
                                           "invalid_scope", "invalid_token", "insufficient_scope", "invalid_authorization_details",
                                           "unsupported_response_type", "login_required", "request_not_supported", "invalid_target"]

    static func oauthAnswer(_ target: String, _ reply: Reply) -> Bool {
        guard target.hasPrefix("/oauth2/"), (300..<500).contains(reply.status) else { return false }
        if reply.status == 303 { return reply.header("Location") != nil }
        if reply.contentType?.hasPrefix("text/html") == true { return reply.status == 400 }
        return reply.contentType?.hasPrefix("application/json") == true && reply.json?["error"]?.stringValue.map(oauthErrors.contains) == true
    }

    @Test("every route, every parameter and member, NUL / control / overlong / wrong type → never a 5xx")
    func sweep() throws {
        let server = try server
        let client = server.client()
        let session = try client.signUp(SoftAuthenticator(), username: server.username("sweeper"))
        let routes = Application(services: server.services).routes
        #expect(routes.count >= 25, "\(routes.count) routes")
        let suffix = uniqueSuffix()
        let all = routes.flatMap { Self.probes(method: $0.method, pattern: $0.pattern, user: session.bearer,
                                               admin: "Bearer \(server.adminKey)", suffix: suffix) }
        // Logout ends the sweeper's session: its probes go after every other route's, so the routes
        // after it in the table are swept with a live session too (not answered 401 throughout).
        let endsSession = { (p: Probe) in p.target.hasPrefix("/v1/logout") }
        let endpoint = server.endpoint
        let failures = Mutex<[String]>([])
        for (batch, threads) in [(all.filter { !endsSession($0) }, 4), (all.filter(endsSession), 1)] {
            _ = onThreads(threads) { t, start in
                start()
                let c = Client(endpoint)
                for probe in batch.enumerated().filter({ $0.offset % threads == t }).map(\.element) {
                    let what = "\(probe.method) \(probe.target.prefix(120)) \(String(decoding: probe.body.prefix(160), as: UTF8.self))"
                    do {
                        let reply = try c.send(probe.method, probe.target, body: probe.body, contentType: probe.contentType,
                                               authorization: probe.authorization)
                        // 308: `GET /admin` redirects to the console's `/admin/` whatever its query says.
                        let fine = (200..<300).contains(reply.status) || reply.status == 304 || reply.status == 308
                            || ((400..<500).contains(reply.status) && reply.isProblem && reply.code.map(Self.codes.contains) == true)
                        if !fine && !Self.oauthAnswer(probe.target, reply) { failures.withLock { $0.append("\(what) → \(reply)") } }
                    } catch {
                        failures.withLock { $0.append("\(what) → transport error \(error)") }
                        c.http.close()
                    }
                }
                return 0
            }
        }
        let found = failures.withLock { $0 }
        #expect(found.isEmpty, "\(found.count) of \(all.count) probes: \(found.prefix(20).joined(separator: "\n"))")
    }

    // MARK: The review's cases, each with its code

    @Test("ids in the path that cannot be ids → 404 not_found")
    func malformedPathIds() throws {
        let server = try server
        let client = server.client()
        let session = try client.signUp(SoftAuthenticator(), username: server.username("ids"))
        for segment in ["%00", "a%00b", "%01", String(repeating: "A", count: 3000), "AAAAAAAAAAAAAAAAAAAAA", "%FF"] {
            expectProblem(try client.send("DELETE", "/v1/device-keys/\(segment)", authorization: session.bearer), 404, "not_found")
            expectProblem(try client.get("/v1/step-up/receipts/\(segment)", authorization: session.bearer), 404, "not_found")
            // SPEC "Assurance" order: the step-up a revocation needs is asked for before the id is parsed.
            expectProblem(try client.send("DELETE", "/v1/passkeys/\(segment)", authorization: session.bearer), 403, "step_up_required")
            // Issue 19: these reached PostgreSQL with a NUL (503) before ids were typed in the route table.
            expectProblem(try client.send("DELETE", "/v1/sessions/\(segment)", authorization: session.bearer), 404, "not_found")
            expectProblem(try client.send("DELETE", "/v1/recovery/\(segment)", authorization: session.bearer), 404, "not_found")
            expectProblem(try client.send("PATCH", "/v1/passkeys/\(segment)", body: JSONValue.object([("name", "n")]).serialized(),
                                   authorization: session.bearer), 404, "not_found")
            let admin = "Bearer \(server.adminKey)"
            expectProblem(try client.send("DELETE", "/admin/v1/origins/\(segment)", authorization: admin), 404, "not_found")
            expectProblem(try client.get("/admin/v1/step-up/receipts/\(segment)", authorization: admin), 404, "not_found")
        }
    }

    @Test("query filters with NUL or control characters → 400 invalid_request, not a 503")
    func controlCharactersInQueries() throws {
        let server = try server
        let client = server.client()
        let admin = "Bearer \(server.adminKey)"
        for bad in ["%00", "a%00b", "%01", "x%7F"] {
            expectProblem(try client.get("/admin/v1/audit?user=\(bad)", authorization: admin), 400, "invalid_request")
            expectProblem(try client.get("/admin/v1/audit?action=\(bad)", authorization: admin), 400, "invalid_request")
            expectProblem(try client.get("/admin/v1/users?username=\(bad)", authorization: admin), 400, "invalid_request")
        }
        // Printable filters still answer.
        #expect(try client.get("/admin/v1/audit?user=nobody&action=passkey.*", authorization: admin).status == 200)
        #expect(try client.get("/admin/v1/users?username=nobody", authorization: admin).status == 200)
    }

    @Test("strings with NUL or control characters in bodies → 400 invalid_request")
    func controlCharactersInBodies() throws {
        let server = try server
        let client = server.client()
        let session = try client.signUp(SoftAuthenticator(), username: server.username("strings"))
        // The mail routes exist only where mail can go out.
        let mailServer = try TestServer(name: "sweep-mail") { RecoveryTests.mailSettings(&$0) }
        let mailClient = mailServer.client()
        let mailSession = try mailClient.signUp(SoftAuthenticator(), username: mailServer.username("strings"))
        for bad in ["\u{0}", "a\u{0}", "\u{1}", "\u{7F}"] {
            expectProblem(try client.post("/v1/step-up/challenges", .object([("keyId", .string(bad)), ("action", Self.action)]),
                                   authorization: session.bearer), 400, "invalid_request")
            expectProblem(try client.registrationOptions(username: "u\(bad)"), 400, "invalid_request")
            expectProblem(try client.post("/v1/passkeys/authentication/options", .object([("username", .string("u\(bad)"))])),
                   400, "invalid_request")
            let admin = "Bearer \(server.adminKey)"
            expectProblem(try client.post("/admin/v1/users/ext\(bad == "\u{0}" ? "%00" : "%01")/enrolment-tickets",
                                   .object([("username", "ticketed")]), authorization: admin), 404, "not_found")
            expectProblem(try client.post("/admin/v1/origins", .object([("origin", .string("https://a\(bad).example"))]), authorization: admin),
                   400, "invalid_request")
            // Issue 19: body ids with NUL reached PostgreSQL on the newest routes (503); now 400 at the edge.
            expectProblem(try mailClient.post("/v1/account/email/verify", .object([("challengeId", .string("otp_\(bad)")), ("code", "123456")]),
                                              authorization: mailSession.bearer), 400, "invalid_request")
            expectProblem(try mailClient.post("/v1/recovery/verify", .object([("challengeId", .string("otp_\(bad)")), ("code", "123456")])),
                          400, "invalid_request")
            expectProblem(try client.post("/v1/recovery/cancel", .object([("cancelToken", .string("lkcan_\(bad)"))])), 400, "invalid_request")
        }
    }
}
