import Crypto
import DeviceKeys
import Foundation
import JSON
import Testing
import WebAuthn
import WebAuthnTesting

@Suite struct StepUpCeremonyTests {
    static let action: JSONValue = ["type": "transfer", "amount": "200.00", "currency": "EUR", "to": "DE89370400440532013000"]
    static let ceremony = StepUpCeremony(ttlSeconds: 120, environment: DeviceKeyFixture.environment)

    static func begin(method: StepUpChallenge.Method = .deviceKey, keyBinding: [UInt8] = Array("binding".utf8),
                      keyId: String? = "key-1") -> (options: StepUpOptions, state: StepUpState) {
        ceremony.begin(method: method, userId: "user-1", keyBinding: keyBinding, keyId: keyId, action: try! StepUpAction(action))
    }

    @Test("Options are the JSON StepUpService renders, member for member, in order")
    func optionsJSON() throws {
        let (options, _) = Self.begin()
        #expect(options.json().text == #"""
            {"challengeId":"8QwtOgKhL-LkkjnjC8kkUlIz7vF6bfVdz5HgEQUY1Q0",\#
            "challenge":"TEtTVEVQVVABAQABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4fxsKJ5J6cBbIUWGA4e3O8sY30P7CaHkpKlxPHbIi7VBuA9wr-7zyqV2Rv0gr7lb6cPywD044JGQbeMYOIE9zCLrmjyLyVX7BnJ-Zdfv2Hd5X36JYqOmULz0eg7qWvmyn-",\#
            "expiresAt":"2027-01-15T08:02:00Z","actionHash":"uaPIvJVfsGcn5l1-_Yd3lffolio6ZQvPR6Dupa-bKf4"}
            """#)
        #expect(options.challenge.count == StepUpChallenge.length && options.challengeId == Digest.sha256(options.challenge))
        let action = try StepUpAction(Self.action)
        #expect(options.expiresAt == 1_800_000_120 && options.actionHash == action.hash)
        #expect(options.json(publicKey: ["rpId": "example.com"]).objectValue?.last?.key == "publicKey")
    }

    @Test("The state keeps the challenge and everything it binds, with one encoding")
    func stateRoundTrip() throws {
        let (options, state) = Self.begin()
        #expect(state.method == .deviceKey && state.challenge == options.challenge && state.userId == "user-1")
        #expect(state.action == #"{"amount":"200.00","currency":"EUR","to":"DE89370400440532013000","type":"transfer"}"#)
        #expect(state.actionHash == options.actionHash && state.keyBinding == Array("binding".utf8) && state.keyId == "key-1")
        #expect(String(decoding: state.encoded(), as: UTF8.self) == #"""
            {"action":"{\"amount\":\"200.00\",\"currency\":\"EUR\",\"to\":\"DE89370400440532013000\",\"type\":\"transfer\"}",\#
            "actionHash":"uaPIvJVfsGcn5l1-_Yd3lffolio6ZQvPR6Dupa-bKf4","ceremony":"step-up",\#
            "challenge":"TEtTVEVQVVABAQABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4fxsKJ5J6cBbIUWGA4e3O8sY30P7CaHkpKlxPHbIi7VBuA9wr-7zyqV2Rv0gr7lb6cPywD044JGQbeMYOIE9zCLrmjyLyVX7BnJ-Zdfv2Hd5X36JYqOmULz0eg7qWvmyn-",\#
            "keyBinding":"YmluZGluZw","keyId":"key-1","method":"device-key","userId":"user-1","v":1}
            """#)
        #expect(try StepUpState(decoding: state.encoded()) == state)
        let passkey = Self.begin(method: .passkey, keyId: nil).state
        #expect(try StepUpState(decoding: passkey.encoded()) == passkey)
        // With a display: sealed in the state as the receipt will carry it, and bound by a version 2 challenge.
        let display = try StepUpDisplay(app: ["lang": "pl", "lines": ["Przelew 200,00 EUR"]])
        let shown = Self.ceremony.begin(method: .deviceKey, userId: "user-1", keyBinding: Array("binding".utf8), keyId: "key-1",
                                        display: display, action: try StepUpAction(StepUpChallengeTests.action)).state
        #expect(shown.display == display && shown.challenge.count == 170 && shown.challenge[8] == 2)
        #expect(String(decoding: shown.encoded(), as: UTF8.self).contains(#""display":{"lang":"pl","lines":["Przelew 200,00 EUR"],"source":"app"}"#))
        #expect(try StepUpState(decoding: shown.encoded()) == shown)
        // A break-glass vote: the state says so (only when true), for the receipt written at verify.
        let glass = Self.ceremony.begin(method: .passkey, userId: "user-1", keyBinding: Array("binding".utf8), keyId: nil,
                                        breakGlass: true, action: try StepUpAction(StepUpChallengeTests.action)).state
        #expect(glass.breakGlass && !state.breakGlass && !String(decoding: state.encoded(), as: UTF8.self).contains("breakGlass"))
        #expect(String(decoding: glass.encoded(), as: UTF8.self).contains(#""actionHash":"uaPIvJVfsGcn5l1-_Yd3lffolio6ZQvPR6Dupa-bKf4","breakGlass":true,"#))
        #expect(try StepUpState(decoding: glass.encoded()) == glass)
    }

    static let corruptions: [(String, [UInt8])] = {
        let state = begin().state
        let good = state.encoded()
        let text = String(decoding: good, as: UTF8.self)
        let other = DeviceKeyEnrolmentCeremony(ttlSeconds: 60, environment: DeviceKeyFixture.environment).begin(userId: "user-1").state
        func changed(method: StepUpChallenge.Method? = nil, userId: String? = nil, action: String? = nil,
                     actionHash: [UInt8]? = nil, keyBinding: [UInt8]? = nil) -> [UInt8] {
            StepUpState(method: method ?? state.method, challenge: state.challenge, userId: userId ?? state.userId,
                        action: action ?? state.action, actionHash: actionHash ?? state.actionHash,
                        keyBinding: keyBinding ?? state.keyBinding, keyId: state.keyId).encoded()
        }
        return DeviceKeyFixture.corruptions(of: good, otherCeremony: other.encoded()) + [
            ("an unknown method", Array(text.replacing("\"device-key\"", with: "\"sms\"").utf8)),
            // Each of these no longer matches what the challenge bytes bind.
            ("another method", changed(method: .passkey)),
            ("another user", changed(userId: "user-2")),
            ("another action", changed(action: #"{"type":"other"}"#)),
            ("another action hash", changed(actionHash: [UInt8](repeating: 0, count: 32))),
            ("another key binding", changed(keyBinding: [1, 2, 3])),
            // Readable but for its size: a step-up state (which may carry a display) stays within 64 KiB.
            ("over 64 KiB", begin(keyBinding: [UInt8](repeating: 7, count: 49_500)).state.encoded()),
            ("breakGlass false written out", Array(text.replacingOccurrences(of: #""ceremony":"#, with: #""breakGlass":false,"ceremony":"#).utf8)),
            ("another display", StepUpState(method: state.method, challenge: state.challenge, userId: state.userId, action: state.action,
                                            actionHash: state.actionHash, keyBinding: state.keyBinding, keyId: state.keyId,
                                            display: StepUpDisplay(latchkey: "en", lines: ["x"])).encoded()),
        ]
    }()

    @Test("An unreadable state is challenge_invalid", arguments: corruptions)
    func unreadableState(_ label: String, _ bytes: [UInt8]) {
        #expect(throws: DeviceKeyError(.challengeInvalid, ""), "\(label)") { try StepUpState(decoding: bytes) }
    }

    @Test("checkClaim: the bound action (in any member order) or none passes; another action is action_mismatch")
    func checkClaim() throws {
        let state = Self.begin().state
        try Self.ceremony.checkClaim(nil, state: state)
        try Self.ceremony.checkClaim(try StepUpAction(["to": "DE89370400440532013000", "currency": "EUR", "amount": "200.00",
                                                       "type": "transfer"]), state: state)
        let other = try StepUpAction(["type": "transfer", "amount": "2000.00", "currency": "EUR", "to": "DE89370400440532013000"])
        #expect(throws: DeviceKeyError(.actionMismatch, "")) { try Self.ceremony.checkClaim(other, state: state) }
    }

    @Test("Device key: a signature with the bound P-256 key verifies; a wrong one is signature_invalid")
    func deviceKeyFinish() throws {
        let pk = PrivateKey.generateEC(.p256)
        let key = try DevicePublicKey(bytes: try #require(pk.publicKey.x963Point))
        let ceremony = StepUpCeremony(ttlSeconds: 120)
        let (options, state) = ceremony.begin(method: .deviceKey, userId: "user-1", keyBinding: key.spkiDER, keyId: "key-1",
                                              action: try StepUpAction(Self.action))
        let stored = try StepUpState(decoding: state.encoded())
        let signature = try DERSignature(bytes: try pk.sign(options.challenge, algorithm: .ecdsa(.sha256)))
        try ceremony.finish(signature: signature, key: key, state: stored)

        let wrong = try DERSignature(bytes: try PrivateKey.generateEC(.p256).sign(options.challenge, algorithm: .ecdsa(.sha256)))
        #expect(throws: DeviceKeyError(.signatureInvalid, "")) { try ceremony.finish(signature: wrong, key: key, state: stored) }
        var message = options.challenge
        message[message.count - 1] ^= 1
        let overOther = try DERSignature(bytes: try pk.sign(message, algorithm: .ecdsa(.sha256)))
        #expect(throws: DeviceKeyError(.signatureInvalid, "")) { try ceremony.finish(signature: overOther, key: key, state: stored) }
    }

    @Test("Device key: a key other than the bound one, or a passkey challenge, is challenge_invalid")
    func deviceKeyWrongState() throws {
        let pk = PrivateKey.generateEC(.p256)
        let key = try DevicePublicKey(bytes: pk.publicKey.spkiDER)
        let other = PrivateKey.generateEC(.p256)
        let (options, state) = Self.ceremony.begin(method: .deviceKey, userId: "user-1", keyBinding: other.publicKey.spkiDER,
                                                   keyId: "key-2", action: try StepUpAction(Self.action))
        let signature = try DERSignature(bytes: try pk.sign(options.challenge, algorithm: .ecdsa(.sha256)))
        #expect(throws: DeviceKeyError(.challengeInvalid, "")) { try Self.ceremony.finish(signature: signature, key: key, state: state) }
        let passkey = Self.begin(method: .passkey, keyBinding: key.spkiDER, keyId: nil)
        let signed = try DERSignature(bytes: try pk.sign(passkey.options.challenge, algorithm: .ecdsa(.sha256)))
        #expect(throws: DeviceKeyError(.challengeInvalid, "")) {
            try Self.ceremony.finish(signature: signed, key: key, state: passkey.state)
        }
    }

    /// The passkey method as the server composes it: WebAuthn's AuthenticationCeremony over the
    /// step-up challenge bytes, UV required, only the bound passkeys.
    @Test("Passkey: an assertion over the step-up challenge verifies through AuthenticationCeremony")
    func passkeyMethod() throws {
        let authenticator = SoftAuthenticator()
        let binding = Array(#"{"credentialIds":["x"],"method":"passkey","rpId":"example.com"}"#.utf8)
        let (options, state) = Self.begin(method: .passkey, keyBinding: binding, keyId: nil)
        let webauthn = AuthenticationCeremony(rpId: "example.com", userVerification: .required, timeoutSeconds: 120)
        let (request, assertionState) = webauthn.begin(allowCredentials: [CredentialDescriptor(id: authenticator.credentialId)],
                                                       account: state.userId, challenge: state.challenge, restrictToAllowed: true)
        #expect(request.challenge == options.challenge)
        let json = options.json(publicKey: request.json)
        #expect(json["publicKey"]?["userVerification"] == "required" && json["publicKey"]?["timeout"] == 120000)

        let policy = VerificationPolicy(rpId: "example.com", origins: OriginPolicy(["https://example.com"]))
        let credential = StoredCredential(publicKey: try COSEKey(bytes: authenticator.publicKeyCOSE), signCount: 0)
        func answer(userVerified: Bool) throws -> VerifiedAuthentication {
            var b = authenticator.assertion(challenge: request.challenge, rpId: "example.com", origin: "https://example.com")
            b.userVerified = userVerified
            let checked = try webauthn.check(try ParsedAuthentication(bytes: b.bytes()), state: assertionState, policy: policy)
            return try webauthn.finish(checked, state: assertionState, credential: credential, userHandle: [7])
        }
        #expect(try answer(userVerified: true).userVerified)
        #expect(throws: WebAuthnError(.userVerificationRequired, "")) { try answer(userVerified: false) }
    }
}
