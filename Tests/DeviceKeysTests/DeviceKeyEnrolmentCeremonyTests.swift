import Crypto
import DeviceKeys
import JSON
import Testing

/// Device-key ceremonies with randomness and the clock pinned.
enum DeviceKeyFixture {
    /// Nonce bytes 00 01 02 … 1f; 2027-01-15T08:00:00Z.
    static let environment = DeviceKeyEnvironment(random: { count in (0..<count).map { UInt8(truncatingIfNeeded: $0) } },
                                                  now: { 1_800_000_000 })

    /// Ways a stored state can be unreadable, each from the valid encoding `good`.
    static func corruptions(of good: [UInt8], otherCeremony: [UInt8]) -> [(String, [UInt8])] {
        let text = String(decoding: good, as: UTF8.self)
        var flipped = good
        flipped[0] ^= 0x20  // "{" → "["
        return [
            ("empty", []),
            ("truncated", Array(good.dropLast(5))),
            ("one byte", [good[0]]),
            ("a structural byte flipped", flipped),
            ("not JSON", Array("not a state".utf8)),
            ("whitespace (not the canonical encoding)", Array(text.replacing(",", with: ", ").utf8)),
            ("an unknown member", Array(text.replacing("{\"", with: "{\"aaa\":1,\"").utf8)),
            ("another version", Array(text.replacing("\"v\":1", with: "\"v\":2").utf8)),
            ("another ceremony's state", otherCeremony),
            ("trailing bytes", good + Array(" ".utf8)),
        ]
    }
}

@Suite struct DeviceKeyEnrolmentCeremonyTests {
    static let ceremony = DeviceKeyEnrolmentCeremony(ttlSeconds: 300, environment: DeviceKeyFixture.environment)

    @Test("Options are the JSON StepUpService renders: challengeId = SHA-256(challenge), expiresAt in RFC 3339")
    func optionsJSON() {
        let (options, state) = Self.ceremony.begin(userId: "user-1")
        #expect(options.json.text == #"""
            {"challengeId":"TZKIyP0ZR1dv6G4WP2u7x2gPaaxLrcoVnqDDrNoCglo",\#
            "challenge":"TEtFTlJPTEwBAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh_GwonknpwFshRYYDh7c7yxjfQ_sJoeSkqXE8dsiLtUGw",\#
            "expiresAt":"2027-01-15T08:05:00Z"}
            """#)
        #expect(options.challenge == EnrolmentChallenge(userId: "user-1", random: DeviceKeyFixture.environment.random).bytes)
        #expect(options.challengeId == Digest.sha256(options.challenge) && options.expiresAt == 1_800_000_300)
        #expect(state.challenge == options.challenge && state.userId == "user-1")
    }

    @Test("The state has one encoding")
    func stateRoundTrip() throws {
        let state = Self.ceremony.begin(userId: "user-1").state
        #expect(String(decoding: state.encoded(), as: UTF8.self) == #"""
            {"ceremony":"device-key-enrolment",\#
            "challenge":"TEtFTlJPTEwBAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh_GwonknpwFshRYYDh7c7yxjfQ_sJoeSkqXE8dsiLtUGw",\#
            "userId":"user-1","v":1}
            """#)
        #expect(try DeviceKeyEnrolmentState(decoding: state.encoded()) == state)
    }

    static let corruptions: [(String, [UInt8])] = {
        let good = ceremony.begin(userId: "user-1").state.encoded()
        let text = String(decoding: good, as: UTF8.self)
        let other = StepUpCeremony(ttlSeconds: 60, environment: DeviceKeyFixture.environment)
            .begin(method: .deviceKey, userId: "user-1", keyBinding: [1], keyId: "k1", action: try! StepUpAction(["a": "b"])).state
        return DeviceKeyFixture.corruptions(of: good, otherCeremony: other.encoded()) + [
            // The challenge was made for user-1: a state naming another user does not hold together.
            ("another user", Array(text.replacing("\"user-1\"", with: "\"user-2\"").utf8)),
            ("a step-up challenge", DeviceKeyEnrolmentState(challenge: other.challenge, userId: "user-1").encoded()),
        ]
    }()

    @Test("An unreadable state is challenge_invalid", arguments: corruptions)
    func unreadableState(_ label: String, _ bytes: [UInt8]) {
        #expect(throws: DeviceKeyError(.challengeInvalid, ""), "\(label)") { try DeviceKeyEnrolmentState(decoding: bytes) }
        do { _ = try DeviceKeyEnrolmentState(decoding: bytes) } catch {
            #expect(error.reason == "the stored ceremony state is unreadable")
        }
    }

    @Test("Proof of possession with a real P-256 key verifies; another key's signature is signature_invalid")
    func finish() throws {
        let ceremony = DeviceKeyEnrolmentCeremony(ttlSeconds: 300)
        let (options, state) = ceremony.begin(userId: "user-1")
        let stored = try DeviceKeyEnrolmentState(decoding: state.encoded())
        let pk = PrivateKey.generateEC(.p256)
        let key = try DevicePublicKey(bytes: pk.publicKey.spkiDER)
        let signature = try DERSignature(bytes: try pk.sign(options.challenge, algorithm: .ecdsa(.sha256)))
        try ceremony.finish(signature: signature, key: key, state: stored)

        let other = try DERSignature(bytes: try PrivateKey.generateEC(.p256).sign(options.challenge, algorithm: .ecdsa(.sha256)))
        #expect(throws: DeviceKeyError(.signatureInvalid, "")) { try ceremony.finish(signature: other, key: key, state: stored) }
        // The right key, over another enrolment challenge.
        let another = ceremony.begin(userId: "user-1").state
        #expect(throws: DeviceKeyError(.signatureInvalid, "")) { try ceremony.finish(signature: signature, key: key, state: another) }
    }
}
