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

    /// A not-held passkey session of a new account `name`.
    func account(_ name: String) -> SessionService.Caller {
        let id = "user-\(name)"
        store.addAccount(name, id: id)
        return SessionService.Caller(userId: id, sessionId: "session-\(name)",
                                     standing: SessionService.Standing(method: .passkey, credentialId: [1], heldUntil: nil))
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

    @Test("ping: the request writes its one ciba.ping notification, due a second after it expires; an approval makes it due at once")
    func ping() throws {
        let c = try client(.deviceKey, mode: .ping)
        let erin = account("erin")
        #expect(oauthError { () throws(OAuthError) in try ask(c, [("scope", "openid"), ("login_hint", "erin")]) }?.code == .invalidRequest)
        let asked = world.clock.now()
        let r = try ask(c, [("scope", "openid"), ("login_hint", "erin"), ("client_notification_token", "tok-123")])
        let ping = try #require(store.events.first { $0.type == .cibaPing })
        #expect(ping.fanOut == [.direct(channel: .cibaPing, target: r.authReqId)])
        #expect(ping.data["token"]?.stringValue == "tok-123" && ping.data["authReqId"]?.stringValue == r.authReqId)
        #expect(ping.data["endpoint"]?.stringValue == "https://bank.example/ciba")
        #expect(ping.notBefore == asked.addingTimeInterval(121) && ping.maxAgeSeconds == 241)
        #expect(store.pingsDue.isEmpty)
        world.clock.advance(7)
        try ciba.approve(r.authReqId, caller: erin, approval: stepUp(erin, .deviceKey), read: nil)
        #expect(store.pingsDue == [ping.id: asked.addingTimeInterval(7)])
        #expect(store.events.filter { $0.type == .cibaPing }.count == 1, "one notification per request")
    }

    @Test("ping: a denial, and a fourth pending request expiring the oldest, make that request's notification due at once")
    func pingOnDenyAndEarlyExpiry() throws {
        let c = try client(.deviceKey, mode: .ping)
        let fay = account("fay")
        var ids: [String] = []
        for n in 0..<4 { ids.append(try ask(c, [("scope", "openid"), ("login_hint", "fay"), ("client_notification_token", "t\(n)")]).authReqId) }
        let pings = Dictionary(uniqueKeysWithValues: store.events.filter { $0.type == .cibaPing }.map { ($0.data["authReqId"]!.stringValue!, $0.id) })
        #expect(store.pingsDue == [pings[ids[0]]!: world.clock.now()])
        world.clock.advance(3)
        try ciba.deny(ids[1], caller: fay, read: nil)
        #expect(store.pingsDue[pings[ids[1]]!] == world.clock.now())
        #expect(oauthError { () throws(OAuthError) in try poll(c, ids[0]) }?.code == .expiredToken)
        #expect(oauthError { () throws(OAuthError) in try poll(c, ids[1]) }?.code == .accessDenied)
    }

    @Test("a device-key session approves only with a device key it enrolled; another session's key is step_up_required")
    func deviceKeySession() throws {
        let c = try client(.deviceKey)
        let gus = account("gus")
        // An email session of the account (not a passkey session) that enrolled a device key.
        let phone = SessionService.Caller(userId: gus.userId, sessionId: "session-gus-phone",
                                          standing: SessionService.Standing(method: .email, credentialId: nil, heldUntil: nil))
        store.deviceKeyStepUp("jti-own", enrolledBy: phone.sessionId)
        store.deviceKeyStepUp("jti-other", enrolledBy: "session-elsewhere")
        let r = try ask(c, [("scope", "openid"), ("login_hint", "gus")])
        expectRefusal(.stepUpRequired) { try ciba.approve(r.authReqId, caller: phone, approval: stepUp(phone, .deviceKey, jti: "jti-other"), read: nil) }
        expectRefusal(.stepUpRequired) { try ciba.approve(r.authReqId, caller: phone, approval: stepUp(phone, .passkeyVerified, jti: "jti-pk"), read: nil) }
        try ciba.approve(r.authReqId, caller: phone, approval: stepUp(phone, .deviceKey, jti: "jti-own"), read: nil)
        let tokens = try poll(c, r.authReqId)
        #expect(try StepUpTests.claims(try #require(tokens["id_token"]?.stringValue))["acr"]?.stringValue == "urn:latchkey:acr:device-key")
    }

    @Test("acr_values: refused at bc-authorize when the approver kind cannot meet it; met at approval; the token names the value met")
    func acrValues() throws {
        let keys = try client(.deviceKey)
        let web = try client(.passkey)
        let hal = account("hal")
        for (c, acr) in [(keys, "phr"), (keys, "urn:latchkey:acr:email-otp"), (web, "urn:latchkey:acr:device-key"), (keys, "urn:example:unknown")] {
            #expect(oauthError { () throws(OAuthError) in try ask(c, [("scope", "openid"), ("login_hint", "hal"), ("acr_values", acr)]) }?.code
                    == .invalidRequest, "\(acr)")
        }
        // Attested demanded: an unattested key's step-up does not meet it; an attested key's does.
        let attested = try ask(keys, [("scope", "openid"), ("login_hint", "hal"), ("acr_values", "urn:latchkey:acr:device-key-attested")])
        expectRefusal(.stepUpRequired) { try ciba.approve(attested.authReqId, caller: hal, approval: stepUp(hal, .deviceKey, jti: "a1"), read: nil) }
        try ciba.approve(attested.authReqId, caller: hal, approval: stepUp(hal, .deviceKeyAttested, jti: "a2"), read: nil)
        world.clock.advance(6)
        #expect(try StepUpTests.claims(try #require(try poll(keys, attested.authReqId)["id_token"]?.stringValue))["acr"]?.stringValue
                == "urn:latchkey:acr:device-key-attested")
        // The first value the approval meets, in the client's order: an attested key meets device-key.
        let either = try ask(keys, [("scope", "openid"), ("login_hint", "hal"), ("acr_values", "urn:example:unknown urn:latchkey:acr:device-key")])
        try ciba.approve(either.authReqId, caller: hal, approval: stepUp(hal, .deviceKeyAttested, jti: "a3"), read: nil)
        #expect(try StepUpTests.claims(try #require(try poll(keys, either.authReqId)["id_token"]?.stringValue))["acr"]?.stringValue
                == "urn:latchkey:acr:device-key")
        // A passkey client asked for phrh: a passkey not proven hardware-bound (phr) does not meet it.
        let hardware = try ask(web, [("scope", "openid"), ("login_hint", "hal"), ("acr_values", "phrh")])
        expectRefusal(.stepUpRequired) { try ciba.approve(hardware.authReqId, caller: hal, approval: stepUp(hal, .passkeyVerified, jti: "p1"), read: nil) }
        let phr = try ask(web, [("scope", "openid"), ("login_hint", "hal"), ("acr_values", "urn:latchkey:acr:passkey-uv")])
        try ciba.approve(phr.authReqId, caller: hal, approval: stepUp(hal, .passkeyVerified, jti: "p2"), read: nil)
        #expect(try StepUpTests.claims(try #require(try poll(web, phr.authReqId)["id_token"]?.stringValue))["acr"]?.stringValue == "phr")
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
