import JSON
import Testing
import WebAuthn
import WebAuthnTesting

/// Ceremonies with randomness and the clock pinned: the same options, byte for byte, every run.
/// Verification policy and rpId/origin are `Fixture`'s (CeremonyRuleTests).
enum CeremonyFixture {
    /// Challenge bytes 00 01 02 … 1f.
    static let environment = CeremonyEnvironment(random: { count in (0..<count).map { UInt8(truncatingIfNeeded: $0) } },
                                                 now: { 1_800_000_000 })
    static let challenge: [UInt8] = Array(0..<32)
    static let rp = RelyingParty(id: Fixture.rpId, name: "Example")
    static let user = UserEntity(id: [UInt8](repeating: 0xAA, count: 16), name: "alice", displayName: "Alice Liddell")
    /// What PasskeyService offers.
    static let algorithms: [COSEAlgorithm] = [.es256, .edDSA, .es384, .es512, .ps256, .rs256]

    static func registration(userVerification: VerificationPolicy.UserVerification = .preferred,
                             algorithms: [COSEAlgorithm] = algorithms) -> RegistrationCeremony {
        RegistrationCeremony(rp: rp, algorithms: algorithms, userVerification: userVerification, attestation: .none,
                             timeoutSeconds: 300, environment: environment)
    }

    static func authentication(userVerification: VerificationPolicy.UserVerification = .preferred) -> AuthenticationCeremony {
        AuthenticationCeremony(rpId: Fixture.rpId, userVerification: userVerification, timeoutSeconds: 300, environment: environment)
    }

    /// Ways a stored state can be unreadable, each from the valid encoding `good`.
    static func corruptions(of good: [UInt8], otherCeremony: [UInt8]) -> [(String, [UInt8])] {
        let text = String(decoding: good, as: UTF8.self)
        // Flipping a byte inside a value makes another, readable state (states are stored, not
        // signed); flipping one of the structure must not.
        var flipped = good
        flipped[0] ^= 0x20  // "{" → "["
        return [
            ("empty", []),
            ("truncated", Array(good.dropLast(5))),
            ("one byte", [good[0]]),
            ("a structural byte flipped", flipped),
            ("not JSON", Array("not a state".utf8)),
            ("a JSON array", Array("[]".utf8)),
            ("whitespace (not the canonical encoding)", Array(text.replacing(",", with: ", ").utf8)),
            ("an unknown member", Array(text.replacing("{\"", with: "{\"aaa\":1,\"").utf8)),
            ("another version", Array(text.replacing("\"v\":1", with: "\"v\":2").utf8)),
            ("another ceremony's state", otherCeremony),
            ("trailing bytes", good + Array(" ".utf8)),
        ]
    }
}
