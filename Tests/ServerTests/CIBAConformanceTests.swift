import Foundation
import JSON
@testable import LatchkeyServer
import Storage
import Testing

/// The OpenID Foundation's CIBA conformance items for an OP (the public "fapi-ciba-id1-test-plan"
/// modules), re-implemented from their published descriptions against a real server and
/// PostgreSQL: one test per module that applies to Latchkey's CIBA (poll and ping, client_secret_basic,
/// no request objects), named by the module, then the CIBA Core 1.0 rules no module names
/// (`ciba-core-…`). The ping modules are in `CIBAConformanceTests+Ping.swift`.
///
/// Modules that do not apply, and why:
/// - `fapi-ciba-id1-ensure-request-object-{missing-aud,bad-aud,missing-iss,bad-iss,missing-exp,
///   expired-exp,exp-is-70-minutes-in-future,missing-iat,missing-nbf,nbf-is-10-minutes-in-future,
///   nbf-is-70-minutes-in-past,missing-jti,signature-algorithm-is-none,signature-algorithm-is-bad,
///   signature-algorithm-is-RS256,signed-by-other-client}-fails`,
///   `fapi-ciba-id1-ensure-unsigned-backchannel-authorization-request-fails`,
///   `fapi-ciba-id1-ensure-backchannel-authorization-request-without-request-fails` and
///   `fapi-ciba-id1-ensure-different-client-id-and-issuer-in-backchannel-authorization-request`:
///   signed authentication requests (CIBA Core §7.1.1) are FAPI-CIBA's; Latchkey supports no request
///   objects (`request_parameter_supported` false), so a plain form is the only request there is.
/// - `fapi-ciba-id1-ensure-mtls-holder-of-key-required` and
///   `fapi-ciba-id1-ping-with-mtls-ciba-notification-endpoint-response-401-and-require-server-does-not-retry`'s
///   MTLS part: Latchkey has no mutual-TLS client authentication or certificate-bound tokens (its
///   sender constraint is DPoP); the no-retry-after-401 rule is tested in the 401 ping test.
/// - `fapi-ciba-id1-ensure-client-assertion-signature-algorithm-in-{backchannel-authorization,
///   token-endpoint}-request-is-RS256-fails`: FAPI's algorithm rule, which Latchkey applies to
///   `--profile fapi2` clients (the FAPI 2.0 suites); other clients may sign assertions with RS256.
/// - `fapi-ciba-id1-ensure-client-assertion-with-iss-aud-to-token-endpoint-succeeds`: private_key_jwt;
///   an assertion whose `aud` is the issuer is accepted at every endpoint, the backchannel one
///   included (`OAuthCallerTests`).
/// - `…-for-brazil`, `fapi-ciba-id1-connectid-…` and the other regional variants: profiles of their
///   own ecosystems (CPF hints, purposes, 3DS details), not CIBA's.
@Suite(.serialized)
struct CIBAConformanceTests {
    static let fixture = Result { try TestServer.sending(name: "ciba-conformance") }
    let h = StepUpTests()
    let ciba = CIBATests()

    /// An account whose phone enrolled a device key.
    struct User {
        let account: StepUpTests.Account
        let phone: StepUpTests.Phone
        let keyId: String
        var name: String { account.session.user["username"]?.stringValue ?? "" }
    }

    func user(_ server: TestServer) throws -> User {
        let a = try h.account(server)
        let phone = StepUpTests.Phone(platform: "android")
        return User(account: a, phone: phone, keyId: try h.enrolled(a, phone))
    }

    func client(_ server: TestServer) throws -> CIBATests.CIBAClient { try ciba.cibaClient(server, approver: "device-key") }

    func ask(_ server: TestServer, _ c: CIBATests.CIBAClient, _ u: User, _ extra: [(String, String)] = []) throws -> Reply {
        try ciba.ask(server, c, [("scope", "openid")].filter { _ in !extra.contains { $0.0 == "scope" } } + [("login_hint", u.name)] + extra)
    }

    func started(_ r: Reply) throws -> String { try #require(r.json?["auth_req_id"]?.stringValue, "\(r)") }

    /// What the app does: the request as listed, its step-up by the phone's key, approved.
    func approve(_ u: User, _ id: String) throws -> JSONValue {
        let shown = try #require(try u.account.client.get("/v1/ciba/requests", authorization: u.account.bearer).json?["requests"]?.arrayValue?
            .first { $0["authReqId"]?.stringValue == id })
        let action: JSONValue = .object([("type", "latchkey.ciba.approve"), ("authReqId", .string(id)),
                                         ("clientId", shown["client"]?["id"] ?? .null), ("bindingMessage", shown["bindingMessage"] ?? .null),
                                         ("authorizationDetails", shown["authorizationDetails"] ?? .null)])
        let stepUp = try h.approve(u.account, u.phone, keyId: u.keyId, action: action)
        let r = try u.account.client.send("POST", "/v1/ciba/requests/\(id)/approve", authorization: u.account.bearer,
                                          headers: [("Latchkey-Step-Up", try #require(stepUp["access_token"]?.stringValue))])
        #expect(r.status == 204, "\(r)")
        return shown
    }

    func error(_ r: Reply) -> String? { r.json?["error"]?.stringValue }

    @Test("fapi-ciba-id1-discovery-end-point-verification")
    func discoveryEndPointVerification() throws {
        let server = try Self.fixture.get()
        let d = try #require(try server.client().get("/.well-known/openid-configuration").json)
        #expect(d["backchannel_authentication_endpoint"]?.stringValue == server.origin + "/oauth2/bc-authorize")
        #expect(d["backchannel_token_delivery_modes_supported"] == ["poll", "ping"])
        #expect(d["backchannel_user_code_parameter_supported"]?.boolValue == false)
        #expect(d["grant_types_supported"]?.arrayValue?.contains("urn:openid:params:grant-type:ciba") == true)
        #expect(d["token_endpoint"]?.stringValue == server.origin + "/oauth2/token")
        #expect(d["response_types_supported"]?.arrayValue?.contains("code") == true)
        #expect(d["scopes_supported"]?.arrayValue?.contains("openid") == true)
        // No signed authentication requests: nothing claims an algorithm for them.
        #expect(d["backchannel_authentication_request_signing_alg_values_supported"] == nil)
        #expect(d["request_parameter_supported"]?.boolValue == false)
    }

    @Test("fapi-ciba-id1")
    func happyPath() throws {
        let server = try Self.fixture.get()
        let first = try client(server), second = try client(server)
        let u = try user(server)
        // Two clients, two variations of the request; each gets tokens for its own.
        let one = try started(try ask(server, first, u))
        let two = try started(try ask(server, second, u, [("scope", "openid offline_access"), ("binding_message", "TV 4711"),
                                                          ("requested_expiry", "300")]))
        _ = try approve(u, one)
        #expect(try approve(u, two)["bindingMessage"]?.stringValue == "TV 4711")
        let issuer = try #require(try server.client().get("/.well-known/openid-configuration").json?["issuer"]?.stringValue)
        for (c, id, refresh) in [(first, one, false), (second, two, true)] {
            let tokens = try ciba.poll(server, c, id)
            #expect(tokens.status == 200, "\(tokens)")
            #expect((tokens.json?["refresh_token"] != nil) == refresh)
            #expect(tokens.json?["expires_in"]?.intValue ?? 0 > 0 && tokens.json?["token_type"]?.stringValue != nil)
            let idToken = try StepUpTests.claims(try #require(tokens.json?["id_token"]?.stringValue))
            #expect(idToken["iss"]?.stringValue == issuer && idToken["aud"]?.stringValue == c.id, "\(idToken)")
            #expect(idToken["sub"]?.stringValue == u.account.session.userId && idToken["acr"]?.stringValue == "urn:latchkey:acr:device-key")
            #expect((idToken["exp"]?.intValue ?? 0) > (idToken["iat"]?.intValue ?? .max) && idToken["auth_time"] != nil)
            // The access token is good at userinfo, for that user.
            let access = try #require(tokens.json?["access_token"]?.stringValue)
            let info = try server.client().get("/oauth2/userinfo", authorization: "Bearer \(access)")
            #expect(info.status == 200 && info.json?["sub"]?.stringValue == u.account.session.userId, "\(info)")
        }
    }

    @Test("fapi-ciba-id1-user-rejects-authentication")
    func userRejectsAuthentication() throws {
        let server = try Self.fixture.get()
        let c = try client(server)
        let u = try user(server)
        let id = try started(try ask(server, c, u))
        #expect(try u.account.client.send("POST", "/v1/ciba/requests/\(id)/deny", authorization: u.account.bearer).status == 204)
        let denied = try ciba.poll(server, c, id)
        #expect(denied.status == 400 && error(denied) == "access_denied", "\(denied)")
        // Denied stays denied: the request cannot be approved afterwards.
        let late = try u.account.client.send("POST", "/v1/ciba/requests/\(id)/approve", authorization: u.account.bearer)
        #expect(late.status == 404, "\(late)")
    }

    @Test("fapi-ciba-id1-multiple-call-to-token-endpoint")
    func multipleCallToTokenEndpoint() throws {
        let server = try Self.fixture.get()
        let c = try client(server)
        let u = try user(server)
        let id = try started(try ask(server, c, u))
        var seen: [String] = []
        for _ in 0..<6 {
            let r = try ciba.poll(server, c, id)
            #expect(r.status == 400 && ["authorization_pending", "slow_down"].contains(error(r) ?? ""), "\(r)")
            seen.append(error(r) ?? "")
        }
        #expect(seen.first == "authorization_pending" && seen.dropFirst().allSatisfy { $0 == "slow_down" }, "\(seen)")
        // Approved, the tokens come on the next poll whatever the pace.
        _ = try approve(u, id)
        #expect(try ciba.poll(server, c, id).status == 200)
    }

    @Test("fapi-ciba-id1-auth-req-id-expired")
    func authReqIdExpired() throws {
        let server = try Self.fixture.get()
        let c = try client(server)
        let u = try user(server)
        // The module asks for 10 s; Latchkey's range is 30…600 s, so 10 is refused and 30 is used.
        #expect(error(try ask(server, c, u, [("requested_expiry", "10")])) == "invalid_request")
        let asked = try ask(server, c, u, [("requested_expiry", "30")])
        #expect(asked.json?["expires_in"]?.intValue == 30)
        let id = try started(asked)
        Thread.sleep(forTimeInterval: 31)
        let expired = try ciba.poll(server, c, id)
        #expect(expired.status == 400 && error(expired) == "expired_token", "\(expired)")
        // Nor can the user approve it now.
        #expect(try u.account.client.send("POST", "/v1/ciba/requests/\(id)/deny", authorization: u.account.bearer).status == 404)
    }

    @Test("fapi-ciba-id1-ensure-authorization-request-with-binding-message-succeeds")
    func bindingMessageSucceeds() throws {
        let server = try Self.fixture.get()
        let c = try client(server)
        let u = try user(server)
        let id = try started(try ask(server, c, u, [("binding_message", "1234")]))
        #expect(try approve(u, id)["bindingMessage"]?.stringValue == "1234")
        #expect(try ciba.poll(server, c, id).status == 200)
    }

    @Test("fapi-ciba-id1-ensure-authorization-request-with-potentially-bad-binding-message")
    func potentiallyBadBindingMessage() throws {
        let server = try Self.fixture.get()
        let c = try client(server)
        let u = try user(server)
        // Long and far from ASCII, yet within SPEC's 64 code points: shown exactly as sent.
        let shown = "Überweisung 42,00 € an Café Zoë — 支付确认 · Płatność ✓ 🔐 #A-7"
        #expect(shown.unicodeScalars.count <= 64)
        let id = try started(try ask(server, c, u, [("binding_message", shown)]))
        #expect(try approve(u, id)["bindingMessage"]?.stringValue == shown)
        // One the device could not show — over 64 code points, or with a control character — is
        // refused before anyone is asked: invalid_binding_message.
        #expect(error(try ask(server, c, u, [("binding_message", String(repeating: "支", count: 65))])) == "invalid_binding_message")
        #expect(error(try ask(server, c, u, [("binding_message", "Pay\u{7}now")])) == "invalid_binding_message")
    }

    @Test("fapi-ciba-id1-ensure-other-scope-order-succeeds")
    func otherScopeOrderSucceeds() throws {
        let server = try Self.fixture.get()
        let c = try client(server)
        let u = try user(server)
        let id = try started(try ask(server, c, u, [("scope", "offline_access openid")]))
        _ = try approve(u, id)
        let tokens = try ciba.poll(server, c, id)
        #expect(tokens.status == 200 && tokens.json?["refresh_token"] != nil && tokens.json?["id_token"] != nil, "\(tokens)")
    }

    @Test("fapi-ciba-id1-ensure-requested-expiry-as-string-succeeds")
    func requestedExpiryAsStringSucceeds() throws {
        let server = try Self.fixture.get()
        let c = try client(server)
        let u = try user(server)
        // A form carries every value as a string: "120" and "0600" are numbers of seconds.
        #expect(try ask(server, c, u, [("requested_expiry", "120")]).json?["expires_in"]?.intValue == 120)
        #expect(try ask(server, c, u, [("requested_expiry", "0600")]).json?["expires_in"]?.intValue == 600)
        for bad in ["12O", "-60", "60.5", "9999", ""] {
            #expect(error(try ask(server, c, u, [("requested_expiry", bad)])) == "invalid_request", "\(bad)")
        }
    }

    @Test("fapi-ciba-id1-ensure-authorization-request-with-multiple-hints-fails")
    func multipleHintsFails() throws {
        let server = try Self.fixture.get()
        let c = try client(server)
        let u = try user(server)
        for hints in [[("login_hint", u.name), ("id_token_hint", "a.b.c")], [("login_hint", u.name), ("login_hint_token", "t")],
                      [("id_token_hint", "a.b.c"), ("login_hint_token", "t")]] {
            let r = try ciba.ask(server, c, [("scope", "openid")] + hints)
            #expect(r.status == 400 && error(r) == "invalid_request", "\(hints): \(r)")
        }
    }

    @Test("fapi-ciba-id1-ensure-wrong-auth-req-id-in-token-endpoint-request")
    func wrongAuthReqIdInTokenEndpointRequest() throws {
        let server = try Self.fixture.get()
        let first = try client(server), second = try client(server)
        let u = try user(server)
        let id = try started(try ask(server, first, u))
        _ = try approve(u, id)
        let stolen = try ciba.poll(server, second, id)
        #expect(stolen.status == 400 && error(stolen) == "invalid_grant", "\(stolen)")
        // The owner still gets its tokens: another client's try used nothing up.
        #expect(try ciba.poll(server, first, id).status == 200)
    }

    @Test("fapi-ciba-id1-ensure-wrong-client-id-in-token-endpoint-request")
    func wrongClientIdInTokenEndpointRequest() throws {
        let server = try Self.fixture.get()
        let first = try client(server), second = try client(server)
        let u = try user(server)
        let id = try started(try ask(server, first, u))
        // client_secret_basic's form of the module: another client's id with this client's secret.
        let r = try ciba.poll(server, CIBATests.CIBAClient(id: second.id, secret: first.secret), id)
        #expect(r.status == 401 && error(r) == "invalid_client", "\(r)")
    }

    @Test("fapi-ciba-id1-ensure-wrong-client-id-in-backchannel-authorization-request")
    func wrongClientIdInBackchannelAuthorizationRequest() throws {
        let server = try Self.fixture.get()
        let first = try client(server), second = try client(server)
        let u = try user(server)
        let r = try ask(server, CIBATests.CIBAClient(id: second.id, secret: first.secret), u)
        #expect(r.status == 401 && error(r) == "invalid_client", "\(r)")
    }

    @Test("fapi-ciba-id1-ensure-without-client-assertion-in-backchannel-authorization-request")
    func withoutClientAuthenticationInBackchannelAuthorizationRequest() throws {
        let server = try Self.fixture.get()
        let c = try client(server)
        let u = try user(server)
        // A confidential client naming itself by client_id alone has not authenticated.
        let r = try server.client().send("POST", "/oauth2/bc-authorize",
                                         body: OpenIDProviderTests.form([("client_id", c.id), ("scope", "openid"), ("login_hint", u.name)]),
                                         contentType: "application/x-www-form-urlencoded")
        #expect(r.status == 401 && error(r) == "invalid_client", "\(r)")
    }

    @Test("fapi-ciba-id1-ensure-without-client-assertion-in-token-endpoint-request")
    func withoutClientAuthenticationInTokenEndpointRequest() throws {
        let server = try Self.fixture.get()
        let c = try client(server)
        let u = try user(server)
        let id = try started(try ask(server, c, u))
        _ = try approve(u, id)
        let r = try server.client().send("POST", "/oauth2/token",
                                         body: OpenIDProviderTests.form([("client_id", c.id), ("grant_type", CIBAPoll.grantType), ("auth_req_id", id)]),
                                         contentType: "application/x-www-form-urlencoded")
        #expect(r.status == 401 && error(r) == "invalid_client", "\(r)")
        #expect(try ciba.poll(server, c, id).status == 200, "the refusal used nothing up")
    }

    @Test("fapi-ciba-id1-refresh-token")
    func refreshToken() throws {
        let server = try Self.fixture.get()
        let first = try client(server), second = try client(server)
        let u = try user(server)
        let id = try started(try ask(server, first, u, [("scope", "openid offline_access")]))
        _ = try approve(u, id)
        let refresh = try #require(try ciba.poll(server, first, id).json?["refresh_token"]?.stringValue)
        // Bound to the client it was issued to.
        let other = try ciba.form(server, "/oauth2/token", second, [("grant_type", "refresh_token"), ("refresh_token", refresh)])
        #expect(other.status == 400 && error(other) == "invalid_grant", "\(other)")
        let refreshed = try ciba.form(server, "/oauth2/token", first, [("grant_type", "refresh_token"), ("refresh_token", refresh)])
        #expect(refreshed.status == 200 && refreshed.json?["access_token"] != nil, "\(refreshed)")
        let idToken = try StepUpTests.claims(try #require(refreshed.json?["id_token"]?.stringValue))
        #expect(idToken["sub"]?.stringValue == u.account.session.userId && idToken["aud"]?.stringValue == first.id)
    }
}
