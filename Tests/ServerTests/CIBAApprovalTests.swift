import Foundation
import JSON
@testable import LatchkeyServer
import Storage
import Testing

/// SPEC "CIBA approval" and "CIBA tokens" over HTTP, against PostgreSQL: who may approve (a not-held
/// passkey session, or the device-key session that enrolled the approving key), the client's
/// `acr_values`, and a ping client told of every outcome — tokens, `access_denied`, `expired_token`
/// — from the outbox (CIBA Core §10.2).
@Suite(.serialized)
struct CIBAApprovalTests {
    /// Dev mode (a ping endpoint on loopback), sending outbox deliveries, and email sign-in (an
    /// email session is a session no passkey began).
    static let fixture = Result { try TestServer.sending(name: "ciba-approval") { RecoveryTests.mailSettings(&$0) } }
    let h = StepUpTests()
    let rec = RecoveryTests()
    let ciba = CIBATests()

    func action(_ id: String, _ c: CIBATests.CIBAClient) -> JSONValue {
        .object([("type", "latchkey.ciba.approve"), ("authReqId", .string(id)), ("clientId", .string(c.id)), ("bindingMessage", .null),
                 ("authorizationDetails", .null)])
    }

    func approve(_ a: StepUpTests.Account, _ id: String, stepUp: String) throws -> Reply {
        try a.client.send("POST", "/v1/ciba/requests/\(id)/approve", authorization: a.bearer, headers: [("Latchkey-Step-Up", stepUp)])
    }

    func pingClient(_ server: TestServer, _ receiver: PingReceiver, approver: String = "device-key") throws -> CIBATests.CIBAClient {
        let r = try ciba.register(server, [("grantTypes", ["urn:openid:params:grant-type:ciba"]), ("backchannelTokenDeliveryMode", "ping"),
                                           ("backchannelClientNotificationEndpoint", .string(receiver.url)), ("cibaApprover", .string(approver))])
        #expect(r.status == 201, "\(r)")
        return CIBATests.CIBAClient(id: try #require(r.json?["id"]?.stringValue), secret: try #require(r.json?["clientSecret"]?.stringValue))
    }

    @Test("a device-key session approves with the key it enrolled, not with another session's; a session with no key is forbidden")
    func deviceKeySession() throws {
        let server = try Self.fixture.get()
        let c = try ciba.cibaClient(server, approver: "device-key")
        let a = try rec.account(server)
        // The phone's session: an email sign-in (not a passkey session), which enrols its device key
        // with the account's passkey step-up.
        let phone = StepUpTests.Account(client: a.client, session: try rec.emailSession(a), authenticator: a.authenticator)
        let phoneKey = StepUpTests.Phone(platform: "android")
        let phoneKeyId = try h.enrolled(phone, phoneKey)
        // Another device key, enrolled by the passkey session.
        let tablet = StepUpTests.Phone(platform: "ios")
        let tabletId = try h.enrolled(a.stepUpAccount, tablet)

        let id = try #require(try ciba.ask(server, c, [("scope", "openid"), ("login_hint", a.username)]).json?["auth_req_id"]?.stringValue)
        // The tablet's key, its step-up made in the phone's session: not this session's key.
        let foreign = try h.approve(phone, tablet, keyId: tabletId, action: action(id, c))
        let refused = try approve(phone, id, stepUp: try #require(foreign["access_token"]?.stringValue))
        #expect(refused.status == 403 && refused.code == "step_up_required", "\(refused)")
        // A passkey's step-up from the phone's session: a passkey session is not what it is.
        let passkey = try rec.passkeyStepUp(phone, action: action(id, c))
        let byPasskey = try approve(phone, id, stepUp: try #require(passkey.json?["access_token"]?.stringValue, "\(passkey)"))
        #expect(byPasskey.status == 403 && byPasskey.code == "step_up_required", "\(byPasskey)")
        #expect(try ciba.poll(server, c, id).json?["error"]?.stringValue == "authorization_pending")

        // Another email session of the account, which enrolled no device key: 403 forbidden, even
        // with a valid step-up, and before the request is looked up.
        let bare = StepUpTests.Account(client: a.client, session: try rec.emailSession(a), authenticator: a.authenticator)
        let noKey = try bare.client.send("POST", "/v1/ciba/requests/\(id)/approve", authorization: bare.bearer)
        #expect(noKey.status == 403 && noKey.code == "forbidden", "\(noKey)")
        let noKeyUnknown = try bare.client.send("POST", "/v1/ciba/requests/lkb_unknown/approve", authorization: bare.bearer)
        #expect(noKeyUnknown.status == 403 && noKeyUnknown.code == "forbidden", "\(noKeyUnknown)")

        // The phone's own key approves; the tokens name that key's receipt.
        let own = try h.approve(phone, phoneKey, keyId: phoneKeyId, action: action(id, c))
        #expect(try approve(phone, id, stepUp: try #require(own["access_token"]?.stringValue)).status == 204)
        let tokens = try ciba.poll(server, c, id)
        #expect(tokens.status == 200, "\(tokens)")
        let access = try StepUpTests.claims(try #require(tokens.json?["access_token"]?.stringValue))
        #expect(access["receipt_id"]?.stringValue == own["receiptId"]?.stringValue)

        // Once the phone's key is revoked, its session is a device-key session no more.
        #expect(try phone.client.send("DELETE", "/v1/device-keys/\(phoneKeyId)", authorization: phone.bearer).status == 204)
        let next = try #require(try ciba.ask(server, c, [("scope", "openid"), ("login_hint", a.username)]).json?["auth_req_id"]?.stringValue)
        let after = try phone.client.send("POST", "/v1/ciba/requests/\(next)/approve", authorization: phone.bearer)
        #expect(after.status == 403 && after.code == "forbidden", "\(after)")
    }

    @Test("acr_values: a value the approver kind cannot meet is invalid_request; an unmet one at approval is step_up_required")
    func acrValues() throws {
        let server = try Self.fixture.get()
        let c = try ciba.cibaClient(server, approver: "device-key")
        let a = try h.account(server)
        let name = ciba.username(a)
        for acr in ["phr", "phrh", "urn:latchkey:acr:email-otp", "urn:example:none"] {
            let r = try ciba.ask(server, c, [("scope", "openid"), ("login_hint", name), ("acr_values", acr)])
            #expect(r.status == 400 && r.json?["error"]?.stringValue == "invalid_request", "\(acr): \(r)")
        }
        let phone = StepUpTests.Phone(platform: "android")
        let keyId = try h.enrolled(a, phone)
        // An attested key demanded: this unattested key's step-up does not meet it.
        let attested = try ciba.ask(server, c, [("scope", "openid"), ("login_hint", name), ("acr_values", "urn:latchkey:acr:device-key-attested")])
        let strict = try #require(attested.json?["auth_req_id"]?.stringValue, "\(attested)")
        let unmet = try approve(a, strict, stepUp: try #require(try h.approve(a, phone, keyId: keyId, action: action(strict, c))["access_token"]?.stringValue))
        #expect(unmet.status == 403 && unmet.code == "step_up_required", "\(unmet)")
        // Either value, attested first: the unattested key meets the second, and the tokens say so.
        let either = try #require(try ciba.ask(server, c, [("scope", "openid"), ("login_hint", name),
                                                          ("acr_values", "urn:latchkey:acr:device-key-attested urn:latchkey:acr:device-key")])
            .json?["auth_req_id"]?.stringValue)
        let met = try approve(a, either, stepUp: try #require(try h.approve(a, phone, keyId: keyId, action: action(either, c))["access_token"]?.stringValue))
        #expect(met.status == 204, "\(met)")
        let tokens = try ciba.poll(server, c, either)
        #expect(try StepUpTests.claims(try #require(tokens.json?["id_token"]?.stringValue))["acr"]?.stringValue == "urn:latchkey:acr:device-key")
    }

    @Test("ping: a denial, a fourth request expiring the oldest, and an expiry nothing else triggers each notify the client once")
    func pingOnEveryOutcome() throws {
        let server = try Self.fixture.get()
        let receiver = try PingReceiver()
        defer { receiver.stop() }
        let c = try pingClient(server, receiver)
        let a = try h.account(server)
        let name = ciba.username(a)
        func ask(_ extra: [(String, String)] = []) throws -> String {
            let r = try ciba.ask(server, c, [("scope", "openid"), ("login_hint", name), ("client_notification_token", "bearer-\(name)")] + extra)
            return try #require(r.json?["auth_req_id"]?.stringValue, "\(r)")
        }
        let oldest = try ask()
        // A denial: pinged at once; the client collects access_denied.
        let denied = try ask()
        #expect(try a.client.send("POST", "/v1/ciba/requests/\(denied)/deny", authorization: a.bearer).status == 204)
        let deniedPing = receiver.wait(for: denied)
        #expect(deniedPing.count == 1 && deniedPing.first?.authorization == "Bearer bearer-\(name)", "\(deniedPing)")
        #expect(deniedPing.first?.contentType?.hasPrefix("application/json") == true)
        #expect(try ciba.poll(server, c, denied).json?["error"]?.stringValue == "access_denied")
        // Three pending (the oldest and two more); a fourth expires the oldest, pinged at once.
        #expect(receiver.wait(for: oldest, seconds: 0.5).isEmpty, "pinged before anything happened to it")
        let second = try ask()
        _ = try ask()
        _ = try ask()
        #expect(receiver.wait(for: oldest).count == 1, "the oldest, expired by the fourth, was not pinged")
        #expect(try ciba.poll(server, c, oldest).json?["error"]?.stringValue == "expired_token")
        // An expiry nothing triggers: requested_expiry 30 s, pinged a second after it (this request
        // also expires `second`, the oldest pending now).
        let short = try ask([("requested_expiry", "30")])
        let asked = Date()
        #expect(receiver.wait(for: second).count == 1)
        #expect(receiver.wait(for: short, seconds: 1).isEmpty, "pinged before it expired")
        let expiredPing = receiver.wait(for: short, seconds: 45)
        #expect(expiredPing.count == 1, "no ping after the expiry")
        if let at = expiredPing.first?.receivedAt { #expect(at.timeIntervalSince(asked) >= 29, "pinged \(at.timeIntervalSince(asked)) s in") }
        #expect(try ciba.poll(server, c, short).json?["error"]?.stringValue == "expired_token")
        // One notification per request, whatever happened to it.
        for id in [oldest, denied, second, short] { #expect(receiver.received.filter { $0.authReqId == id }.count == 1) }
    }
}
