import Crypto
import Foundation
import JSON
import LatchkeyServer
import Testing
import WebAuthn
import WebAuthnTesting

/// SPEC "Signal API" and `LATCHKEY_HINTS`, over HTTP.
@Suite("Signal API and hints")
struct SignalTests {
    static let fixture = Result { try TestServer(name: "signals") }
    static let hinted = Result { try TestServer(name: "hints") { $0.hints = ["security-key", "hybrid"] } }

    @Test("a clean miss (unknown or revoked credential, everything else fine) carries signalUnknownCredential")
    func cleanMiss() throws {
        let server = try Self.fixture.get()
        let client = server.client()
        let stranger = SoftAuthenticator()
        let (_, unknown) = try client.login(stranger)
        #expect(unknown.code == "credential_unknown" && unknown.isProblem)
        #expect(unknown.json?["signal"] == .object([
            ("method", "signalUnknownCredential"),
            ("options", .object([("rpId", .string(server.rpId)), ("credentialId", .string(Base64URL.encode(stranger.credentialId)))])),
        ]))

        let revokedKey = SoftAuthenticator(), keeper = SoftAuthenticator()
        let account = try client.signUp(keeper, username: server.username("signal"))
        _ = try client.register(revokedKey, authorization: account.bearer, approver: keeper)
        #expect(try client.revokePasskey(revokedKey.credentialId, authorization: account.bearer, approver: keeper).status == 200)
        let (_, revoked) = try client.login(revokedKey)
        #expect(revoked.code == "credential_unknown")
        #expect(revoked.json?["signal"]?["options"]?["credentialId"]?.stringValue == Base64URL.encode(revokedKey.credentialId))
    }

    @Test("no signal for any other failure, nor for another user's credential in a username-first ceremony")
    func noSignalOtherwise() throws {
        let server = try Self.fixture.get()
        let client = server.client()
        let alice = SoftAuthenticator(), bob = SoftAuthenticator()
        let aliceName = server.username("alice")
        _ = try client.signUp(alice, username: aliceName)
        _ = try client.signUp(bob, username: server.username("bob"))
        // Bob's (existing) credential against options for Alice.
        let (_, foreign) = try client.login(bob, username: aliceName)
        #expect(foreign.code == "credential_unknown")
        #expect(foreign.json?["signal"] == nil)
        // Unknown credential but a wrong origin: origin_not_allowed comes first, no signal.
        let (_, origin) = try client.login(SoftAuthenticator()) { $0.clientData.origin = "https://evil.example" }
        #expect(origin.code == "origin_not_allowed" && origin.json?["signal"] == nil)
        // A bad signature on a known credential.
        let (_, signature) = try client.login(alice) { $0.corruptSignature = true }
        #expect(signature.code == "signature_invalid" && signature.json?["signal"] == nil)
    }

    @Test("registration, login, list, rename and delete carry the account's accepted credentials and current names")
    func acceptedCredentials() throws {
        let server = try Self.fixture.get()
        let client = server.client()
        let first = SoftAuthenticator(), second = SoftAuthenticator()
        let username = server.username("accepted")
        let (options, registered) = try client.register(first, username: username)
        #expect(registered.status == 201)
        let handle = try #require(options["user"]?["id"]?.stringValue)
        func expectSignals(_ json: JSONValue?, _ ids: [[UInt8]], _ where_: String) {
            #expect(json?["signals"] == .array([
                .object([("method", "signalAllAcceptedCredentials"),
                         ("options", .object([("rpId", .string(server.rpId)), ("userId", .string(handle)),
                                              ("allAcceptedCredentialIds", .array(ids.map { .string(Base64URL.encode($0)) }))]))]),
                .object([("method", "signalCurrentUserDetails"),
                         ("options", .object([("rpId", .string(server.rpId)), ("userId", .string(handle)), ("name", .string(username)),
                                              ("displayName", .string("Name of \(username)"))]))]),
            ]), "\(where_): \(json?["signals"]?.text ?? "none")")
        }
        expectSignals(registered.json, [first.credentialId], "registration")
        let session = Session(reply: try #require(registered.json))
        let (_, added) = try client.register(second, authorization: session.bearer, approver: first)
        expectSignals(added.json, [first.credentialId, second.credentialId], "second registration")
        let (_, login) = try client.login(second)
        expectSignals(login.json, [first.credentialId, second.credentialId], "login")
        expectSignals(try client.get("/v1/passkeys", authorization: session.bearer).json, [first.credentialId, second.credentialId], "list")
        let renamed = try client.send("PATCH", "/v1/passkeys/\(Base64URL.encode(second.credentialId))",
                                      body: JSONValue.object([("name", "Key")]).serialized(), authorization: session.bearer)
        #expect(renamed.json?["name"] == "Key")
        expectSignals(renamed.json, [first.credentialId, second.credentialId], "rename")
        let deleted = try client.revokePasskey(second.credentialId, authorization: session.bearer, approver: first)
        #expect(deleted.status == 200)
        expectSignals(deleted.json, [first.credentialId], "delete")
    }

    @Test("LATCHKEY_HINTS is copied into every options body, passkey step-up included; unset, hints is []")
    func hints() throws {
        let hinted = try Self.hinted.get()
        let client = hinted.client()
        let expected: JSONValue = ["security-key", "hybrid"]
        #expect(try client.registrationOptions(username: hinted.username()).json?["hints"] == expected)
        #expect(try client.authenticationOptions().json?["hints"] == expected)
        let authenticator = SoftAuthenticator()
        let session = try client.signUp(authenticator, username: hinted.username())
        let stepUp = try client.post("/v1/step-up/challenges", .object([("method", "passkey"), ("action", .object([("type", "x")]))]),
                                     authorization: session.bearer)
        #expect(stepUp.json?["publicKey"]?["hints"] == expected)
        #expect(try Self.fixture.get().client().authenticationOptions().json?["hints"] == .array([]))
        #expect(throws: Configuration.Invalid.self) { try Configuration.fromEnvironment(["LATCHKEY_HINTS": "security-key,usb"]) }
        #expect(try Configuration.fromEnvironment(["LATCHKEY_HINTS": "client-device, hybrid"]).hints == ["client-device", "hybrid"])
    }
}
