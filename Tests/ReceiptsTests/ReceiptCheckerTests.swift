import CBOR
import Crypto
import DeviceKeys
import DeviceKeysTesting
import JSON
import Receipts
import Testing
import WebAuthn
import WebAuthnTesting

/// Receipts built from real signatures (a software device key, an App Attest key, a software
/// passkey), checked offline, and each field tampered with: the checker names what broke.
@Suite("Receipt documents and the offline checker")
struct ReceiptCheckerTests {
    static let rpId = "example.com"
    static let userId = "user-1"
    static let action: JSONValue = ["type": "transfer", "amount": "200.00", "currency": "EUR", "to": "DE89370400440532013000"]
    static let display = try! StepUpDisplay(app: ["lang": "en", "lines": ["Pay 200.00 EUR", "to DE89 3704 0044 0532 0130 00"]])

    /// A device-key receipt signed by a software P-256 key, with or without a display.
    static func deviceKeyReceipt(display: StepUpDisplay? = display, key: PrivateKey = .generateEC(.p256)) throws -> JSONValue {
        let spki = key.publicKey.spkiDER
        let action = try StepUpAction(Self.action)
        let challenge = StepUpChallenge(method: .deviceKey, userId: userId, keyBinding: spki, display: display, action: action)
        let signature = try key.sign(challenge.bytes, algorithm: .ecdsa(.sha256))
        return ReceiptDocument(id: "r1", issuer: "https://example.com", subject: userId, approvedAt: 1_893_456_000, action: action,
                               display: display, approverKind: .deviceKey, approverId: "key-1", approverPublicKey: spki,
                               attestation: nil, evidence: .deviceKey(challenge: challenge.bytes, signature: signature, appAttest: nil),
                               challenge: challenge, keyBinding: spki).value
    }

    /// A passkey receipt: a software authenticator's user-verified assertion over the challenge.
    static func passkeyReceipt(display: StepUpDisplay? = display) throws -> JSONValue {
        let authenticator = SoftAuthenticator()
        let credentialId = Base64URL.encode(authenticator.credentialId)
        let binding = JSONValue.object([("credentialIds", .array([.string(credentialId), "AAAA"])), ("method", "passkey"),
                                        ("rpId", .string(rpId))]).canonicalized()
        let action = try StepUpAction(Self.action)
        let challenge = StepUpChallenge(method: .passkey, userId: userId, keyBinding: binding, display: display, action: action)
        let response = authenticator.assertion(challenge: challenge.bytes, rpId: rpId, origin: "https://example.com").json()["response"]!
        func field(_ name: String) -> [UInt8] { Base64URL.decode(response[name]!.stringValue!)! }
        return ReceiptDocument(id: "r2", issuer: "https://example.com", subject: userId, approvedAt: 1_893_456_000, action: action,
                               display: display, approverKind: .passkey, approverId: credentialId,
                               approverPublicKey: authenticator.publicKeyCOSE,
                               attestation: ReceiptDocument.Attestation(format: "packed", trust: .self),
                               evidence: .passkey(clientDataJSON: field("clientDataJSON"), authenticatorData: field("authenticatorData"),
                                                  signature: field("signature"), rpId: rpId),
                               challenge: challenge, keyBinding: binding).value
    }

    static func failed(_ receipt: JSONValue) -> [String: String] {
        Dictionary(uniqueKeysWithValues: ReceiptChecker.check(receipt).filter { !$0.passed }.map { ($0.name, $0.detail) })
    }

    @Test("A device key's receipt, with and without a display, passes every check")
    func deviceKeyPasses() throws {
        for display in [Self.display, nil] {
            let receipt = try Self.deviceKeyReceipt(display: display)
            let checks = ReceiptChecker.check(receipt)
            #expect(ReceiptChecker.allPassed(checks), "\(checks)")
            #expect(checks.map(\.name) == ["shape", "action hash", "challenge", "user", "key binding", "display", "action", "signature"])
            #expect(receipt["evidence"]?["challengeVersion"]?.intValue == (display == nil ? 1 : 2))
            #expect(receipt["display"] == (display?.value ?? .null))
        }
    }

    @Test("A passkey's receipt passes: approver.id among the bound credentials, the assertion under the COSE key")
    func passkeyPasses() throws {
        let checks = ReceiptChecker.check(try Self.passkeyReceipt())
        #expect(ReceiptChecker.allPassed(checks), "\(checks)")
    }

    @Test("An App Attest key's receipt: the assertion over SHA-256(authenticatorData ‖ SHA-256(challenge))")
    func appAttestPasses() throws {
        let builder = AppAttestBuilder()
        let spki = builder.credentialKey.publicKey.spkiDER
        let action = try StepUpAction(Self.action)
        let challenge = StepUpChallenge(method: .deviceKey, userId: Self.userId, keyBinding: spki, display: Self.display, action: action)
        let clientDataHash = Digest.sha256(challenge.bytes)
        let verified = try AppAttestVerifier.verifiedAssertion(try builder.assertion(counter: 1, clientDataHash: clientDataHash),
                                                               publicKey: try DevicePublicKey(bytes: spki), clientDataHash: clientDataHash,
                                                               appId: builder.appId, previousCounter: 0)
        let receipt = ReceiptDocument(id: "r3", issuer: "https://example.com", subject: Self.userId, approvedAt: 1_893_456_000,
                                      action: action, display: Self.display, approverKind: .deviceKey, approverId: "key-3",
                                      approverPublicKey: spki,
                                      attestation: ReceiptDocument.Attestation(format: "apple-appattest", trust: .verifiedChain),
                                      evidence: .deviceKey(challenge: challenge.bytes, signature: verified.signature,
                                                           appAttest: (verified.authenticatorData, clientDataHash)),
                                      challenge: challenge, keyBinding: spki).value
        #expect(ReceiptChecker.allPassed(ReceiptChecker.check(receipt)), "\(ReceiptChecker.check(receipt))")
        var tampered = receipt
        tampered = tampered.setting("evidence", tampered["evidence"]!.setting("authenticatorData", .string(Base64URL.encode(
            Digest.sha256(Array(builder.appId.utf8)) + [0x40, 0, 0, 0, 9]))))
        #expect(Self.failed(tampered)["signature"]?.contains("App Attest") == true)
    }

    @Test("The document is RFC 8785: members sorted, approvedAt RFC 3339 whole seconds, the exact SPEC shape")
    func documentShape() throws {
        let receipt = try Self.deviceKeyReceipt()
        let bytes = receipt.canonicalized()
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.hasPrefix(#"{"action":{"amount":"200.00","currency":"EUR","to":"DE89370400440532013000","type":"transfer"},"actionHash":""#))
        #expect(receipt["approvedAt"] == "2030-01-01T00:00:00Z")
        #expect(receipt["v"]?.intValue == 1)
        #expect(receipt["display"]?["source"] == "app")
        #expect(receipt["approver"]?["attestation"] == .null)
        #expect(Set(receipt["evidence"]!.objectValue!.map(\.key)) == ["challenge", "signature", "challengeVersion", "nonce", "keyBinding"])
        #expect(Set(receipt.objectValue!.map(\.key)) == ["v", "id", "iss", "sub", "approvedAt", "action", "actionHash", "display", "approver",
                                                         "evidence"])
        #expect(ReceiptDocument.commitment(of: bytes) == Digest.sha256(bytes) && ReceiptChecker.commitment(receipt) == Digest.sha256(bytes))
        let passkey = try Self.passkeyReceipt()
        #expect(Set(passkey["evidence"]!.objectValue!.map(\.key)) == ["clientDataJSON", "authenticatorData", "signature", "rpId",
                                                                      "challengeVersion", "nonce", "keyBinding"])
        #expect(passkey["approver"]?["attestation"] == ["format": "packed", "trust": "self"])
    }

    @Test("A receipt tampered in any field is refused, with the check that failed and why")
    func tampering() throws {
        let device = try Self.deviceKeyReceipt()
        let passkey = try Self.passkeyReceipt()
        let other = PrivateKey.generateEC(.p256).publicKey.spkiDER
        func evidence(_ r: JSONValue, _ key: String, _ value: JSONValue) -> JSONValue { r.setting("evidence", r["evidence"]!.setting(key, value)) }
        func approver(_ r: JSONValue, _ key: String, _ value: JSONValue) -> JSONValue { r.setting("approver", r["approver"]!.setting(key, value)) }
        let otherAction = Self.action.setting("amount", "2000.00")
        let cases: [(String, JSONValue, String, String)] = [
            ("sub", device.setting("sub", "user-2"), "user", "sub"),
            ("action", device.setting("action", otherAction), "action hash", "SHA-256"),
            ("action and its hash", device.setting("action", otherAction)
                .setting("actionHash", .string(Base64URL.encode(Digest.sha256(otherAction.canonicalized())))), "action", "another action"),
            ("display lines", device.setting("display", Self.display.value.setting("lines", ["Pay 2.00 EUR"])), "display", "not the one"),
            ("display source", device.setting("display", Self.display.value.setting("source", "latchkey")), "display", "not the one"),
            ("display removed", device.setting("display", .null), "display", "null"),
            ("keyBinding", evidence(device, "keyBinding", .string(Base64URL.encode(other))), "key binding", "key hash"),
            ("publicKey", approver(device, "publicKey", .string(Base64URL.encode(other))), "key binding", "approver.publicKey"),
            ("signature", evidence(device, "signature", .string(Base64URL.encode(try PrivateKey.generateEC(.p256)
                .sign([1, 2, 3], algorithm: .ecdsa(.sha256))))), "signature", "does not verify"),
            ("nonce", evidence(device, "nonce", .string(Base64URL.encode([UInt8](repeating: 7, count: 32)))), "challenge", "nonce"),
            ("challengeVersion", evidence(device, "challengeVersion", 1), "challenge", "version"),
            ("passkey sub", passkey.setting("sub", "user-2"), "user", "sub"),
            ("passkey approver.id", approver(passkey, "id", "BBBB"), "key binding", "credentialIds"),
            ("passkey rpId", evidence(passkey, "rpId", "evil.example"), "key binding", "rpId"),
            ("passkey publicKey", approver(passkey, "publicKey", .string(Base64URL.encode(SoftAuthenticator().publicKeyCOSE))),
             "signature", "does not verify"),
            ("passkey display", passkey.setting("display", Self.display.value.setting("lang", "de")), "display", "not the one"),
            ("passkey action", passkey.setting("action", otherAction), "action hash", "SHA-256"),
        ]
        for (what, tampered, check, reason) in cases {
            let failed = Self.failed(tampered)
            #expect(failed[check]?.contains(reason) == true, "\(what): \(failed)")
            #expect(!ReceiptChecker.allPassed(ReceiptChecker.check(tampered)), "\(what)")
        }
    }

    @Test("A break-glass vote's receipt says breakGlass:true (in RFC 8785 order) and passes; an ordinary one has no such member")
    func breakGlassMember() throws {
        let key = PrivateKey.generateEC(.p256)
        let spki = key.publicKey.spkiDER
        let action = try StepUpAction(Self.action)
        let challenge = StepUpChallenge(method: .deviceKey, userId: Self.userId, keyBinding: spki, display: nil, action: action)
        let signature = try key.sign(challenge.bytes, algorithm: .ecdsa(.sha256))
        func document(breakGlass: Bool) -> ReceiptDocument {
            ReceiptDocument(id: "r1", issuer: "https://example.com", subject: Self.userId, approvedAt: 1_893_456_000, action: action,
                            display: nil, approverKind: .deviceKey, approverId: "key-1", approverPublicKey: spki, attestation: nil,
                            evidence: .deviceKey(challenge: challenge.bytes, signature: signature, appAttest: nil),
                            challenge: challenge, keyBinding: spki, breakGlass: breakGlass)
        }
        let marked = document(breakGlass: true), plain = document(breakGlass: false)
        #expect(marked.value["breakGlass"] == .bool(true) && plain.value["breakGlass"] == nil)
        #expect(String(decoding: marked.bytes, as: UTF8.self).contains("},\"breakGlass\":true,\"display\":null,"))
        #expect(ReceiptChecker.allPassed(ReceiptChecker.check(marked.value)) && ReceiptChecker.allPassed(ReceiptChecker.check(plain.value)))
    }

    @Test("A receipt missing members or not JSON of the right shape fails the shape check, and nothing crashes")
    func shape() throws {
        let device = try Self.deviceKeyReceipt()
        for broken: JSONValue in [.null, "text", [1, 2], device.setting("v", 2), device.removing("evidence"), device.removing("display"),
                                  device.setting("approver", device["approver"]!.setting("kind", "password")),
                                  device.setting("breakGlass", false), device.setting("breakGlass", "true"),
                                  device.setting("evidence", device["evidence"]!.setting("challenge", "!!"))] {
            let checks = ReceiptChecker.check(broken)
            #expect(checks.first?.name == "shape" && checks.first?.passed == false)
            #expect(!ReceiptChecker.allPassed(checks))
        }
        let garbage = device.setting("evidence", device["evidence"]!.setting("challenge", .string(Base64URL.encode([1, 2, 3]))))
        #expect(Self.failed(garbage)["challenge"]?.contains("not a Latchkey step-up challenge") == true)
    }
}

extension JSONValue {
    func setting(_ key: String, _ value: JSONValue) -> JSONValue {
        guard var members = objectValue else { return self }
        if let i = members.firstIndex(where: { $0.key == key }) { members[i].value = value } else { members.append((key, value)) }
        return .object(members)
    }

    func removing(_ key: String) -> JSONValue { .object((objectValue ?? []).filter { $0.key != key }) }
}
