#if canImport(WebAuthnTesting)
import Foundation
import LatchkeyClient
import Testing

/// The client against a real `latchkey serve` on PostgreSQL, through URLSession: what an iOS app
/// does, with the platform authenticator and the Secure Enclave replaced by the server package's
/// software keys (which hand over exactly the raw fields the AuthenticationServices results carry).
@Suite("LatchkeyClient against a live server", .serialized)
struct LiveServerTests {
    @Test("sign-up, sign-in, passkey step-up, device-key enrolment and step-up, refresh, logout")
    func wholeFlow() async throws {
        try await withLiveServer("client-flow") { server in
            let latchkey = Latchkey(baseURL: server.baseURL)
            let passkey = SoftPasskey()
            let username = "ada-\(UInt32.random(in: 0...UInt32.max))"

            // Sign-up.
            let creation = try await latchkey.registrationOptions(username: username, displayName: "Ada Lovelace")
            #expect(creation.rpId == server.rpId)
            #expect(creation.userName == username)
            #expect(creation.userDisplayName == "Ada Lovelace")
            #expect(creation.challenge.count >= 32)
            #expect(creation.excludeCredentialIDs.isEmpty)
            let signUp = try await latchkey.verifyRegistration(passkey.register(creation, origin: server.origin))
            #expect(signUp.user.username == username)
            #expect(signUp.passkey?.id == Base64URL.encode(passkey.credentialID))
            #expect(signUp.tokens.refreshToken != nil)
            await #expect(throws: LatchkeyError.Code.conflict.asError) {
                _ = try await latchkey.registrationOptions(username: username, displayName: "Someone else")
            }

            // Sign-in: discoverable (the account picker / AutoFill), then username-first.
            let discoverable = try await latchkey.authenticationOptions()
            #expect(discoverable.allowCredentialIDs.isEmpty)
            #expect(discoverable.rpId == server.rpId)
            let assertion = passkey.assert(discoverable, origin: server.origin)
            let signIn = try await latchkey.verifyAuthentication(assertion)
            #expect(signIn.user.id == signUp.user.id)
            // The same assertion again: its challenge is used up.
            await #expect(throws: LatchkeyError.Code.challengeInvalid.asError) { _ = try await latchkey.verifyAuthentication(assertion) }
            let named = try await latchkey.authenticationOptions(username: username)
            #expect(named.allowCredentialIDs == [passkey.credentialID])
            let session = try await latchkey.verifyAuthentication(passkey.assert(named, origin: server.origin))
            let access = session.tokens.accessToken

            let listed = try await latchkey.passkeys(accessToken: access)
            #expect(listed.map(\.id) == [Base64URL.encode(passkey.credentialID)])

            // Passkey step-up for an app's own action; the server binds the hash the client computed.
            let payment = try StepUpAction(jsonText: #"{"type":"payment","amount":"200.00","currency":"EUR","to":"DE89 3704 0044 0532 0130 00"}"#)
            let approved = try await latchkey.stepUpWithPasskey(action: payment, accessToken: access, assert: passkey.provider(origin: server.origin))
            #expect(approved.actionHash == payment.hashBase64URL)
            #expect(approved.expiresIn > 0 && approved.expiresIn <= 120)
            let consumed = try await latchkey.consumeStepUp(token: approved.token, action: payment)
            #expect(consumed["actionHash"]?.stringValue == payment.hashBase64URL)
            await #expect(throws: LatchkeyError.Code.conflict.asError) { _ = try await latchkey.consumeStepUp(token: approved.token, action: payment) }

            // Device-key enrolment is gated: without the step-up, or with one for another device, it is refused.
            let deviceKey = SoftDeviceKey()
            let deviceId = "iphone-\(UInt32.random(in: 0...UInt32.max))"
            let other = try await latchkey.stepUpWithPasskey(action: try .deviceKeyEnrolment(deviceId: "another-device"), accessToken: access,
                                                             assert: passkey.provider(origin: server.origin))
            await #expect(throws: LatchkeyError.Code.stepUpRequired.asError) {
                _ = try await latchkey.enrolDeviceKey(deviceId: deviceId, signer: deviceKey, accessToken: access, approval: .stepUp(other.token))
            }
            let enrolled = try await latchkey.enrolDeviceKeyWithPasskey(deviceId: deviceId, name: "Ada's iPhone", signer: deviceKey,
                                                                        accessToken: access, assert: passkey.provider(origin: server.origin))
            #expect(enrolled.deviceId == deviceId)
            #expect(enrolled.platform == "ios")
            #expect(enrolled.name == "Ada's iPhone")
            #expect(enrolled.attested == false)
            #expect(try await latchkey.deviceKeys(accessToken: access).map(\.id) == [enrolled.id])

            // Device-key step-up (what the Secure Enclave key does), consumed once for its action only.
            let transfer = try StepUpAction(jsonText: #"{"type":"transfer","amount":"1e2","count":1e2,"note":"caf\u00e9 ☕ 😀","z":-0,"a":[1.0,2.50]}"#)
            let token = try await latchkey.stepUp(action: transfer, keyId: enrolled.id, signer: deviceKey, accessToken: access)
            #expect(token.actionHash == transfer.hashBase64URL)
            await #expect(throws: LatchkeyError.Code.actionMismatch.asError) { _ = try await latchkey.consumeStepUp(token: token.token, action: payment) }
            _ = try await latchkey.consumeStepUp(token: token.token, action: transfer)

            // A signature by another key is refused with the server's code.
            let challenge = try await latchkey.stepUpChallenge(action: transfer, keyId: enrolled.id, accessToken: access)
            await #expect(throws: LatchkeyError.Code.signatureInvalid.asError) {
                _ = try await latchkey.verifyStepUp(challenge, approval: .signature(SoftDeviceKey().sign(challenge.challenge)), action: transfer,
                                                    accessToken: access)
            }
            // The action the client says it approved must be the bound one.
            let bound = try await latchkey.stepUpChallenge(action: transfer, keyId: enrolled.id, accessToken: access)
            await #expect(throws: LatchkeyError.self) {
                _ = try await latchkey.verifyStepUp(bound, approval: .signature(deviceKey.sign(bound.challenge)), action: payment, accessToken: access)
            }

            // Revoked: its challenges are refused.
            try await latchkey.revokeDeviceKey(id: enrolled.id, accessToken: access)
            #expect(try await latchkey.deviceKeys(accessToken: access).isEmpty)
            do {
                _ = try await latchkey.stepUp(action: transfer, keyId: enrolled.id, signer: deviceKey, accessToken: access)
                Issue.record("a revoked key made a step-up")
            } catch let error as LatchkeyError {
                #expect([LatchkeyError.Code.keyRevoked, .notFound].contains(error.code), "\(error)")
                #expect(error.status == 400 || error.status == 404)
            }

            // Refresh rotates; the old refresh token is dead; logout ends the session.
            let refreshed = try await latchkey.refresh(refreshToken: try #require(session.tokens.refreshToken))
            await #expect(throws: LatchkeyError.Code.invalidGrant.asError) { _ = try await latchkey.refresh(refreshToken: session.tokens.refreshToken!) }
            await #expect(throws: LatchkeyError.Code.unauthorized.asError) { _ = try await latchkey.passkeys(accessToken: access) }
            let again = try await latchkey.verifyAuthentication(passkey.assert(try await latchkey.authenticationOptions(), origin: server.origin))
            try await latchkey.logout(accessToken: again.tokens.accessToken)
            await #expect(throws: LatchkeyError.Code.unauthorized.asError) { _ = try await latchkey.passkeys(accessToken: again.tokens.accessToken) }
            _ = refreshed
        }
    }

    /// Adding a second passkey from a passkey session needs a step-up for `latchkey.passkey.add`;
    /// revoking one needs one for that credential (docs/assurance.md).
    @Test("a second passkey and a revocation, each with its step-up")
    func addAndRevoke() async throws {
        try await withLiveServer("client-add") { server in
            let latchkey = Latchkey(baseURL: server.baseURL)
            let first = SoftPasskey(), second = SoftPasskey()
            let signUp = try await latchkey.verifyRegistration(
                first.register(try await latchkey.registrationOptions(username: "grace-\(UInt32.random(in: 0...UInt32.max))", displayName: "Grace"),
                               origin: server.origin))
            let access = signUp.tokens.accessToken
            await #expect(throws: LatchkeyError.Code.stepUpRequired.asError) { _ = try await latchkey.registrationOptions(.bearer(access)) }
            let addition = try await latchkey.stepUpWithPasskey(action: .passkeyAddition, accessToken: access, assert: first.provider(origin: server.origin))
            let options = try await latchkey.registrationOptions(.bearer(access), stepUpToken: addition.token)
            #expect(options.excludeCredentialIDs == [first.credentialID])
            let added = try await latchkey.verifyRegistration(second.register(options, origin: server.origin))
            #expect(added.user.id == signUp.user.id)

            let firstId = Base64URL.encode(first.credentialID)
            let revocation = try await latchkey.stepUpWithPasskey(action: try .passkeyRevocation(credentialId: firstId), accessToken: access,
                                                                  assert: second.provider(origin: server.origin))
            try await latchkey.revokePasskey(id: firstId, accessToken: access, stepUpToken: revocation.token)
            let options2 = try await latchkey.authenticationOptions()
            await #expect(throws: LatchkeyError.Code.credentialUnknown.asError) {
                _ = try await latchkey.verifyAuthentication(first.assert(options2, origin: server.origin))
            }
        }
    }

    /// An app backend that signed the user in its own way vouches with tickets from the admin API:
    /// an enrolment ticket for the first passkey, a device-key ticket for the device key.
    @Test("tickets from an app backend: first passkey, device key; rename a passkey")
    func tickets() async throws {
        try await withLiveServer("client-tickets") { server in
            let latchkey = Latchkey(baseURL: server.baseURL)
            let admin = Latchkey.Authorization.bearer(server.adminKey)
            let externalId = "crm-\(UInt32.random(in: 0...UInt32.max))"
            let enrolment = try await latchkey.call("POST", "/admin/v1/users/\(externalId)/enrolment-tickets",
                                                    body: ["username": .string(externalId), "displayName": "From the CRM"], authorization: admin)
            let ticket = try #require(enrolment["ticket"]?.stringValue)
            let passkey = SoftPasskey()
            let options = try await latchkey.registrationOptions(.ticket(ticket))
            #expect(options.userName == externalId)
            let signIn = try await latchkey.verifyRegistration(passkey.register(options, origin: server.origin))
            #expect(signIn.user.id == enrolment["userId"]?.stringValue)
            // Single use.
            await #expect(throws: LatchkeyError.Code.unauthorized.asError) { _ = try await latchkey.registrationOptions(.ticket(ticket)) }

            try await latchkey.renamePasskey(id: Base64URL.encode(passkey.credentialID), name: "Work phone", accessToken: signIn.tokens.accessToken)
            #expect(try await latchkey.passkeys(accessToken: signIn.tokens.accessToken).map(\.name) == ["Work phone"])

            let deviceTicket = try await latchkey.call("POST", "/admin/v1/users/\(externalId)/device-key-tickets", authorization: admin)
            let key = SoftDeviceKey()
            let enrolled = try await latchkey.enrolDeviceKey(deviceId: "tablet", signer: key, accessToken: signIn.tokens.accessToken,
                                                             approval: .ticket(try #require(deviceTicket["ticket"]?.stringValue)))
            let action = try StepUpAction(jsonText: #"{"type":"export","what":"statements"}"#)
            let token = try await latchkey.stepUp(action: action, keyId: enrolled.id, signer: key, accessToken: signIn.tokens.accessToken)
            #expect(token.actionHash == action.hashBase64URL)
        }
    }

    /// The tricky actions posted as raw text to a running server: its `actionHash` equals the
    /// client's hash of the same text (and one the client refuses, the server refuses too).
    @Test("the server's actionHash for tricky JSON equals the client's")
    func serverActionHashes() async throws {
        try await withLiveServer("client-hash") { server in
            let latchkey = Latchkey(baseURL: server.baseURL)
            let passkey = SoftPasskey()
            let signIn = try await latchkey.verifyRegistration(
                passkey.register(try await latchkey.registrationOptions(username: "hash-\(UInt32.random(in: 0...UInt32.max))", displayName: "H"),
                                 origin: server.origin))
            for text in ActionHashParityTests.tricky {
                // The body as raw text, so the server parses the action exactly as written (not as the client re-serialises it).
                let body = #"{"method":"passkey","action":"# + text + "}"
                let response = try await URLSessionTransport().send(
                    HTTPRequest(method: "POST", path: "/v1/step-up/challenges",
                                headers: [("Content-Type", "application/json"), ("Authorization", "Bearer \(signIn.tokens.accessToken)")],
                                body: Data(body.utf8)), baseURL: server.baseURL)
                #expect(response.status == 201, "\(text): \(String(decoding: response.body, as: UTF8.self))")
                let answer = try LatchkeyJSON(parsing: response.body)
                #expect(answer["actionHash"]?.stringValue == (try StepUpAction(jsonText: text)).hashBase64URL, "\(text)")
            }
            for text in ActionHashParityTests.refused where text.utf8.count < 4000 {
                let body = #"{"method":"passkey","action":"# + text + "}"
                let response = try await URLSessionTransport().send(
                    HTTPRequest(method: "POST", path: "/v1/step-up/challenges",
                                headers: [("Content-Type", "application/json"), ("Authorization", "Bearer \(signIn.tokens.accessToken)")],
                                body: Data(body.utf8)), baseURL: server.baseURL)
                #expect(response.status == 400, "\(text)")
            }
        }
    }

    /// App Attest: enrolment with an attestation object and step-up by assertions, as
    /// `AppAttestDeviceKey` sends them, against a server that trusts the test App Attest root and
    /// declares the test app.
    @Test("App Attest enrolment and step-up")
    func appAttest() async throws {
        let key = SoftAppAttestKey()
        let roots = FileManager.default.temporaryDirectory.appendingPathComponent("lk-client-roots-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: roots, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: roots) }
        try SoftAppAttestKey.rootPEM.write(to: roots.appendingPathComponent("test-app-attest-root.pem"), atomically: true, encoding: .utf8)
        try await withLiveServer("client-appattest", environment: ["LATCHKEY_ATTESTATION_ROOTS": roots.path],
                                 prepare: [["apps", "add", "ios", "--app-id", key.appId]]) { server in
            let latchkey = Latchkey(baseURL: server.baseURL)
            let passkey = SoftPasskey()
            let signIn = try await latchkey.verifyRegistration(
                passkey.register(try await latchkey.registrationOptions(username: "attest-\(UInt32.random(in: 0...UInt32.max))", displayName: "A"),
                                 origin: server.origin))
            let access = signIn.tokens.accessToken
            let enrolled = try await latchkey.enrolDeviceKeyWithPasskey(deviceId: "ipad-1", signer: key, accessToken: access,
                                                                        assert: passkey.provider(origin: server.origin))
            #expect(enrolled.attested)
            #expect(enrolled.attestationFormat == "apple-appattest")
            let action = try StepUpAction(jsonText: #"{"type":"unlock","door":"\ud83d\udeaa front"}"#)
            let first = try await latchkey.stepUp(action: action, keyId: enrolled.id, signer: key, accessToken: access)
            #expect(first.actionHash == action.hashBase64URL)
            let second = try await latchkey.stepUp(action: action, keyId: enrolled.id, signer: key, accessToken: access)
            #expect(second.receiptId != first.receiptId)
        }
    }
}

extension LatchkeyError.Code {
    /// An error with this code, for `#expect(throws:)` (LatchkeyError compares by code).
    var asError: LatchkeyError { LatchkeyError(self, "expected") }
}
#endif
