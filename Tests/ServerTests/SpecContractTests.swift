import Foundation
import HTTP
import JSON
import LatchkeyServer
import Testing
import WebAuthnTesting

/// The spec audit's findings: where the running server answered something SPEC's HTTP contract
/// (or, where SPEC is silent, RFC 9110 / RFC 6749 / RFC 6750) does not allow. One test per finding.
@Suite("SPEC contract")
struct SpecContractTests {
    static let fixture = Result { try TestServer(name: "contract") }
    var server: TestServer { get throws { try Self.fixture.get() } }

    // MARK: Wrong JSON types are invalid_request, never replaced by a default

    @Test("registration options: a displayName that is not a string → 400 invalid_request (it was taken as the username)")
    func registrationDisplayNameType() throws {
        let server = try server
        let client = server.client()
        for value: JSONValue in [.number(5), .bool(true), .array(["x"]), .object([("a", "b")])] {
            let r = try client.post("/v1/passkeys/registration/options",
                                    .object([("username", .string(server.username("typed"))), ("displayName", value)]))
            expectProblem(r, 400, "invalid_request")
            #expect(r.json?["detail"]?.stringValue?.contains("displayName") == true, "\(r)")
        }
        let number = try client.post("/v1/passkeys/registration/options", .object([("username", .number(5))]))
        expectProblem(number, 400, "invalid_request")
        #expect(number.json?["detail"]?.stringValue?.contains("username") == true, "\(number)")
        // Absent or null displayName still defaults to the username.
        let username = server.username("typed")
        let absent = try client.post("/v1/passkeys/registration/options", .object([("username", .string(username)), ("displayName", .null)]))
        #expect(absent.status == 200 && absent.json?["user"]?["displayName"]?.stringValue == username, "\(absent)")
    }

    @Test("enrolment tickets: a displayName that is not a string → 400 invalid_request")
    func ticketDisplayNameType() throws {
        let server = try server
        let client = server.client()
        let r = try client.post("/admin/v1/users/ext-\(uniqueSuffix())/enrolment-tickets",
                                .object([("username", .string(server.username("ticket"))), ("displayName", .number(7))]),
                                authorization: "Bearer \(server.adminKey)")
        expectProblem(r, 400, "invalid_request")
        #expect(r.json?["detail"]?.stringValue?.contains("displayName") == true, "\(r)")
    }

    @Test("app declarations: handleAllUrls or appId of the wrong type → 400 invalid_request (handleAllUrls was read as false)")
    func appDeclarationTypes() throws {
        let server = try server
        let client = server.client()
        let admin = "Bearer \(server.adminKey)"
        let fingerprint = String(repeating: "AB:", count: 31) + "AB"
        for value: JSONValue in [.string("true"), .number(1), .array([])] {
            let r = try client.post("/admin/v1/apps", .object([("platform", "android"), ("packageName", "com.example.typed"),
                                                               ("fingerprints", .array([.string(fingerprint)])), ("handleAllUrls", value)]),
                                    authorization: admin)
            expectProblem(r, 400, "invalid_request")
        }
        let appId = try client.post("/admin/v1/apps", .object([("platform", "ios"), ("appId", .number(1)),
                                                               ("teamId", "ABCDE12345"), ("bundleId", "com.example.typed")]),
                                    authorization: admin)
        expectProblem(appId, 400, "invalid_request")
    }

    // MARK: 401 always carries a challenge (RFC 9110 §15.5.2, RFC 6750 §3)

    @Test("every 401 carries WWW-Authenticate: bare Bearer without a token, invalid_token with a refused one, Ticket for a ticket")
    func unauthorizedChallenges() throws {
        let server = try server
        let client = server.client()
        let missing = try client.get("/v1/passkeys")
        expectProblem(missing, 401, "unauthorized")
        #expect(missing.header("WWW-Authenticate") == "Bearer", "\(missing.headers)")

        for path in ["/v1/passkeys", "/v1/sessions", "/admin/v1/origins"] {
            let refused = try client.get(path, authorization: "Bearer not-a-token")
            expectProblem(refused, 401, "unauthorized")
            #expect(refused.header("WWW-Authenticate") == #"Bearer error="invalid_token""#, "\(path): \(refused.headers)")
        }
        let consume = try client.post("/v1/step-up/consume", .object([("actionHash", "x")]), authorization: "Bearer a.b.c")
        #expect(consume.header("WWW-Authenticate") == #"Bearer error="invalid_token""#, "\(consume.headers)")

        // An enrolment ticket that is unknown, used or expired: 401 with a challenge too (it had none).
        let ticket = try client.post("/v1/passkeys/registration/options", .object([]), authorization: "Ticket lkt_unknown")
        expectProblem(ticket, 401, "unauthorized")
        #expect(ticket.header("WWW-Authenticate") == "Ticket", "\(ticket.headers)")
    }

    // MARK: The token endpoint (RFC 6749 §5)

    func token(_ client: Client, form: String) throws -> Reply {
        try client.send("POST", "/v1/token", body: Array(form.utf8), contentType: "application/x-www-form-urlencoded")
    }

    @Test("token errors: SPEC's problem document with RFC 6749's error member, never cached")
    func tokenErrors() throws {
        let server = try server
        let client = server.client()
        let cases: [(form: String, code: String, oauth: String)] = [
            ("grant_type=refresh_token&refresh_token=lkr_unknown", "invalid_grant", "invalid_grant"),
            ("grant_type=password&username=a&password=b", "invalid_request", "unsupported_grant_type"),
            ("refresh_token=lkr_unknown", "invalid_request", "invalid_request"),
            ("grant_type=refresh_token", "invalid_request", "invalid_request"),
        ]
        for c in cases {
            let r = try token(client, form: c.form)
            expectProblem(r, 400, c.code)
            #expect(r.json?["error"]?.stringValue == c.oauth, "\(c.form): \(r)")
            #expect(r.json?["error_description"]?.stringValue?.isEmpty == false, "\(c.form): \(r)")
            #expect(r.header("Cache-Control") == "no-store" && r.header("Pragma") == "no-cache", "\(c.form): \(r.headers)")
        }
    }

    @Test("a token request that repeats a parameter is invalid_request (RFC 6749 §3.2), and rotates nothing")
    func tokenRepeatedParameter() throws {
        let server = try server
        let client = server.client()
        let session = try client.signUp(SoftAuthenticator(), username: server.username("repeat"))
        for form in ["grant_type=refresh_token&refresh_token=\(session.refreshToken)&refresh_token=lkr_other",
                     "grant_type=password&grant_type=refresh_token&refresh_token=\(session.refreshToken)"] {
            let r = try token(client, form: form)
            expectProblem(r, 400, "invalid_request")
            #expect(r.json?["error"]?.stringValue == "invalid_request", "\(r)")
        }
        // The refresh token was not used by the refused requests.
        #expect(try token(client, form: "grant_type=refresh_token&refresh_token=\(session.refreshToken)").status == 200)
    }

    @Test("a token response is no-store and no-cache (RFC 6749 §5.1)")
    func tokenResponseHeaders() throws {
        let server = try server
        let client = server.client()
        let session = try client.signUp(SoftAuthenticator(), username: server.username("token"))
        let r = try token(client, form: "grant_type=refresh_token&refresh_token=\(session.refreshToken)")
        #expect(r.status == 200, "\(r)")
        #expect(r.json?["token_type"]?.stringValue == "Bearer" && r.json?["expires_in"]?.intValue != nil, "\(r)")
        #expect(r.header("Cache-Control") == "no-store" && r.header("Pragma") == "no-cache", "\(r.headers)")
    }

    // MARK: CORS for the public API

    @Test("a preflight from an allowlisted origin allows every /v1 method and request header a route reads")
    func preflightCoversTheAPI() throws {
        let server = try server
        let client = server.client()
        let routes = Application(services: server.services).routes.filter { $0.pattern.hasPrefix("/v1/") }
        let preflight = try client.send("OPTIONS", "/v1/account/email", contentType: nil,
                                        headers: [("Origin", server.origin), ("Access-Control-Request-Method", "PUT")])
        #expect(preflight.status == 204 && preflight.header("Access-Control-Allow-Origin") == server.origin, "\(preflight)")
        let methods = Set((preflight.header("Access-Control-Allow-Methods") ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
        for route in routes { #expect(methods.contains(route.method), "\(route.method) \(route.pattern) not in \(methods)") }
        let headers = (preflight.header("Access-Control-Allow-Headers") ?? "").lowercased()
        for name in ["authorization", "content-type", "latchkey-step-up", "latchkey-ticket"] {
            #expect(headers.contains(name), "\(name) not in \(headers)")
        }
    }
}
