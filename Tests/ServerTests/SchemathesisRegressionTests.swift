import JSON
import Testing

/// What Schemathesis (scripts/openapi/schemathesis.sh: requests generated from the OpenAPI document
/// against a running server) found, kept as tests so it stays fixed.
@Suite("Schemathesis findings")
struct SchemathesisRegressionTests {
    static let fixture = Result { try TestServer(name: "schemathesis") }

    /// `GET /admin/v1/audit?limit=5000` was answered as if it said 1000, and `limit=abc` as if absent:
    /// input the document calls invalid was accepted. Now 400 `invalid_request`, like every bad query.
    @Test("audit and delivery limits that are not a whole number 1…1000 → 400 invalid_request",
          arguments: ["limit=", "limit=&user=%24", "before=", "limit=0", "limit=1001", "limit=5000", "limit=-1", "limit=abc", "limit=1e3", "limit=+5", "limit=99999999999999999999999",
                      "before=0", "before=-3", "before=x"])
    func queryNumbers(query: String) throws {
        let server = try Self.fixture.get()
        let client = server.client()
        let admin = "Bearer \(server.adminKey)"
        expectProblem(try client.get("/admin/v1/audit?\(query)", authorization: admin), 400, "invalid_request")
        guard query.hasPrefix("limit") else { return }
        // An event no other suite's change makes, and deleted at once: the suites share one outbox.
        let hook = try client.post("/admin/v1/webhooks", .object([("url", "https://hooks.example/latchkey"), ("events", .array(["passkey.clone_suspected"]))]),
                                   authorization: admin)
        let id = try #require(hook.json?["id"]?.stringValue, "\(hook)")
        defer { client.unsubscribe(id) }
        expectProblem(try client.get("/admin/v1/webhooks/\(id)/deliveries?\(query)", authorization: admin), 400, "invalid_request")
    }

    @Test("audit and delivery limits in range, and no limit at all, are answered")
    func queryNumbersInRange() throws {
        let server = try Self.fixture.get()
        let client = server.client()
        let admin = "Bearer \(server.adminKey)"
        for query in ["", "limit=1", "limit=1000", "before=1", "before=9223372036854775807"] {
            #expect(try client.get("/admin/v1/audit?\(query)", authorization: admin).status == 200, "\(query)")
        }
    }

    /// A new account's registration options read no `mediation`, so `"mediation":"AAA"` was accepted
    /// there while every other caller got 400 for it.
    @Test("registration options for a new account refuse a malformed mediation", arguments: [
        JSONValue.string("AAA"), .number(1), .bool(true), .object([]),
    ])
    func newAccountMediation(mediation: JSONValue) throws {
        let server = try Self.fixture.get()
        let body = JSONValue.object([("username", .string(server.username("st"))), ("displayName", "Fuzz"), ("mediation", mediation)])
        expectProblem(try server.client().post("/v1/passkeys/registration/options", body), 400, "invalid_request")
        let plain = JSONValue.object([("username", .string(server.username("st"))), ("mediation", "optional")])
        #expect(try server.client().post("/v1/passkeys/registration/options", plain).status == 200)
    }

    /// `OPTIONS /v1/recovery/challenges` answered `Allow: POST, DELETE`: the DELETE was that of
    /// `/v1/recovery/{id}`, matched with the id "challenges". The literal path owns every method now
    /// (OpenAPI's rule), so the methods a 405 names are the ones the document gives that path.
    @Test("a literal path's 405 names only its own methods", arguments: [
        ("/v1/recovery/challenges", "POST"), ("/v1/recovery/verify", "POST"), ("/v1/recovery/cancel", "POST"),
        ("/v1/device-keys/challenges", "POST"),
    ])
    func allowOfLiteralPaths(path: String, allow: String) throws {
        let server = try Self.fixture.get()
        for method in ["OPTIONS", "DELETE", "PUT"] {
            let reply = try server.client().send(method, path)
            expectProblem(reply, 405, "invalid_request")
            #expect(reply.header("Allow") == allow, "\(method) \(path): \(reply.header("Allow") ?? "-")")
        }
    }

    /// `POST /oauth2/logout` without a body (and a cookie route with a text body) answered 415 with
    /// `code` `unsupported_media_type`, where the document and the router's own 415s say `invalid_request`.
    @Test("a 415 of the OP cookie routes says invalid_request", arguments: [("POST", "/oauth2/logout", "text/plain"),
                                                                         ("POST", "/oauth2/logout", nil as String?)])
    func cookieRoute415(method: String, path: String, contentType: String?) throws {
        let server = try Self.fixture.get()
        let reply = try server.client().send(method, path, body: contentType == nil ? [] : Array("x".utf8), contentType: contentType,
                                             headers: [("Origin", server.origin)])
        expectProblem(reply, 415, "invalid_request")
    }
}
