import Crypto
import DeviceKeys
import JSON
import Testing

/// Keys as phones send them: SPKI DER (Android `public.encoded`) and the 65-byte X9.63 point
/// (iOS `SecKeyCopyExternalRepresentation`); signatures made by OpenSSL, DER ECDSA-SHA256.
@Suite("Device keys")
struct DevicePublicKeyTests {
    @Test("SPKI DER and X9.63 of one key parse to the same stored form")
    func bothEncodings() throws {
        let pk = PrivateKey.generateEC(.p256)
        let spki = try DevicePublicKey(bytes: pk.publicKey.spkiDER)
        let raw = try DevicePublicKey(bytes: try #require(pk.publicKey.x963Point))
        #expect(spki.encoding == .spki && raw.encoding == .x963)
        #expect(spki.spkiDER == raw.spkiDER && spki.x963 == raw.x963 && raw.x963.count == 65)
        #expect(spki.pem.hasPrefix("-----BEGIN PUBLIC KEY-----\n"))
    }

    @Test("Refused with invalid_request and a reason", arguments: [
        ("empty", [UInt8]()),
        ("compressed", [0x02] + [UInt8](repeating: 7, count: 32)),
        ("short X9.63", [0x04] + [UInt8](repeating: 7, count: 40)),
        ("not on the curve", [0x04] + [UInt8](repeating: 1, count: 64)),
        ("garbage", [0x13, 0x37]),
        ("truncated SPKI", Array(PrivateKey.generateEC(.p256).publicKey.spkiDER.dropLast(3))),
        ("P-384", PrivateKey.generateEC(.p384).publicKey.spkiDER),
        ("RSA", PrivateKey.generateRSA(bits: 2048).publicKey.spkiDER),
        ("Ed25519", PrivateKey.generateEd25519().publicKey.spkiDER),
    ] as [(String, [UInt8])])
    func refused(_ label: String, _ bytes: [UInt8]) {
        #expect(throws: DeviceKeyError(.invalidRequest, "")) { try DevicePublicKey(bytes: bytes) }
        do { _ = try DevicePublicKey(bytes: bytes) } catch { #expect(!error.reason.isEmpty, "\(label)") }
    }

    @Test("Curve and type are named in the reason")
    func reasons() {
        func reason(_ b: [UInt8]) -> String { do { _ = try DevicePublicKey(bytes: b); return "" } catch { return error.reason } }
        #expect(reason(PrivateKey.generateEC(.p384).publicKey.spkiDER).contains("P-384"))
        #expect(reason(PrivateKey.generateRSA(bits: 2048).publicKey.spkiDER).contains("RSA"))
        #expect(reason([0x03] + [UInt8](repeating: 7, count: 32)).contains("compressed"))
    }

    @Test("DER signatures verify; raw r||s and other keys do not")
    func signatures() throws {
        let pk = PrivateKey.generateEC(.p256)
        let key = try DevicePublicKey(bytes: try #require(pk.publicKey.x963Point))
        let challenge = EnrolmentChallenge(userId: "u1").bytes
        let der = try pk.sign(challenge, algorithm: .ecdsa(.sha256))
        _ = try DeviceKeyVerifier.verify(try DERSignature(bytes: der), by: key, over: challenge)
        // Another key's signature: a present but wrong signature is signature_invalid.
        let other = try PrivateKey.generateEC(.p256).sign(challenge, algorithm: .ecdsa(.sha256))
        #expect(throws: DeviceKeyError(.signatureInvalid, "")) {
            try DeviceKeyVerifier.verify(try DERSignature(bytes: other), by: key, over: challenge)
        }
        // Same signature, one byte of the message changed.
        var changed = challenge
        changed[changed.count - 1] ^= 1
        #expect(throws: DeviceKeyError(.signatureInvalid, "")) {
            try DeviceKeyVerifier.verify(try DERSignature(bytes: der), by: key, over: changed)
        }
        // CryptoKit's rawRepresentation (r||s), or bytes that are not DER: present but wrong
        // (SPEC: signature_invalid), the reason naming the encoding; empty counts as missing.
        let raw = try ECDSASignature.rawFromDER(der, coordinateLength: 32)
        #expect(throws: DeviceKeyError(.signatureInvalid, "")) { try DERSignature(bytes: raw) }
        #expect(throws: DeviceKeyError(.signatureInvalid, "")) { try DERSignature(bytes: der + [0]) }
        #expect(throws: DeviceKeyError(.signatureInvalid, "")) { try DERSignature(bytes: [0x01, 0x02, 0x03]) }
        #expect(throws: DeviceKeyError(.invalidRequest, "")) { try DERSignature(bytes: []) }
    }

    @Test("A raw r||s is named as raw whatever its first byte (0x30 is the SEQUENCE tag one time in 256)")
    func rawSignatureWithSequenceTagFirst() {
        for first: UInt8 in [0x30, 0x00, 0xFF] {
            let raw = [first] + [UInt8](repeating: 0x42, count: 63)
            do {
                _ = try DERSignature(bytes: raw)
                Issue.record("64 raw bytes starting \(first) parsed as DER")
            } catch {
                #expect(error.code == .signatureInvalid && error.reason.contains("raw r||s"), "\(first): \(error)")
            }
        }
    }
}

@Suite("Step-up challenges")
struct StepUpChallengeTests {
    static let action: JSONValue = ["type": "transfer", "amount": "200.00", "currency": "EUR", "to": "DE89370400440532013000"]

    @Test("Layout: magic, version, method, 32 random bytes, then user, key and action hashes")
    func layout() throws {
        let action = try StepUpAction(Self.action)
        let key = PrivateKey.generateEC(.p256).publicKey.spkiDER
        let c = StepUpChallenge(method: .deviceKey, userId: "user-1", keyBinding: key, action: action,
                                random: { [UInt8](repeating: 0xAB, count: $0) })
        let bytes = c.bytes
        #expect(bytes.count == 138)
        #expect(Array(bytes[0..<8]) == Array("LKSTEPUP".utf8) && bytes[8] == 1 && bytes[9] == 1)
        #expect(Array(bytes[10..<42]) == [UInt8](repeating: 0xAB, count: 32))
        #expect(Array(bytes[42..<74]) == Digest.sha256(Array("user-1".utf8)))
        #expect(Array(bytes[74..<106]) == Digest.sha256(key))
        #expect(Array(bytes[106..<138]) == Digest.sha256(Self.action.canonicalized()))
        #expect(try StepUpChallenge(parsing: bytes) == c)
        #expect(c.binds(userId: "user-1", keyBinding: key, action: action))
        #expect(!c.binds(userId: "user-2", keyBinding: key, action: action))
        #expect(!c.binds(userId: "user-1", keyBinding: key, action: try StepUpAction(Self.action.setting("amount", "2000.00"))))
    }

    @Test("Version 2, with a display: the display's hash before the action hash, which stays the last 32 bytes")
    func layoutWithDisplay() throws {
        let action = try StepUpAction(Self.action)
        let key = PrivateKey.generateEC(.p256).publicKey.spkiDER
        let display = try StepUpDisplay(app: ["lang": "en", "lines": ["Pay 200.00 EUR to DE89 3704 0044 0532 0130 00"]])
        let c = StepUpChallenge(method: .passkey, userId: "user-1", keyBinding: key, display: display, action: action,
                                random: { [UInt8](repeating: 0xAB, count: $0) })
        let bytes = c.bytes
        #expect(bytes.count == 170 && c.version == 2)
        #expect(Array(bytes[0..<8]) == Array("LKSTEPUP".utf8) && bytes[8] == 2 && bytes[9] == 2)
        #expect(Array(bytes[10..<42]) == [UInt8](repeating: 0xAB, count: 32))
        #expect(Array(bytes[42..<74]) == Digest.sha256(Array("user-1".utf8)))
        #expect(Array(bytes[74..<106]) == Digest.sha256(key))
        let displayJSON = #"{"lang":"en","lines":["Pay 200.00 EUR to DE89 3704 0044 0532 0130 00"],"source":"app"}"#
        #expect(display.canonical == Array(displayJSON.utf8))
        #expect(Array(bytes[106..<138]) == Digest.sha256(Array(displayJSON.utf8)))
        #expect(Array(bytes.suffix(32)) == Digest.sha256(Self.action.canonicalized()))
        #expect(try StepUpChallenge(parsing: bytes) == c)
        #expect(c.binds(userId: "user-1", keyBinding: key, display: display, action: action))
        #expect(!c.binds(userId: "user-1", keyBinding: key, action: action))
        #expect(!c.binds(userId: "user-1", keyBinding: key, display: StepUpDisplay(latchkey: "en", lines: display.lines), action: action))
        // Version 1 stays byte for byte: no display, 138 bytes, the action hash last.
        let v1 = StepUpChallenge(method: .passkey, userId: "user-1", keyBinding: key, action: action, random: { [UInt8](repeating: 0xAB, count: $0) })
        #expect(v1.bytes == Array(bytes[0..<8]) + [1, 2] + Array(bytes[10..<106]) + Array(bytes.suffix(32)))
        #expect(v1.version == 1 && v1.displayHash == nil)
        // A version byte that disagrees with the length is refused, either way.
        var wrong = bytes
        wrong[8] = 1
        #expect(throws: DeviceKeyError.self) { try StepUpChallenge(parsing: wrong) }
        var short = v1.bytes
        short[8] = 2
        #expect(throws: DeviceKeyError.self) { try StepUpChallenge(parsing: short) }
        var future = bytes
        future[8] = 3
        #expect(throws: DeviceKeyError.self) { try StepUpChallenge(parsing: future) }
    }

    @Test("An app's display is checked strictly: two members, a language tag, 1 to 32 showable lines")
    func displayValidation() throws {
        _ = try StepUpDisplay(app: ["lang": "de-CH", "lines": ["Überweisung: 200,00 EUR"]])
        _ = try StepUpDisplay(app: ["lang": "zh-Hans", "lines": .array((0..<32).map { _ in .string(String(repeating: "x", count: 200)) })])
        _ = try StepUpDisplay(app: ["lang": "en", "lines": [.string(String(repeating: "x", count: 256))]])
        let bad: [JSONValue] = [
            "text", ["lang": "en"], ["lines": ["a"]], ["lang": "en", "lines": []], ["lang": "en", "lines": ["a"], "source": "latchkey"],
            ["lang": "", "lines": ["a"]], ["lang": "e", "lines": ["a"]], ["lang": "en_US", "lines": ["a"]], ["lang": "en-", "lines": ["a"]],
            ["lang": .string(String(repeating: "a", count: 36)), "lines": ["a"]], ["lang": 1, "lines": ["a"]],
            ["lang": "en", "lines": [""]], ["lang": "en", "lines": [1]], ["lang": "en", "lines": "a"],
            ["lang": "en", "lines": ["two\nlines"]], ["lang": "en", "lines": ["bell\u{7}"]], ["lang": "en", "lines": ["sep\u{2028}"]],
            ["lang": "en", "lines": [.string(String(repeating: "x", count: 257))]],
            ["lang": "en", "lines": .array((0..<33).map { _ in "a" })],
            // Every line within bounds, the whole over 8 KiB.
            ["lang": "en", "lines": .array((0..<32).map { _ in .string(String(repeating: "x", count: 256)) })],
        ]
        for value in bad {
            #expect(throws: DeviceKeyError.self, "\(value)") { try StepUpDisplay(app: value) }
        }
    }

    @Test("Fresh nonces; enrolment challenges can never parse as step-up ones")
    func domainSeparation() throws {
        let action = try StepUpAction(Self.action)
        let a = StepUpChallenge(method: .passkey, userId: "u", keyBinding: [1], action: action)
        let b = StepUpChallenge(method: .passkey, userId: "u", keyBinding: [1], action: action)
        #expect(a.nonce != b.nonce)
        let enrol = EnrolmentChallenge(userId: "u").bytes
        #expect(enrol.count == 73 && Array(enrol[0..<8]) == Array("LKENROLL".utf8))
        #expect(throws: DeviceKeyError(.invalidRequest, "")) { try StepUpChallenge(parsing: enrol) }
    }

    @Test("The action hash ignores member order and whitespace; it sees every value")
    func actionHash() throws {
        let a = try StepUpAction(try JSONParser.parse(#"{"amount":"200.00","type":"transfer"}"#))
        let b = try StepUpAction(try JSONParser.parse(#"{ "type" : "transfer", "amount" : "200.00" }"#))
        let c = try StepUpAction(try JSONParser.parse(#"{"amount":"200.01","type":"transfer"}"#))
        #expect(a.hash == b.hash && a.hash != c.hash)
        #expect(throws: DeviceKeyError(.invalidRequest, "")) { try StepUpAction(["a", "b"]) }
        #expect(throws: DeviceKeyError(.invalidRequest, "")) { try StepUpAction(.object([])) }
        #expect(throws: DeviceKeyError(.invalidRequest, "")) { try StepUpAction(.object([("x", .number(.infinity))])) }
    }
}

extension JSONValue {
    func setting(_ key: String, _ value: JSONValue) -> JSONValue {
        guard case .object(var members) = self else { return self }
        if let i = members.firstIndex(where: { $0.key == key }) { members[i].value = value } else { members.append((key, value)) }
        return .object(members)
    }
}
