import Crypto
import Foundation
import JSON
import LatchkeyServer
import Testing
import WebAuthn
import WebAuthnTesting

/// SPEC "Trust chain": a device key is only as strong as the way it was enrolled. Issue 10's first
/// hole — anyone with a session (a stolen access token, or one minted from a stolen refresh token)
/// could enrol their own key, approve payments with it, and silently replace the victim's key —
/// closed: each test below is an attempt that used to succeed.
@Suite("Trust chain: gated device-key enrolment")
struct TrustChainTests {
    static let fixture = Result { try TestServer(name: "trust") { $0.stepUpTTL = 30 } }
    let h = StepUpTests()

    func enrolmentBody(_ a: StepUpTests.Account, _ phone: StepUpTests.Phone) throws -> JSONValue {
        let c = try h.enrolmentChallenge(a)
        return .object([
            ("deviceId", .string(phone.deviceId)), ("publicKey", .string(Base64URL.encode(phone.publicKey))),
            ("platform", .string(phone.platform)), ("challengeId", c["challengeId"]!),
            ("signature", .string(try phone.sign(c["challenge"]!.stringValue!))),
        ])
    }

    func post(_ a: StepUpTests.Account, _ body: JSONValue, bearer: String? = nil, _ headers: [(String, String)] = []) throws -> Reply {
        try a.client.post("/v1/device-keys", body, authorization: bearer ?? a.bearer, headers: headers)
    }

    @Test("an access token alone — even one minted from a stolen refresh token — cannot enrol a key")
    func accessTokenAlone() throws {
        let server = try Self.fixture.get()
        let a = try h.account(server)
        let attacker = StepUpTests.Phone(platform: "android")
        let refused = try post(a, try enrolmentBody(a, attacker))
        #expect(refused.status == 403 && refused.code == "step_up_required", "\(refused)")

        // The refresh grant gives a fresh access token, and still no enrolment.
        let refreshed = try a.client.send("POST", "/v1/token", body: Array("grant_type=refresh_token&refresh_token=\(a.session.refreshToken)".utf8),
                                          contentType: "application/x-www-form-urlencoded")
        let minted = try #require(refreshed.json?["access_token"]?.stringValue, "\(refreshed)")
        let again = try post(a, try enrolmentBody(a, attacker), bearer: "Bearer \(minted)")
        #expect(again.code == "step_up_required", "\(again)")
        #expect(try a.client.get("/v1/device-keys", authorization: a.bearer).json?["deviceKeys"]?.arrayValue?.isEmpty == true)
    }

    @Test("replacing a deviceId needs the gate too: the victim's key stays live")
    func replacementIsGated() throws {
        let server = try Self.fixture.get()
        let a = try h.account(server)
        let victim = StepUpTests.Phone(platform: "ios")
        let victimKey = try h.enrolled(a, victim)
        let attacker = StepUpTests.Phone(platform: "ios", deviceId: victim.deviceId)
        #expect(try post(a, try enrolmentBody(a, attacker)).code == "step_up_required")
        let keys = try #require(try a.client.get("/v1/device-keys", authorization: a.bearer).json?["deviceKeys"]?.arrayValue)
        #expect(keys.map { $0["id"]?.stringValue } == [victimKey])
        // With the gate, the owner's re-enrolment replaces it.
        #expect(try h.enrol(a, attacker).status == 201)
    }

    @Test("a step-up for another action, another deviceId, another user, or used twice → step_up_required")
    func wrongStepUps() throws {
        let server = try Self.fixture.get()
        let a = try h.account(server), b = try h.account(server)
        let phone = StepUpTests.Phone(platform: "android")

        // A payment approval is not an enrolment approval.
        let transfer = try stepUpToken(a, action: StepUpTests.transfer)
        #expect(try post(a, try enrolmentBody(a, phone), [("Latchkey-Step-Up", transfer)]).code == "step_up_required")
        // Approved for another device.
        let otherDevice = try h.enrolmentApproval(a, deviceId: "another-\(uniqueSuffix())")
        #expect(try post(a, try enrolmentBody(a, phone), [("Latchkey-Step-Up", otherDevice)]).code == "step_up_required")
        // B's approval for this very deviceId does not work on A's account.
        let bApproval = try h.enrolmentApproval(b, deviceId: phone.deviceId)
        #expect(try post(a, try enrolmentBody(a, phone), [("Latchkey-Step-Up", bApproval)]).code == "step_up_required")
        // An access token is no step-up token.
        #expect(try post(a, try enrolmentBody(a, phone), [("Latchkey-Step-Up", a.session.accessToken)]).code == "step_up_required")

        // The right one works once; the enrolment consumed it.
        let approval = try h.enrolmentApproval(a, deviceId: phone.deviceId)
        #expect(try post(a, try enrolmentBody(a, phone), [("Latchkey-Step-Up", approval)]).status == 201)
        let replay = try post(a, try enrolmentBody(a, phone), [("Latchkey-Step-Up", approval)])
        #expect(replay.code == "step_up_required", "\(replay)")
        // …and, used up, it can no longer be spent at /v1/step-up/consume either.
        let enrolAction: JSONValue = .object([("type", "latchkey.device-key.enrol"), ("deviceId", .string(phone.deviceId))])
        #expect(try h.consume(a, token: approval, action: enrolAction).code == "conflict")
    }

    @Test("a refused enrolment (bad proof of possession) does not burn the approval")
    func refusalKeepsGate() throws {
        let server = try Self.fixture.get()
        let a = try h.account(server)
        let phone = StepUpTests.Phone(platform: "android")
        let approval = try h.enrolmentApproval(a, deviceId: phone.deviceId)
        let forged = try enrolmentBody(a, phone).setting("signature", .string(try StepUpTests.Phone(platform: "android").sign(
            Base64URL.encode(Array(repeating: 7, count: 73)))))
        #expect(try post(a, forged, [("Latchkey-Step-Up", approval)]).code == "signature_invalid")
        #expect(try post(a, try enrolmentBody(a, phone), [("Latchkey-Step-Up", approval)]).status == 201)
    }

    @Test("a step-up made with a device key cannot vouch for a new device key")
    func deviceKeyCannotEnrolAnother() throws {
        let server = try Self.fixture.get()
        let a = try h.account(server)
        let first = StepUpTests.Phone(platform: "android")
        let keyId = try h.enrolled(a, first)
        let second = StepUpTests.Phone(platform: "android")
        let action: JSONValue = .object([("type", "latchkey.device-key.enrol"), ("deviceId", .string(second.deviceId))])
        let approved = try h.approve(a, first, keyId: keyId, action: action)
        let token = try #require(approved["access_token"]?.stringValue)
        #expect(try post(a, try enrolmentBody(a, second), [("Latchkey-Step-Up", token)]).code == "step_up_required")
    }

    @Test("device-key tickets from the app backend: bound to their user, single use; passkey tickets are no device-key tickets")
    func deviceKeyTickets() throws {
        let server = try Self.fixture.get()
        let client = server.client()
        let externalId = "ext-\(uniqueSuffix())"
        let admin = "Bearer \(server.adminKey)"
        // Unknown user: nothing to bind a ticket to.
        #expect(try client.post("/admin/v1/users/\(externalId)/device-key-tickets", .object([]), authorization: admin).code == "not_found")
        // A user token is not the admin key.
        let passkeyTicket = try #require(try client.enrolmentTicket(externalId: externalId, username: server.username("dkt")).json?["ticket"]?.stringValue)
        let authenticator = SoftAuthenticator()
        let (_, registered) = try client.register(authenticator, authorization: "Ticket \(passkeyTicket)")
        let session = Session(reply: try #require(registered.json))
        let a = StepUpTests.Account(client: client, session: session, authenticator: authenticator)
        #expect(try client.post("/admin/v1/users/\(externalId)/device-key-tickets", .object([]), authorization: a.bearer).code == "forbidden")

        let issued = try client.post("/admin/v1/users/\(externalId)/device-key-tickets", .object([]), authorization: admin)
        #expect(issued.status == 201, "\(issued)")
        let ticket = try #require(issued.json?["ticket"]?.stringValue)
        #expect(issued.json?["userId"]?.stringValue == session.userId && issued.json?["expiresAt"]?.stringValue != nil)

        // A device-key ticket does not open passkey registration, and a used passkey ticket opens nothing.
        #expect(try client.post("/v1/passkeys/registration/options", .object([]), authorization: "Ticket \(ticket)").code == "unauthorized")
        let phone = StepUpTests.Phone(platform: "android")
        #expect(try post(a, try enrolmentBody(a, phone), [("Latchkey-Ticket", passkeyTicket)]).code == "step_up_required")

        // Another user cannot use it.
        let b = try h.account(server)
        #expect(try post(b, try enrolmentBody(b, phone), [("Latchkey-Ticket", ticket)]).code == "step_up_required")
        // Its user can, once.
        let enrolled = try post(a, try enrolmentBody(a, phone), [("Latchkey-Ticket", ticket)])
        #expect(enrolled.status == 201, "\(enrolled)")
        #expect(enrolled.json?["attested"]?.boolValue == false)
        #expect(enrolled.json?["attestation"]?["format"]?.stringValue == "none")
        #expect(try post(a, try enrolmentBody(a, phone), [("Latchkey-Ticket", ticket)]).code == "step_up_required")
    }

    @Test("step-up tokens: lifetime is LATCHKEY_STEP_UP_TOKEN_TTL with no leeway; acr/amr say how they were made")
    func tokenClaims() throws {
        let server = try TestServer(name: "trust-ttl") { $0.stepUpTokenTTL = 45 }
        let a = try h.account(server)
        let token = try stepUpToken(a, action: StepUpTests.transfer)
        let claims = try StepUpTests.claims(token)
        let iat = try #require(claims["iat"]?.intValue), exp = try #require(claims["exp"]?.intValue)
        #expect(exp - iat == 45)
        #expect(claims["acr"]?.stringValue == "urn:latchkey:acr:passkey-uv" && claims["amr"]?.arrayValue == ["pop", "user", "mfa"])
    }

    @Test("a step-up token dies with its session and with the key that approved it (logout, device key or passkey revoked)")
    func stepUpDiesWithItsSessionAndKey() throws {
        let server = try Self.fixture.get()
        let a = try h.account(server)
        let phone = StepUpTests.Phone(platform: "android")
        let keyId = try h.enrolled(a, phone)

        // A payment approval stolen from the phone (or its traffic); the owner logs that session out.
        let second = StepUpTests.Account(client: a.client, session: try a.client.signIn(a.authenticator), authenticator: a.authenticator)
        let stolen = try #require(try h.approve(second, phone, keyId: keyId)["access_token"]?.stringValue)
        #expect(try a.client.send("POST", "/v1/logout", authorization: second.bearer).status == 204)
        let afterLogout = try h.consume(a, token: stolen, action: StepUpTests.transfer)
        #expect(afterLogout.status == 401 && afterLogout.code == "unauthorized", "\(afterLogout)")

        // The phone is reported lost: its key is revoked, and the approval it just made goes with it.
        let fromPhone = try #require(try h.approve(a, phone, keyId: keyId)["access_token"]?.stringValue)
        #expect(try a.client.send("DELETE", "/v1/device-keys/\(keyId)", authorization: a.bearer).status == 204)
        #expect(try h.consume(a, token: fromPhone, action: StepUpTests.transfer).code == "unauthorized")

        // A second passkey approves an enrolment; revoking that passkey ends the approval too.
        let other = SoftAuthenticator()
        let (_, added) = try a.client.register(other, authorization: a.bearer, approver: a.authenticator)
        #expect(added.status == 201, "\(added)")
        let withOther = StepUpTests.Account(client: a.client, session: a.session, authenticator: other)
        let newPhone = StepUpTests.Phone(platform: "ios")
        let approval = try stepUpToken(withOther, action: .object([("type", "latchkey.device-key.enrol"), ("deviceId", .string(newPhone.deviceId))]))
        let credentialId = try #require(added.json?["passkey"]?["id"]?.stringValue)
        #expect(credentialId == Base64URL.encode(other.credentialId))
        #expect(try a.client.revokePasskey(other.credentialId, authorization: a.bearer, approver: a.authenticator).status == 200)
        let refused = try post(a, try enrolmentBody(a, newPhone), [("Latchkey-Step-Up", approval)])
        #expect(refused.status == 403 && refused.code == "step_up_required", "\(refused)")

        // A live one still works.
        let newKey = try h.enrolled(a, newPhone)
        let live = try #require(try h.approve(a, newPhone, keyId: newKey)["access_token"]?.stringValue)
        #expect(try h.consume(a, token: live, action: StepUpTests.transfer).status == 200)
    }

    @Test("JWT tricks over HTTP: typ swapped either way, alg none, a re-headed token, another kid → refused")
    func jwtTricks() throws {
        let server = try Self.fixture.get()
        let a = try h.account(server)
        let phone = StepUpTests.Phone(platform: "android")
        let keyId = try h.enrolled(a, phone)
        let stepUp = try #require(try h.approve(a, phone, keyId: keyId)["access_token"]?.stringValue)
        let access = a.session.accessToken
        // A step-up token is no access token, and an access token no step-up token.
        #expect(try a.client.get("/v1/passkeys", authorization: "Bearer \(stepUp)").code == "unauthorized")
        #expect(try h.consume(a, token: access, action: StepUpTests.transfer).code == "unauthorized")
        // Re-headed copies of a real access token: alg none without signature, typ step-up+jwt with the
        // original signature, an unknown kid.
        let parts = access.split(separator: ".").map(String.init)
        let header = try JSONParser.parse(try #require(Base64URL.decode(parts[0])))
        func reheaded(_ h: JSONValue, signature: String) -> String { Base64URL.encode(h.serialized()) + "." + parts[1] + "." + signature }
        let forged = [
            reheaded(header.setting("alg", "none"), signature: ""),
            reheaded(header.setting("alg", "HS256"), signature: parts[2]),
            reheaded(header.setting("typ", "step-up+jwt"), signature: parts[2]),
            reheaded(header.setting("kid", "../../jwks"), signature: parts[2]),
        ]
        for token in forged {
            #expect(try a.client.get("/v1/passkeys", authorization: "Bearer \(token)").code == "unauthorized", "\(token)")
            #expect(try h.consume(a, token: token, action: StepUpTests.transfer).code == "unauthorized", "\(token)")
        }
        // The real ones still work.
        #expect(try a.client.get("/v1/passkeys", authorization: a.bearer).status == 200)
        #expect(try h.consume(a, token: stepUp, action: StepUpTests.transfer).status == 200)
    }

    /// A passkey step-up token for `action`.
    func stepUpToken(_ a: StepUpTests.Account, action: JSONValue) throws -> String {
        try a.client.stepUpToken(a.authenticator, authorization: a.bearer, action: action)
    }
}
