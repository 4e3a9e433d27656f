import Crypto
import Foundation
import JSON
@testable import LatchkeyServer
import Storage
import Testing
import Tokens

/// `CIBAService` over the in-memory `CIBAStore`, on a stepped clock: the decisions of SPEC "CIBA" …
/// "CIBA tokens" with no socket and no database (the HTTP side and PostgreSQL's statements are
/// `CIBATests`).
struct CIBAServiceTests {
    let world: OAuthWorld
    let store: InMemoryCIBAStore
    let ciba: CIBAService

    init() throws {
        world = try OAuthWorld()
        store = InMemoryCIBAStore(now: world.clock.now)
        ciba = CIBAService(store: store, provider: world.provider)
    }

    func client(_ approver: CIBARegistration.Approver = .attestedDeviceKey, mode: CIBARegistration.Mode = .poll) throws -> OAuthWorld.Client {
        var r = OAuthClientService.Registration(name: "Bank", redirectURIs: [OAuthWorld.redirectURI])
        r.authorizationDetailsTypes = ["payment_initiation"]
        r.ciba = CIBARegistration(mode: mode, notificationEndpoint: mode == .ping ? "https://bank.example/ciba" : nil, approver: approver)
        let created = try world.clients.add(r, by: .named("admin"))
        store.addClient(created.client.id, name: "Bank")
        return OAuthWorld.Client(id: created.client.id, secret: created.secret)
    }

    func account(_ name: String) -> SessionService.Caller {
        let id = "user-\(name)"
        store.addAccount(name, id: id)
        return SessionService.Caller(userId: id, sessionId: "session-\(name)")
    }

    func ask(_ c: OAuthWorld.Client, _ form: [(String, String)]) throws(OAuthError) -> BackchannelStarted {
        try ciba.authorize(try BackchannelRequest(try world.request(c, form, at: .backchannel)))
    }

    func poll(_ c: OAuthWorld.Client, _ id: String) throws(OAuthError) -> JSONValue {
        try ciba.poll(try CIBAPoll(try world.request(c, [("grant_type", CIBAPoll.grantType), ("auth_req_id", id)]))).json
    }

    func stepUp(_ who: SessionService.Caller, _ authentication: AuthenticationClaims, jti: String = "jti-1") -> Approval {
        .stepUp(StepUpRedemption(jti: jti, userId: who.userId, actionHash: [1, 2, 3]), receiptId: "receipt-\(jti)", authentication: authentication)
    }

    @Test("a request, pending, slow_down growing the interval, an attested key's approval, the tokens once")
    func pollToTokens() throws {
        let c = try client()
        let alice = account("alice")
        let started = try ask(c, [("scope", "openid offline_access"), ("login_hint", "alice"), ("binding_message", "Pay 10 EUR")])
        #expect(started.expiresIn == 120 && started.interval == 5)
        #expect(store.events.map(\.type) == [.cibaRequested])
        #expect(oauthError { () throws(OAuthError) in try poll(c, started.authReqId) }?.code == .authorizationPending)
        world.clock.advance(2)
        #expect(oauthError { () throws(OAuthError) in try poll(c, started.authReqId) }?.code == .slowDown)
        // After slow_down the interval is 10 s: 6 s later is still too soon, 11 s is not.
        world.clock.advance(6)
        #expect(oauthError { () throws(OAuthError) in try poll(c, started.authReqId) }?.code == .slowDown)
        world.clock.advance(16)
        #expect(oauthError { () throws(OAuthError) in try poll(c, started.authReqId) }?.code == .authorizationPending)

        let pending = try ciba.pending(userId: alice.userId)
        #expect(pending.map(\.id) == [started.authReqId] && pending.first?.bindingMessage == "Pay 10 EUR")
        // Without a step-up, or with an unattested key's: step_up_required, nothing decided.
        #expect(throws: ServiceError.self) { try ciba.approve(started.authReqId, caller: alice, approval: nil, read: nil) }
        #expect(throws: ServiceError.self) {
            try ciba.approve(started.authReqId, caller: alice, approval: stepUp(alice, .deviceKey), read: nil)
        }
        // Another account's request is not found.
        let bob = account("bob")
        #expect(throws: ServiceError.self) { try ciba.deny(started.authReqId, caller: bob, read: nil) }
        try ciba.approve(started.authReqId, caller: alice, approval: stepUp(alice, .deviceKeyAttested), read: nil)
        #expect(try ciba.pending(userId: alice.userId).isEmpty)

        let tokens = try poll(c, started.authReqId)
        let idToken = try #require(tokens["id_token"]?.stringValue)
        let claims = try JSONParser.parse(try #require(Base64URL.decode(String(idToken.split(separator: ".")[1]))))
        #expect(claims["acr"]?.stringValue == "urn:latchkey:acr:device-key-attested" && claims["sub"]?.stringValue == alice.userId)
        #expect(tokens["refresh_token"] != nil)
        // The approval's receipt rides in the access token, details or not.
        let accessToken = try #require(tokens["access_token"]?.stringValue)
        let access = try JSONParser.parse(try #require(Base64URL.decode(String(accessToken.split(separator: ".")[1]))))
        #expect(access["receipt_id"]?.stringValue == "receipt-jti-1" && access["authorization_details"] == nil)
        #expect(oauthError { () throws(OAuthError) in try poll(c, started.authReqId) }?.code == .invalidGrant)
    }

    @Test("deny, expiry and the pending cap answer access_denied and expired_token")
    func denyAndExpiry() throws {
        let c = try client(.passkey)
        let carol = account("carol")
        let denied = try ask(c, [("scope", "openid"), ("login_hint", "carol")])
        try ciba.deny(denied.authReqId, caller: carol, read: nil)
        #expect(oauthError { () throws(OAuthError) in try poll(c, denied.authReqId) }?.code == .accessDenied)
        let short = try ask(c, [("scope", "openid"), ("login_hint", "carol"), ("requested_expiry", "30")])
        #expect(short.expiresIn == 30)
        world.clock.advance(31)
        #expect(oauthError { () throws(OAuthError) in try poll(c, short.authReqId) }?.code == .expiredToken)
        // A fourth pending request expires the oldest.
        var ids: [String] = []
        for _ in 0..<4 { ids.append(try ask(c, [("scope", "openid"), ("login_hint", "carol")]).authReqId) }
        #expect(oauthError { () throws(OAuthError) in try poll(c, ids[0]) }?.code == .expiredToken)
        #expect(try ciba.pending(userId: carol.userId).map(\.id) == Array(ids.dropFirst()))
        // A passkey client's request is approved by a passkey step-up, not a device key's.
        #expect(throws: ServiceError.self) { try ciba.approve(ids[1], caller: carol, approval: stepUp(carol, .deviceKeyAttested), read: nil) }
        try ciba.approve(ids[1], caller: carol, approval: stepUp(carol, .passkeyVerified, jti: "jti-p"), read: nil)
        // The same step-up again is used up.
        #expect(throws: ServiceError.self) { try ciba.approve(ids[2], caller: carol, approval: stepUp(carol, .passkeyVerified, jti: "jti-p"), read: nil) }
        // A grant dies with the session that approved it.
        store.endFamily(carol.sessionId)
        #expect(oauthError { () throws(OAuthError) in try poll(c, ids[1]) }?.code == .invalidGrant)
    }

    @Test("limits: three denials a day block the client for the account; unknown users count per client")
    func limits() throws {
        let c = try client(.deviceKey)
        let dave = account("dave")
        for _ in 0..<3 {
            let r = try ask(c, [("scope", "openid"), ("login_hint", "dave")])
            try ciba.deny(r.authReqId, caller: dave, read: nil)
        }
        #expect(oauthError { () throws(OAuthError) in try ask(c, [("scope", "openid"), ("login_hint", "dave")]) }?.code == .accessDenied)
        world.clock.advance(86401)
        #expect(try ask(c, [("scope", "openid"), ("login_hint", "dave")]).interval == 5)
        for n in 0..<10 { #expect(oauthError { () throws(OAuthError) in try ask(c, [("scope", "openid"), ("login_hint", "ghost-\(n)")]) }?.code == .unknownUserId) }
        let limited = oauthError { () throws(OAuthError) in try ask(c, [("scope", "openid"), ("login_hint", "ghost-x")]) }
        #expect(limited?.status == 429)
        world.clock.advance(3601)
        #expect(oauthError { () throws(OAuthError) in try ask(c, [("scope", "openid"), ("login_hint", "ghost-y")]) }?.code == .unknownUserId)
    }

    @Test("ping: an approval writes one ciba.ping delivery to the client's endpoint with its notification token")
    func ping() throws {
        let c = try client(.deviceKey, mode: .ping)
        let erin = account("erin")
        #expect(oauthError { () throws(OAuthError) in try ask(c, [("scope", "openid"), ("login_hint", "erin")]) }?.code == .invalidRequest)
        let r = try ask(c, [("scope", "openid"), ("login_hint", "erin"), ("client_notification_token", "tok-123")])
        try ciba.approve(r.authReqId, caller: erin, approval: stepUp(erin, .deviceKey), read: nil)
        let ping = try #require(store.events.first { $0.type == .cibaPing })
        #expect(ping.fanOut == [.direct(channel: .cibaPing, target: c.id)])
        #expect(ping.data["token"]?.stringValue == "tok-123" && ping.data["authReqId"]?.stringValue == r.authReqId)
        #expect(ping.data["endpoint"]?.stringValue == "https://bank.example/ciba")
    }

    @Test("registration: the command line's CIBA flags, and the combinations refused (exit 64 / 400)")
    func registrationRules() throws {
        let ok = try OAuthClientService.cibaRegistration(grantTypes: ["ciba"], mode: nil, endpoint: nil, approver: nil)
        #expect(ok == CIBARegistration(mode: .poll, notificationEndpoint: nil, approver: .attestedDeviceKey))
        #expect(try OAuthClientService.cibaRegistration(grantTypes: [], mode: nil, endpoint: nil, approver: nil) == nil)
        expectRefusal(.invalidRequest) { _ = try OAuthClientService.cibaRegistration(grantTypes: [], mode: "poll", endpoint: nil, approver: nil) }
        expectRefusal(.invalidRequest) { _ = try OAuthClientService.cibaRegistration(grantTypes: ["ciba"], mode: "ping", endpoint: nil, approver: nil) }
        expectRefusal(.invalidRequest) {
            _ = try OAuthClientService.cibaRegistration(grantTypes: ["ciba"], mode: "poll", endpoint: "https://bank.example/n", approver: nil)
        }
        expectRefusal(.invalidRequest) { _ = try OAuthClientService.cibaRegistration(grantTypes: ["ciba"], mode: nil, endpoint: nil, approver: "sms") }
        expectRefusal(.invalidRequest) { _ = try OAuthClientService.cibaRegistration(grantTypes: ["password"], mode: nil, endpoint: nil, approver: nil) }
        var r = OAuthClientService.Registration(name: "Public", redirectURIs: ["http://127.0.0.1/cb"])
        r.isPublic = true
        r.ciba = ok
        expectRefusal(.invalidRequest) { _ = try OAuthClientService.authMethod(r) }
        // Ping's endpoint is under the webhook address rules.
        var ping = OAuthClientService.Registration(name: "Ping", redirectURIs: [OAuthWorld.redirectURI])
        ping.ciba = CIBARegistration(mode: .ping, notificationEndpoint: "ftp://bank.example/n", approver: .deviceKey)
        expectRefusal(.invalidRequest) { _ = try world.clients.add(ping, by: .named("admin")) }
    }

    @Test("id_token_hint: an id_token this server issued names the account (an expired one too); anything else is invalid_request")
    func idTokenHint() throws {
        let c = try client(.deviceKey)
        let web = try world.client()
        let frank = try world.person("frank")
        store.addAccount("frank", id: frank.id)
        let idToken = try #require(try world.exchange(web, code: try world.code(web, by: frank))["id_token"]?.stringValue)
        world.clock.advance(86400)
        let started = try ask(c, [("scope", "openid"), ("id_token_hint", idToken)])
        #expect(try ciba.pending(userId: frank.id).map(\.id) == [started.authReqId])
        #expect(oauthError { () throws(OAuthError) in try ask(c, [("scope", "openid"), ("id_token_hint", "e30.e30.sig")]) }?.code == .invalidRequest)
    }
}
