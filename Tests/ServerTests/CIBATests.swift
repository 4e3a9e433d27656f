import Crypto
import Foundation
import JSON
import PostgreSQL
@testable import LatchkeyServer
import Storage
import Testing

/// SPEC "CIBA" … "CIBA tokens" over HTTP, against PostgreSQL: a confidential client registered for
/// the grant asks on the backchannel, the account's phone approves with its device key's step-up, and
/// the client polls the token endpoint (OpenID CIBA Core 1.0 §7, §10, §11).
@Suite(.serialized)
struct CIBATests {
    static let fixture = Result { try TestServer(name: "ciba") }
    let h = StepUpTests()

    struct CIBAClient {
        let id: String
        let secret: String
        var basic: String { "Basic " + Base64.encodeStandard(Array("\(id):\(secret)".utf8)) }
    }

    /// A client registered over the admin API with `members` (the CIBA ones).
    func register(_ server: TestServer, _ members: [(String, JSONValue)]) throws -> Reply {
        let body = JSONValue.object([("name", "Bank backend"), ("redirectUris", ["https://bank.example/cb"])]
                                    + members.map { (key: $0.0, value: $0.1) })
        return try server.client().post("/admin/v1/clients", body, authorization: "Bearer \(server.adminKey)")
    }

    func cibaClient(_ server: TestServer, approver: String = "device-key") throws -> CIBAClient {
        let r = try register(server, [("grantTypes", ["urn:openid:params:grant-type:ciba"]), ("backchannelTokenDeliveryMode", "poll"),
                                      ("cibaApprover", .string(approver)), ("authorizationDetailsTypes", ["payment_initiation"])])
        #expect(r.status == 201, "\(r)")
        return CIBAClient(id: try #require(r.json?["id"]?.stringValue), secret: try #require(r.json?["clientSecret"]?.stringValue))
    }

    func form(_ server: TestServer, _ path: String, _ c: CIBAClient, _ pairs: [(String, String)]) throws -> Reply {
        try server.client().send("POST", path, body: OpenIDProviderTests.form(pairs), contentType: "application/x-www-form-urlencoded",
                                 authorization: c.basic)
    }

    func ask(_ server: TestServer, _ c: CIBAClient, _ pairs: [(String, String)]) throws -> Reply {
        try form(server, "/oauth2/bc-authorize", c, pairs)
    }

    func poll(_ server: TestServer, _ c: CIBAClient, _ id: String) throws -> Reply {
        try form(server, "/oauth2/token", c, [("grant_type", "urn:openid:params:grant-type:ciba"), ("auth_req_id", id)])
    }

    func username(_ a: StepUpTests.Account) -> String { a.session.user["username"]?.stringValue ?? "" }

    @Test("poll mode: pending, slow_down, a device key's step-up approves, the tokens once with the details and the receipt")
    func pollFlow() throws {
        let server = try Self.fixture.get()
        let c = try cibaClient(server)
        let a = try h.account(server)
        let phone = StepUpTests.Phone(platform: "android")
        let keyId = try h.enrolled(a, phone)

        let details = #"[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"42.00"},"creditorName":"Merchant A"}]"#
        let asked = try ask(server, c, [("scope", "openid offline_access"), ("login_hint", username(a)), ("binding_message", "Pay 42 EUR · W-7"),
                                        ("authorization_details", details)])
        #expect(asked.status == 200, "\(asked)")
        #expect(asked.json?["expires_in"]?.intValue == 120 && asked.json?["interval"]?.intValue == 5)
        let id = try #require(asked.json?["auth_req_id"]?.stringValue)

        // The first poll is pending; the next, sooner than the interval, is slow_down.
        let first = try poll(server, c, id)
        #expect(first.status == 400 && first.json?["error"]?.stringValue == "authorization_pending", "\(first)")
        let fast = try poll(server, c, id)
        #expect(fast.status == 400 && fast.json?["error"]?.stringValue == "slow_down", "\(fast)")

        // The account's app sees it, with what the person is shown.
        let list = try a.client.get("/v1/ciba/requests", authorization: a.bearer)
        #expect(list.status == 200, "\(list)")
        let shown = try #require(list.json?["requests"]?.arrayValue?.first { $0["authReqId"]?.stringValue == id })
        #expect(shown["bindingMessage"]?.stringValue == "Pay 42 EUR · W-7")
        #expect(shown["client"]?["id"]?.stringValue == c.id)
        #expect(shown["authorizationDetails"]?.arrayValue?.first?["creditorName"]?.stringValue == "Merchant A")

        // Without the step-up: 403 step_up_required; another account: 404.
        let bare = try a.client.send("POST", "/v1/ciba/requests/\(id)/approve", authorization: a.bearer)
        #expect(bare.status == 403 && bare.code == "step_up_required", "\(bare)")
        let b = try h.account(server)
        #expect(try b.client.send("POST", "/v1/ciba/requests/\(id)/approve", authorization: b.bearer).status == 404)
        #expect(try b.client.send("POST", "/v1/ciba/requests/\(id)/deny", authorization: b.bearer).status == 404)

        let action: JSONValue = .object([("type", "latchkey.ciba.approve"), ("authReqId", .string(id)), ("clientId", .string(c.id)),
                                         ("bindingMessage", "Pay 42 EUR · W-7"), ("authorizationDetails", try #require(shown["authorizationDetails"]))])
        // A step-up for another action is refused.
        let other = try h.approve(a, phone, keyId: keyId)
        let wrong = try a.client.send("POST", "/v1/ciba/requests/\(id)/approve", authorization: a.bearer,
                                      headers: [("Latchkey-Step-Up", try #require(other["access_token"]?.stringValue))])
        #expect(wrong.status == 403 && wrong.code == "step_up_required", "\(wrong)")
        let stepUp = try h.approve(a, phone, keyId: keyId, action: action)
        let approved = try a.client.send("POST", "/v1/ciba/requests/\(id)/approve", authorization: a.bearer,
                                         headers: [("Latchkey-Step-Up", try #require(stepUp["access_token"]?.stringValue))])
        #expect(approved.status == 204, "\(approved)")
        #expect(try a.client.get("/v1/ciba/requests", authorization: a.bearer).json?["requests"]?.arrayValue?.isEmpty == true)

        let tokens = try poll(server, c, id)
        #expect(tokens.status == 200, "\(tokens)")
        let access = try StepUpTests.claims(try #require(tokens.json?["access_token"]?.stringValue))
        #expect(access["receipt_id"]?.stringValue == stepUp["receiptId"]?.stringValue)
        #expect(access["client_id"]?.stringValue == c.id && access["sub"]?.stringValue == a.session.userId)
        #expect(access["authorization_details"]?.arrayValue?.first?["creditorName"]?.stringValue == "Merchant A")
        #expect(tokens.json?["authorization_details"] != nil)
        let idToken = try StepUpTests.claims(try #require(tokens.json?["id_token"]?.stringValue))
        #expect(idToken["acr"]?.stringValue == "urn:latchkey:acr:device-key")
        #expect(tokens.json?["refresh_token"]?.stringValue != nil)
        // Once: the same auth_req_id again is invalid_grant; another client's too.
        let again = try poll(server, c, id)
        #expect(again.status == 400 && again.json?["error"]?.stringValue == "invalid_grant", "\(again)")
        let stranger = try cibaClient(server)
        #expect(try poll(server, stranger, id).json?["error"]?.stringValue == "invalid_grant")
        #expect(try poll(server, c, "lkb_unknown").json?["error"]?.stringValue == "invalid_grant")
    }

    @Test("bc-authorize refuses what CIBA Core and SPEC refuse, with their error codes")
    func refusals() throws {
        let server = try Self.fixture.get()
        let c = try cibaClient(server)
        let a = try h.account(server)
        let name = username(a)
        func error(_ pairs: [(String, String)]) throws -> String? { try ask(server, c, pairs).json?["error"]?.stringValue }
        #expect(try error([("scope", "profile"), ("login_hint", name)]) == "invalid_scope")
        #expect(try error([("scope", "openid")]) == "invalid_request")
        #expect(try error([("scope", "openid"), ("login_hint", name), ("id_token_hint", "x.y.z")]) == "invalid_request")
        #expect(try error([("scope", "openid"), ("login_hint_token", "t")]) == "invalid_request")
        #expect(try error([("scope", "openid"), ("login_hint", name), ("binding_message", String(repeating: "ä", count: 65))]) == "invalid_binding_message")
        #expect(try error([("scope", "openid"), ("login_hint", name), ("binding_message", "line\nbreak")]) == "invalid_binding_message")
        #expect(try error([("scope", "openid"), ("login_hint", name), ("requested_expiry", "29")]) == "invalid_request")
        #expect(try error([("scope", "openid"), ("login_hint", name), ("requested_expiry", "601")]) == "invalid_request")
        #expect(try error([("scope", "openid"), ("login_hint", name), ("authorization_details", "[{\"type\":\"payment\"}]")])
                == "invalid_authorization_details")
        #expect(try error([("scope", "openid"), ("login_hint", "nobody-\(uniqueSuffix())")]) == "unknown_user_id")
        let expiry = try ask(server, c, [("scope", "openid"), ("login_hint", name), ("requested_expiry", "600")])
        #expect(expiry.status == 200 && expiry.json?["expires_in"]?.intValue == 600, "\(expiry)")
        // A client without the grant: unauthorized_client; a wrong secret: invalid_client (401).
        let plain = try register(server, [])
        let plainClient = CIBAClient(id: try #require(plain.json?["id"]?.stringValue), secret: try #require(plain.json?["clientSecret"]?.stringValue))
        #expect(try ask(server, plainClient, [("scope", "openid"), ("login_hint", name)]).json?["error"]?.stringValue == "unauthorized_client")
        let forged = try ask(server, CIBAClient(id: c.id, secret: "lks_wrong"), [("scope", "openid"), ("login_hint", name)])
        #expect(forged.status == 401 && forged.json?["error"]?.stringValue == "invalid_client")
    }

    @Test("registration: a CIBA client is confidential, ping needs an endpoint; discovery lists the CIBA members")
    func registration() throws {
        let server = try Self.fixture.get()
        let pub = try register(server, [("public", true), ("grantTypes", ["urn:openid:params:grant-type:ciba"])])
        #expect(pub.status == 400 && pub.code == "invalid_request", "\(pub)")
        let ping = try register(server, [("grantTypes", ["urn:openid:params:grant-type:ciba"]), ("backchannelTokenDeliveryMode", "ping")])
        #expect(ping.status == 400, "\(ping)")
        let approver = try register(server, [("grantTypes", ["urn:openid:params:grant-type:ciba"]), ("cibaApprover", "face-id")])
        #expect(approver.status == 400, "\(approver)")
        let withoutGrant = try register(server, [("cibaApprover", "passkey")])
        #expect(withoutGrant.status == 400, "\(withoutGrant)")
        let ok = try register(server, [("grantTypes", ["urn:openid:params:grant-type:ciba"])])
        #expect(ok.status == 201, "\(ok)")
        #expect(ok.json?["grantTypes"] == ["authorization_code", "refresh_token", "urn:openid:params:grant-type:ciba"])
        #expect(ok.json?["backchannelTokenDeliveryMode"]?.stringValue == "poll")
        #expect(ok.json?["cibaApprover"]?.stringValue == "attested-device-key")
        // PATCH: to ping with an endpoint, then off again.
        let id = try #require(ok.json?["id"]?.stringValue)
        let admin = "Bearer \(server.adminKey)"
        let toPing = try server.client().send("PATCH", "/admin/v1/clients/\(id)", body: JSONValue.object([
            ("backchannelTokenDeliveryMode", "ping"), ("backchannelClientNotificationEndpoint", "https://bank.example/ciba")]).serialized(),
                                               authorization: admin)
        #expect(toPing.status == 200 && toPing.json?["backchannelTokenDeliveryMode"]?.stringValue == "ping", "\(toPing)")
        #expect(toPing.json?["backchannelClientNotificationEndpoint"]?.stringValue == "https://bank.example/ciba")
        let off = try server.client().send("PATCH", "/admin/v1/clients/\(id)", body: JSONValue.object([("grantTypes", ["authorization_code"])]).serialized(),
                                           authorization: admin)
        #expect(off.status == 200 && off.json?["cibaApprover"] == .null && off.json?["grantTypes"] == ["authorization_code", "refresh_token"], "\(off)")
        let d = try server.client().get("/.well-known/openid-configuration").json
        #expect(d?["backchannel_authentication_endpoint"]?.stringValue == server.origin + "/oauth2/bc-authorize")
        #expect(d?["backchannel_token_delivery_modes_supported"] == ["poll", "ping"])
        #expect(d?["backchannel_user_code_parameter_supported"]?.boolValue == false)
        #expect(d?["grant_types_supported"]?.arrayValue?.contains("urn:openid:params:grant-type:ciba") == true)
    }

    @Test("the approver the client names: an unattested device key cannot approve for attested-device-key")
    func approverKind() throws {
        let server = try Self.fixture.get()
        let c = try cibaClient(server, approver: "attested-device-key")
        let a = try h.account(server)
        let phone = StepUpTests.Phone(platform: "ios")
        let keyId = try h.enrolled(a, phone)
        let id = try #require(try ask(server, c, [("scope", "openid"), ("login_hint", username(a))]).json?["auth_req_id"]?.stringValue)
        let action: JSONValue = .object([("type", "latchkey.ciba.approve"), ("authReqId", .string(id)), ("clientId", .string(c.id)),
                                         ("bindingMessage", .null), ("authorizationDetails", .null)])
        let stepUp = try h.approve(a, phone, keyId: keyId, action: action)
        let refused = try a.client.send("POST", "/v1/ciba/requests/\(id)/approve", authorization: a.bearer,
                                        headers: [("Latchkey-Step-Up", try #require(stepUp["access_token"]?.stringValue))])
        #expect(refused.status == 403 && refused.code == "step_up_required", "\(refused)")
        #expect(try poll(server, c, id).json?["error"]?.stringValue == "authorization_pending")
    }

    @Test("the list names each client's approver kind and shows the scopes and details in words, in the asked language")
    func listShowsApproverAndWords() throws {
        let server = try Self.fixture.get()
        let web = try cibaClient(server, approver: "passkey")
        let app = try cibaClient(server, approver: "attested-device-key")
        let a = try h.account(server)
        let details = #"[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"42.00"},"creditorName":"Merchant A"}]"#
        let first = try ask(server, web, [("scope", "openid"), ("login_hint", username(a)), ("authorization_details", details)])
        let second = try ask(server, app, [("scope", "openid"), ("login_hint", username(a))])
        let webId = try #require(first.json?["auth_req_id"]?.stringValue), appId = try #require(second.json?["auth_req_id"]?.stringValue)
        let list = try a.client.send("GET", "/v1/ciba/requests", authorization: a.bearer, headers: [("Accept-Language", "de-DE,de;q=0.9")])
        #expect(list.status == 200, "\(list)")
        let requests = list.json?["requests"]?.arrayValue ?? []
        let shownWeb = try #require(requests.first { $0["authReqId"]?.stringValue == webId })
        let shownApp = try #require(requests.first { $0["authReqId"]?.stringValue == appId })
        #expect(shownWeb["client"]?["cibaApprover"]?.stringValue == "passkey")
        #expect(shownApp["client"]?["cibaApprover"]?.stringValue == "attested-device-key")
        #expect(shownWeb["display"]?["lang"]?.stringValue == "de")
        let lines = shownWeb["display"]?["lines"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(lines.contains("Sie mit Ihrem Latchkey-Konto anmelden"), "\(lines)")
        #expect(lines.contains("Empfänger: Merchant A"), "\(lines)")
        #expect(shownWeb["display"]?["approve"]?.stringValue == "42,00\u{A0}€ an Merchant A freigeben", "\(shownWeb)")
        #expect(shownApp["display"]?["lines"]?.arrayValue?.compactMap(\.stringValue) == ["Sie mit Ihrem Latchkey-Konto anmelden"])
        // The web app's kind: a user-verified passkey step-up approves it (StepUpTests' passkey account).
        #expect(try a.client.send("POST", "/v1/ciba/requests/\(webId)/deny", authorization: a.bearer).status == 204)
        #expect(try a.client.send("POST", "/v1/ciba/requests/\(appId)/deny", authorization: a.bearer).status == 204)
    }

    @Test("limits: a fourth pending request expires the oldest; three denies in a day block the client for the account")
    func limits() throws {
        let server = try Self.fixture.get()
        let c = try cibaClient(server)
        let a = try h.account(server)
        let name = username(a)
        var ids: [String] = []
        for _ in 0..<4 {
            let r = try ask(server, c, [("scope", "openid"), ("login_hint", name)])
            ids.append(try #require(r.json?["auth_req_id"]?.stringValue, "\(r)"))
        }
        #expect(try poll(server, c, ids[0]).json?["error"]?.stringValue == "expired_token")
        #expect(try poll(server, c, ids[1]).json?["error"]?.stringValue == "authorization_pending")
        #expect(try a.client.get("/v1/ciba/requests", authorization: a.bearer).json?["requests"]?.arrayValue?.count == 3)
        for id in ids.dropFirst() {
            #expect(try a.client.send("POST", "/v1/ciba/requests/\(id)/deny", authorization: a.bearer).status == 204)
        }
        #expect(try poll(server, c, ids[1]).json?["error"]?.stringValue == "access_denied")
        let blocked = try ask(server, c, [("scope", "openid"), ("login_hint", name)])
        #expect(blocked.status == 400 && blocked.json?["error"]?.stringValue == "access_denied", "\(blocked)")
        // Another client is not blocked.
        let other = try cibaClient(server)
        #expect(try ask(server, other, [("scope", "openid"), ("login_hint", name)]).status == 200)
    }

    @Test("limits: 10 requests an hour from one client for one account; 10 unknown users an hour, then 429")
    func hourlyLimits() throws {
        let server = try Self.fixture.get()
        let c = try cibaClient(server)
        let a = try h.account(server)
        for _ in 0..<10 { #expect(try ask(server, c, [("scope", "openid"), ("login_hint", username(a))]).status == 200) }
        let eleventh = try ask(server, c, [("scope", "openid"), ("login_hint", username(a))])
        #expect(eleventh.status == 400 && eleventh.json?["error"]?.stringValue == "access_denied", "\(eleventh)")
        #expect(eleventh.json?["error_description"]?.stringValue?.contains("10") == true)
        for _ in 0..<10 {
            #expect(try ask(server, c, [("scope", "openid"), ("login_hint", "ghost-\(uniqueSuffix())")]).json?["error"]?.stringValue == "unknown_user_id")
        }
        let limited = try ask(server, c, [("scope", "openid"), ("login_hint", "ghost-\(uniqueSuffix())")])
        #expect(limited.status == 429 && limited.header("Retry-After") != nil, "\(limited)")
    }

    @Test("ciba.requested {userId,authReqId,clientId} goes through the outbox to a subscribed webhook endpoint")
    func requestedEvent() throws {
        let server = try Self.fixture.get()
        let admin = "Bearer \(server.adminKey)"
        let hook = try server.client().post("/admin/v1/webhooks", .object([("url", .string("https://hooks.example.com/ciba-\(uniqueSuffix())")),
                                                                          ("events", ["ciba.requested"])]), authorization: admin)
        #expect(hook.status == 201, "\(hook)")
        let hookId = try #require(hook.json?["id"]?.stringValue)
        defer { _ = try? server.client().send("DELETE", "/admin/v1/webhooks/\(hookId)", authorization: admin) }
        let c = try cibaClient(server)
        let a = try h.account(server)
        let asked = try ask(server, c, [("scope", "openid"), ("login_hint", username(a))])
        #expect(asked.status == 200, "\(asked)")
        let deliveries = try server.client().get("/admin/v1/webhooks/\(hookId)/deliveries", authorization: admin).json?["deliveries"]?.arrayValue ?? []
        #expect(deliveries.map { $0["type"]?.stringValue } == ["ciba.requested"], "\(deliveries)")
        let eventId = try #require(deliveries.first?["eventId"]?.stringValue)
        let connection = try TestDatabase.connect()
        let data = try connection.query("SELECT data::text AS data FROM outbox_events WHERE id = \(eventId)")[0].json("data")
        let event = try JSONParser.parse(Array(data.utf8))
        #expect(event["userId"]?.stringValue == a.session.userId && event["clientId"]?.stringValue == c.id, "\(event)")
        #expect(event["authReqId"]?.stringValue == asked.json?["auth_req_id"]?.stringValue, "\(event)")
    }
}
