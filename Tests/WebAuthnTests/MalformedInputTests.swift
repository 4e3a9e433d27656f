import CBOR
import Crypto
import JSON
import Testing
import WebAuthn
import WebAuthnTesting

/// Bad bytes anywhere get an error code, never a crash.
@Suite struct MalformedInputTests {
    @Test(arguments: ["", "{", "[]", "null", #"{"type":"public-key"}"#, #"{"id":"AA","type":"public-key","response":{}}"#,
                      #"{"id":"A+/=","rawId":"A+/=","type":"public-key","response":{"clientDataJSON":"e30","attestationObject":"oA"}}"#,
                      #"{"id":"AAAA","rawId":"AAAA","type":"public-key","response":{"clientDataJSON":"!!","attestationObject":"oA"}}"#,
                      #"{"id":"AAAA","rawId":"AAAA","type":"public-key","response":{"clientDataJSON":"e30","attestationObject":"oA"}}"#])
    func malformedRegistrationJSON(_ text: String) {
        #expect(throws: WebAuthnError(.invalidRequest, "")) { _ = try ParsedRegistration(bytes: Array(text.utf8)) }
    }

    @Test func base64URLIsStrict() {
        #expect(Base64URL.decode("AQID") == [1, 2, 3])
        #expect(Base64URL.decode("AQI") == [1, 2])
        #expect(Base64URL.decode("AQI=") == [1, 2])
        #expect(Base64URL.decode("A+I") == nil)
        #expect(Base64URL.decode("A/I") == nil)
        #expect(Base64URL.decode("A") == nil)
        #expect(Base64URL.decode("AQJ") == nil)  // non-zero trailing bits
        #expect(Base64URL.decode("AQI===") == nil)
    }

    @Test func truncatedAndOversizedAuthenticatorData() {
        let auth = SoftAuthenticator()
        let full = auth.registration(challenge: Fixture.challenge, rpId: Fixture.rpId, origin: Fixture.origin).authenticatorData
        for length in 0..<full.count {
            #expect(throws: WebAuthnError.self) { _ = try AuthenticatorData(Array(full[0..<length])) }
        }
        #expect(throws: WebAuthnError(.invalidRequest, "")) { _ = try AuthenticatorData(full + [0x00]) }
        var oversizedId = full
        oversizedId[53] = 0x04  // credential id length 1024+
        #expect(throws: WebAuthnError(.invalidRequest, "")) { _ = try AuthenticatorData(oversizedId) }
    }

    @Test func invalidCOSEKeys() {
        let x = [UInt8](repeating: 1, count: 32)
        let cases: [CBORValue] = [
            .map([CBORPair(.int(1), .int(2)), CBORPair(.int(3), .int(-7)), CBORPair(.int(-1), .int(1)),
                  CBORPair(.int(-2), .bytes(x)), CBORPair(.int(-3), .bytes(x))]),  // not on the curve
            .map([CBORPair(.int(1), .int(2)), CBORPair(.int(3), .int(-7)), CBORPair(.int(-1), .int(2))]),  // ES256 with P-384
            .map([CBORPair(.int(1), .int(1)), CBORPair(.int(3), .int(-7)), CBORPair(.int(-1), .int(6)), CBORPair(.int(-2), .bytes(x))]),
            .map([CBORPair(.int(1), .int(3)), CBORPair(.int(3), .int(-257)), CBORPair(.int(-1), .bytes([1])), CBORPair(.int(-2), .bytes([1, 0, 1]))]),
            .map([CBORPair(.int(1), .int(7)), CBORPair(.int(3), .int(-48))]),  // ML-DSA: unsupported
            .array([]),
        ]
        for c in cases {
            #expect(throws: WebAuthnError.self) { _ = try COSEKey(bytes: CBOREncoder.encode(c)) }
        }
    }

    /// Seeded random mutations of valid responses: every outcome is a WebAuthnError or success.
    @Test func randomMutationsNeverCrash() throws {
        var rng = SplitMix64(seed: 0x1A7C_4E11)
        let auth = SoftAuthenticator()
        let reg = auth.registration(challenge: Fixture.challenge, rpId: Fixture.rpId, origin: Fixture.origin).bytes()
        let asr = auth.assertion(challenge: Fixture.challenge, rpId: Fixture.rpId, origin: Fixture.origin).bytes()
        let key = try COSEKey(bytes: auth.publicKeyCOSE)
        for round in 0..<3000 {
            var bytes = round % 2 == 0 ? reg : asr
            let n = Int(rng.next() % 4) + 1
            for _ in 0..<n {
                let i = Int(rng.next() % UInt64(bytes.count))
                switch rng.next() % 3 {
                case 0: bytes[i] = UInt8(truncatingIfNeeded: rng.next())
                case 1: bytes.remove(at: i)
                default: bytes.insert(UInt8(truncatingIfNeeded: rng.next()), at: i)
                }
            }
            if round % 2 == 0 {
                _ = try? RegistrationVerifier.verify(try ParsedRegistration(bytes: bytes), expectedChallenge: Fixture.challenge, policy: Fixture.policy())
            } else {
                _ = try? AuthenticationVerifier.verify(try ParsedAuthentication(bytes: bytes), expectedChallenge: Fixture.challenge,
                                                       stored: StoredCredential(publicKey: key, signCount: 0), policy: Fixture.policy())
            }
        }
    }
}

