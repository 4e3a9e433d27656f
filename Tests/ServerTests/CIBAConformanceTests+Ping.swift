import Foundation
import HTTP
import JSON
@testable import LatchkeyServer
import Testing

/// The ping modules of the "fapi-ciba-id1-test-plan" (CIBA Core §10.2: the notification endpoint's
/// answer never changes the flow, and the OP follows no redirect), and CIBA Core 1.0's rules that no
/// module names.
extension CIBAConformanceTests {
    func pingClient(_ server: TestServer, _ receiver: PingReceiver) throws -> CIBATests.CIBAClient {
        let r = try ciba.register(server, [("grantTypes", ["urn:openid:params:grant-type:ciba"]), ("backchannelTokenDeliveryMode", "ping"),
                                           ("backchannelClientNotificationEndpoint", .string(receiver.url)), ("cibaApprover", "device-key")])
        #expect(r.status == 201, "\(r)")
        return CIBATests.CIBAClient(id: try #require(r.json?["id"]?.stringValue), secret: try #require(r.json?["clientSecret"]?.stringValue))
    }

    /// A ping flow whose endpoint answers `answer`: the approval pings once with the client's
    /// bearer, and the client then collects the tokens. Returns the pings seen for the request after
    /// `settle` seconds more.
    func pingFlow(_ answer: @escaping @Sendable () -> Response, settle: Double = 0) throws -> [PingReceiver.Ping] {
        let server = try Self.fixture.get()
        let receiver = try PingReceiver(answer: answer)
        defer { receiver.stop() }
        let c = try pingClient(server, receiver)
        let u = try user(server)
        let id = try started(try ask(server, c, u, [("client_notification_token", "ping-bearer-1")]))
        _ = try approve(u, id)
        let pings = receiver.wait(for: id)
        #expect(pings.first?.authorization == "Bearer ping-bearer-1" && pings.first?.contentType?.hasPrefix("application/json") == true,
                "\(pings)")
        let tokens = try ciba.poll(server, c, id)
        #expect(tokens.status == 200 && tokens.json?["id_token"] != nil, "the flow completes whatever the endpoint said: \(tokens)")
        if settle > 0 { Thread.sleep(forTimeInterval: settle) }
        return receiver.received.filter { $0.authReqId == id }
    }

    @Test("fapi-ciba-id1-ping-backchannel-notification-endpoint-response-401")
    func pingNotificationEndpointReturns401() throws {
        // Also the no-retry rule of ping-with-mtls-…-response-401-and-require-server-does-not-retry:
        // with retries 0.2 s apart (the test server's), 2 s would bring several.
        let pings = try pingFlow({ .empty(status: 401) }, settle: 2)
        #expect(pings.count == 1, "a 401 was retried: \(pings.count) pings")
    }

    @Test("fapi-ciba-id1-ping-backchannel-notification-endpoint-response-403")
    func pingNotificationEndpointReturns403() throws {
        #expect(try pingFlow({ .empty(status: 403) }, settle: 1).count == 1)
    }

    @Test("fapi-ciba-id1-ping-backchannel-notification-endpoint-response-has-body")
    func pingNotificationEndpointReturnsABody() throws {
        #expect(try pingFlow({ .json(status: 200, bytes: Array(#"{"received":true}"#.utf8)) }, settle: 1).count == 1)
    }

    @Test("fapi-ciba-id1-ping-backchannel-notification-endpoint-return-redirect-request")
    func pingNotificationEndpointReturnsRedirectRequest() throws {
        let elsewhere = try PingReceiver()
        defer { elsewhere.stop() }
        let target = elsewhere.url
        _ = try pingFlow({ .empty(status: 301, headers: [("Location", target)]) }, settle: 1)
        #expect(elsewhere.received.isEmpty, "the redirect was followed: \(elsewhere.received.count) requests")
    }

    @Test("ciba-core-7.1-and-13: the authentication request's errors")
    func authenticationRequestErrors() throws {
        let server = try Self.fixture.get()
        let c = try client(server)
        let u = try user(server)
        func refused(_ pairs: [(String, String)]) throws -> String? { error(try ciba.ask(server, c, pairs)) }
        #expect(try refused([("scope", "openid")]) == "invalid_request", "no hint")
        #expect(try refused([("scope", "openid"), ("login_hint_token", "t")]) == "invalid_request", "login_hint_token: none issued")
        #expect(try refused([("scope", "openid"), ("id_token_hint", "a.b.c")]) == "invalid_request", "an id_token this server did not issue")
        #expect(try refused([("scope", "profile"), ("login_hint", u.name)]) == "invalid_scope")
        #expect(try refused([("scope", "openid"), ("login_hint", "nobody-\(uniqueSuffix())")]) == "unknown_user_id")
        #expect(try refused([("scope", "openid"), ("login_hint", u.name), ("requested_expiry", "29")]) == "invalid_request")
        #expect(try refused([("scope", "openid"), ("login_hint", u.name), ("requested_expiry", "601")]) == "invalid_request")
        // §7.1 user_code: discovery says it is not supported; one sent is not looked at.
        #expect(try ask(server, c, u, [("user_code", "1234")]).status == 200)
        // §7.1: a ping client must send client_notification_token.
        let receiver = try PingReceiver()
        defer { receiver.stop() }
        #expect(try error(try ciba.ask(server, try pingClient(server, receiver), [("scope", "openid"), ("login_hint", u.name)])) == "invalid_request")
        // §7.1: a client not registered for the grant.
        let plain = try ciba.register(server, [])
        let stranger = CIBATests.CIBAClient(id: try #require(plain.json?["id"]?.stringValue), secret: try #require(plain.json?["clientSecret"]?.stringValue))
        #expect(error(try ciba.ask(server, stranger, [("scope", "openid"), ("login_hint", u.name)])) == "unauthorized_client")
    }

    @Test("ciba-core-7.1-id-token-hint: an id_token this server issued names its account, expired or not")
    func idTokenHint() throws {
        let server = try Self.fixture.get()
        let c = try client(server)
        let u = try user(server)
        let id = try started(try ask(server, c, u))
        _ = try approve(u, id)
        let idToken = try #require(try ciba.poll(server, c, id).json?["id_token"]?.stringValue)
        let hinted = try started(try ciba.ask(server, c, [("scope", "openid"), ("id_token_hint", idToken)]))
        let listed = try u.account.client.get("/v1/ciba/requests", authorization: u.account.bearer).json?["requests"]?.arrayValue ?? []
        #expect(listed.contains { $0["authReqId"]?.stringValue == hinted }, "the hinted request is not the account's")
    }

    @Test("ciba-core-11: auth_req_id once, another client's, unknown, slow_down's growing interval")
    func tokenErrors() throws {
        let server = try Self.fixture.get()
        let c = try client(server), other = try client(server)
        let u = try user(server)
        let id = try started(try ask(server, c, u))
        #expect(error(try ciba.poll(server, c, id)) == "authorization_pending")
        #expect(error(try ciba.poll(server, c, id)) == "slow_down")
        // After slow_down the interval is 10 s: 6 s after the last poll is still too soon.
        Thread.sleep(forTimeInterval: 6)
        #expect(error(try ciba.poll(server, c, id)) == "slow_down")
        _ = try approve(u, id)
        #expect(try ciba.poll(server, c, id).status == 200)
        #expect(error(try ciba.poll(server, c, id)) == "invalid_grant", "tokens once")
        #expect(error(try ciba.poll(server, other, id)) == "invalid_grant")
        #expect(error(try ciba.poll(server, c, "lkb_" + String(repeating: "A", count: 43))) == "invalid_grant")
    }
}
