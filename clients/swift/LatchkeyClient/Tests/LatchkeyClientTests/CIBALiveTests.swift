#if canImport(WebAuthnTesting)
import Foundation
import LatchkeyClient
import Testing

/// The app's side of CIBA (docs/oidc.md) against a real `latchkey serve`: a bank's backend (this
/// test, over HTTP with client_secret_basic) asks on the backchannel, the app lists the request,
/// approves it with its device key's step-up and the bank's poll gets the tokens with the step-up's
/// receipt; a deny makes the poll say `access_denied`; a bank that names passkeys is approved with
/// one, and refuses the device key.
@Suite("LatchkeyClient: CIBA approvals against a live server", .serialized)
struct CIBALiveTests {
    struct Bank {
        let id: String
        let secret: String
    }

    func register(_ latchkey: Latchkey, _ server: LiveServer, name: String, approver: String) async throws -> Bank {
        let body: LatchkeyJSON = ["name": .string(name), "redirectUris": ["https://bank.example/cb"],
                                  "grantTypes": ["urn:openid:params:grant-type:ciba"], "backchannelTokenDeliveryMode": "poll",
                                  "cibaApprover": .string(approver), "authorizationDetailsTypes": ["payment_initiation"]]
        let created = try await latchkey.call("POST", "/admin/v1/clients", body: body, authorization: .bearer(server.adminKey))
        return Bank(id: try #require(created["id"]?.stringValue), secret: try #require(created["clientSecret"]?.stringValue))
    }

    /// A form POST as the bank's backend sends it → (status, JSON).
    func backchannel(_ latchkey: Latchkey, _ bank: Bank, _ path: String, _ pairs: [(String, String)]) async throws -> (Int, LatchkeyJSON) {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let form = pairs.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }.joined(separator: "&")
        let basic = Data("\(bank.id):\(bank.secret)".utf8).base64EncodedString()
        let r = try await latchkey.transport.send(HTTPRequest(method: "POST", path: path, headers: [
            ("Content-Type", "application/x-www-form-urlencoded"), ("Authorization", "Basic \(basic)")], body: Data(form.utf8)),
                                                  baseURL: latchkey.baseURL)
        return (r.status, try LatchkeyJSON(parsing: r.body))
    }

    func ask(_ latchkey: Latchkey, _ bank: Bank, _ username: String, _ extra: [(String, String)] = []) async throws -> String {
        let (status, body) = try await backchannel(latchkey, bank, "/oauth2/bc-authorize", [("scope", "openid"), ("login_hint", username)] + extra)
        #expect(status == 200, "\(body)")
        return try #require(body["auth_req_id"]?.stringValue)
    }

    func poll(_ latchkey: Latchkey, _ bank: Bank, _ id: String) async throws -> (Int, LatchkeyJSON) {
        try await backchannel(latchkey, bank, "/oauth2/token", [("grant_type", "urn:openid:params:grant-type:ciba"), ("auth_req_id", id)])
    }

    func claims(_ jwt: String) throws -> LatchkeyJSON {
        let part = String(jwt.split(separator: ".")[1])
        return try LatchkeyJSON(parsing: try #require(Base64URL.decode(part)))
    }

    @Test("pendingApprovals, approve with the device key (the poll gets the tokens and the receipt), deny, a passkey bank")
    func approvals() async throws {
        try await withLiveServer("client-ciba") { server in
            let latchkey = Latchkey(baseURL: server.baseURL)
            let passkey = SoftPasskey()
            let username = "grace-\(UInt32.random(in: 0...UInt32.max))"
            let signUp = try await latchkey.verifyRegistration(
                passkey.register(try await latchkey.registrationOptions(username: username, displayName: "Grace"), origin: server.origin))
            let access = signUp.tokens.accessToken
            let deviceKey = SoftDeviceKey()
            let enrolled = try await latchkey.enrolDeviceKeyWithPasskey(deviceId: "phone-1", signer: deviceKey, accessToken: access,
                                                                        assert: passkey.provider(origin: server.origin))
            let bank = try await register(latchkey, server, name: "North Bank", approver: "device-key")
            #expect(try await latchkey.pendingApprovals(accessToken: access).isEmpty)

            let details = #"[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"42.00"},"creditorName":"Merchant A"}]"#
            let id = try await ask(latchkey, bank, username, [("binding_message", "W-7 · 42 EUR"), ("authorization_details", details)])
            let pending = try await latchkey.pendingApprovals(accessToken: access, language: "de")
            let request = try #require(pending.first)
            #expect(pending.count == 1)
            #expect(request.authReqId == id && request.clientId == bank.id && request.clientName == "North Bank")
            #expect(request.approver == .deviceKey)
            #expect(request.bindingMessage == "W-7 · 42 EUR")
            #expect(request.scopes == ["openid"])
            #expect(request.authorizationDetails.arrayValue?.first?["creditorName"]?.stringValue == "Merchant A")
            #expect(request.lines.contains("Empfänger: Merchant A"), "\(request.lines)")
            #expect(request.approveLabel == "42,00\u{A0}€ an Merchant A freigeben")

            let stepUp = try await latchkey.approve(request, keyId: enrolled.id, signer: deviceKey, accessToken: access)
            #expect(stepUp.actionHash == (try StepUpAction.cibaApproval(request)).hashBase64URL)
            #expect(try await latchkey.pendingApprovals(accessToken: access).isEmpty)
            let (status, tokens) = try await poll(latchkey, bank, id)
            #expect(status == 200, "\(tokens)")
            let accessClaims = try claims(try #require(tokens["access_token"]?.stringValue))
            #expect(accessClaims["receipt_id"]?.stringValue == stepUp.receiptId)
            #expect(accessClaims["sub"]?.stringValue == signUp.user.id)
            // Answered: approving again is 404.
            await #expect(throws: LatchkeyError.Code.notFound.asError) {
                try await latchkey.approve(request, keyId: enrolled.id, signer: deviceKey, accessToken: access)
            }

            // A deny: no step-up; the bank's first poll says access_denied.
            let denied = try await ask(latchkey, bank, username)
            let second = try #require(try await latchkey.pendingApprovals(accessToken: access).first { $0.authReqId == denied })
            #expect(second.bindingMessage == nil && second.authorizationDetails.isNull)
            try await latchkey.deny(second, accessToken: access)
            let (deniedStatus, deniedBody) = try await poll(latchkey, bank, denied)
            #expect(deniedStatus == 400 && deniedBody["error"]?.stringValue == "access_denied", "\(deniedBody)")

            // A bank that names passkeys: the device key's step-up is refused, a passkey's approves.
            let web = try await register(latchkey, server, name: "Web Bank", approver: "passkey")
            let webId = try await ask(latchkey, web, username)
            let webRequest = try #require(try await latchkey.pendingApprovals(accessToken: access).first { $0.authReqId == webId })
            #expect(webRequest.approver == .passkey)
            await #expect(throws: LatchkeyError.Code.stepUpRequired.asError) {
                try await latchkey.approve(webRequest, keyId: enrolled.id, signer: deviceKey, accessToken: access)
            }
            let byPasskey = try await latchkey.approveWithPasskey(webRequest, accessToken: access, assert: passkey.provider(origin: server.origin))
            let (webStatus, webTokens) = try await poll(latchkey, web, webId)
            #expect(webStatus == 200, "\(webTokens)")
            #expect(try claims(try #require(webTokens["access_token"]?.stringValue))["receipt_id"]?.stringValue == byPasskey.receiptId)
        }
    }
}
#endif
