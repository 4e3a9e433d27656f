import Crypto
import JSON
import Testing
import WebAuthn
import WebAuthnTesting

/// One test per rule and failure code: start from a valid ceremony, change one field.
enum Fixture {
    static let rpId = "example.com"
    static let origin = "https://example.com"
    static let challenge: [UInt8] = Array(0..<32)

    static func policy(_ change: (inout VerificationPolicy) -> Void = { _ in }) -> VerificationPolicy {
        var p = VerificationPolicy(rpId: rpId, origins: OriginPolicy([origin, "android:apk-key-hash:xT5ZucZJ9N7oq3j3awG8J8pjl3bDJJ1tIJe6Wd6QRYY"]),
                                   clock: { 1_800_000_000 })
        change(&p)
        return p
    }

    static func register(_ builder: RegistrationBuilder, policy: VerificationPolicy = policy()) throws(WebAuthnError) -> VerifiedRegistration {
        try RegistrationVerifier.verify(try ParsedRegistration(bytes: builder.bytes()), expectedChallenge: challenge, policy: policy)
    }

    static func authenticate(_ builder: AssertionBuilder, stored: UInt32 = 0, policy: VerificationPolicy = policy(),
                             storedKey: [UInt8]? = nil) throws(WebAuthnError) -> VerifiedAuthentication {
        let key = try COSEKey(bytes: storedKey ?? builder.authenticator.publicKeyCOSE)
        return try AuthenticationVerifier.verify(try ParsedAuthentication(bytes: builder.bytes()), expectedChallenge: challenge,
                                                 stored: StoredCredential(publicKey: key, signCount: stored), policy: policy)
    }
}

@Suite struct RegistrationRuleTests {
    @Test(arguments: [COSEAlgorithm.es256, .edDSA, .rs256, .es384, .ps256])
    func validRegistrationVerifies(_ alg: COSEAlgorithm) throws {
        let auth = SoftAuthenticator(algorithm: alg)
        for format in [RegistrationFormat.none, .packedSelf] {
            var b = auth.registration(challenge: Fixture.challenge, rpId: Fixture.rpId, origin: Fixture.origin)
            b.format = format
            let v = try Fixture.register(b)
            #expect(v.credentialId == auth.credentialId)
            #expect(v.algorithm == alg)
            if case .none = format { #expect(v.attestationType == .none) } else { #expect(v.attestationType == .self) }
            #expect(v.transports == ["internal", "hybrid"])
        }
    }

    func expectCode(_ code: WebAuthnError.Code, policy: VerificationPolicy = Fixture.policy(),
                    _ change: (inout RegistrationBuilder) -> Void) {
        var b = SoftAuthenticator().registration(challenge: Fixture.challenge, rpId: Fixture.rpId, origin: Fixture.origin)
        change(&b)
        #expect(throws: WebAuthnError(code, "")) { try Fixture.register(b, policy: policy) }
    }

    @Test func wrongChallenge() { expectCode(.challengeInvalid) { $0.clientData.challenge = Array(repeating: 7, count: 32) } }
    @Test func wrongType() { expectCode(.invalidRequest) { $0.clientData.type = "webauthn.get" } }
    @Test func wrongOrigin() { expectCode(.originNotAllowed) { $0.clientData.origin = "https://evil.example" } }
    @Test func originIsExactMatch() { expectCode(.originNotAllowed) { $0.clientData.origin = "https://sub.example.com" } }
    @Test func androidOrigin() throws {
        var b = SoftAuthenticator().registration(challenge: Fixture.challenge, rpId: Fixture.rpId,
                                                 origin: "android:apk-key-hash:xT5ZucZJ9N7oq3j3awG8J8pjl3bDJJ1tIJe6Wd6QRYY")
        _ = try Fixture.register(b)
        b.clientData.origin = "android:apk-key-hash:XT5ZucZJ9N7oq3j3awG8J8pjl3bDJJ1tIJe6Wd6QRYY"
        #expect(throws: WebAuthnError(.originNotAllowed, "")) { try Fixture.register(b) }
    }
    @Test func crossOriginRefusedByDefault() { expectCode(.originNotAllowed) { $0.clientData.crossOrigin = true } }
    @Test func topOriginMustBeAllowlisted() throws {
        let policy = Fixture.policy { $0.crossOrigin = .allow(topOrigins: ["https://shop.example"]) }
        expectCode(.originNotAllowed, policy: policy) { $0.clientData.crossOrigin = true; $0.clientData.topOrigin = "https://evil.example" }
        var b = SoftAuthenticator().registration(challenge: Fixture.challenge, rpId: Fixture.rpId, origin: Fixture.origin)
        b.clientData.crossOrigin = true
        b.clientData.topOrigin = "https://shop.example"
        _ = try Fixture.register(b, policy: policy)
    }
    // §7.1 step 10 with LATCHKEY_EMBEDDING_ORIGINS set: a cross-origin ceremony must name its top
    // origin, and that one must be allowlisted; without topOrigin there is nothing to allow.
    @Test func crossOriginWithoutTopOriginRefusedUnderEmbeddingAllowlist() {
        let policy = Fixture.policy { $0.crossOrigin = .allow(topOrigins: ["https://shop.example"]) }
        expectCode(.originNotAllowed, policy: policy) { $0.clientData.crossOrigin = true; $0.clientData.topOrigin = nil }
    }
    @Test func wrongRpIdHash() { expectCode(.rpIdMismatch) { $0.rpId = "evil.example" } }
    @Test func userPresenceRequired() { expectCode(.userPresenceRequired) { $0.userPresent = false } }
    @Test func userVerificationRequiredWhenAsked() throws {
        expectCode(.userVerificationRequired, policy: Fixture.policy { $0.userVerification = .required }) { $0.userVerified = false }
        var b = SoftAuthenticator().registration(challenge: Fixture.challenge, rpId: Fixture.rpId, origin: Fixture.origin)
        b.userVerified = false
        _ = try Fixture.register(b)  // preferred: allowed
    }
    @Test func algorithmMustBeOffered() {
        expectCode(.algorithmUnsupported, policy: Fixture.policy { $0.allowedAlgorithms = [.edDSA] }) { _ in }
    }
    @Test func rawIdMustMatchAuthenticatorData() { expectCode(.invalidRequest) { $0.reportedCredentialId = [1, 2, 3] } }
    @Test func packedSelfSignatureChecked() {
        expectCode(.attestationInvalid) { $0.format = .packedSelf; $0.corruptAttestationSignature = true }
    }
    @Test func backedUpWithoutEligibilityRefused() {
        let a = SoftAuthenticator()
        a.backedUp = true
        var b = a.registration(challenge: Fixture.challenge, rpId: Fixture.rpId, origin: Fixture.origin)
        b.userVerified = true
        #expect(throws: WebAuthnError(.invalidRequest, "")) { try Fixture.register(b) }
    }
}

@Suite struct AuthenticationRuleTests {
    func builder(_ auth: SoftAuthenticator = SoftAuthenticator()) -> AssertionBuilder {
        auth.assertion(challenge: Fixture.challenge, rpId: Fixture.rpId, origin: Fixture.origin)
    }

    @Test(arguments: [COSEAlgorithm.es256, .edDSA, .rs256, .es512, .ps256])
    func validAssertionVerifies(_ alg: COSEAlgorithm) throws {
        let v = try Fixture.authenticate(builder(SoftAuthenticator(algorithm: alg)))
        #expect(v.newSignCount == 0)
        #expect(!v.cloneWarning)
    }

    func expectCode(_ code: WebAuthnError.Code, stored: UInt32 = 0, policy: VerificationPolicy = Fixture.policy(),
                    _ change: (inout AssertionBuilder) -> Void) {
        var b = builder()
        change(&b)
        #expect(throws: WebAuthnError(code, "")) { try Fixture.authenticate(b, stored: stored, policy: policy) }
    }

    @Test func wrongChallenge() { expectCode(.challengeInvalid) { $0.clientData.challenge = [1] } }
    @Test func wrongType() { expectCode(.invalidRequest) { $0.clientData.type = "webauthn.create" } }
    @Test func wrongOrigin() { expectCode(.originNotAllowed) { $0.clientData.origin = "http://example.com" } }
    @Test func wrongRpIdHash() { expectCode(.rpIdMismatch) { $0.rpId = "example.org" } }
    // §7.2 step 14, the same rule as registration's: crossOrigin without topOrigin is refused
    // when only listed top origins may embed the ceremony; a listed one passes.
    @Test func crossOriginWithoutTopOriginRefusedUnderEmbeddingAllowlist() throws {
        let policy = Fixture.policy { $0.crossOrigin = .allow(topOrigins: ["https://shop.example"]) }
        expectCode(.originNotAllowed, policy: policy) { $0.clientData.crossOrigin = true; $0.clientData.topOrigin = nil }
        expectCode(.originNotAllowed, policy: policy) { $0.clientData.crossOrigin = true; $0.clientData.topOrigin = "https://evil.example" }
        var b = builder()
        b.clientData.crossOrigin = true
        b.clientData.topOrigin = "https://shop.example"
        _ = try Fixture.authenticate(b, policy: policy)
    }
    @Test func userPresenceRequired() { expectCode(.userPresenceRequired) { $0.userPresent = false } }
    @Test func userVerificationRequired() {
        expectCode(.userVerificationRequired, policy: Fixture.policy { $0.userVerification = .required }) { $0.userVerified = false }
    }
    @Test func flippedSignatureBit() { expectCode(.signatureInvalid) { $0.corruptSignature = true } }
    @Test func wrongKey() throws {
        let other = SoftAuthenticator()
        #expect(throws: WebAuthnError(.signatureInvalid, "")) {
            try Fixture.authenticate(builder(), storedKey: other.publicKeyCOSE)
        }
    }

    // WebAuthn L3 §7.2 step 21 and SPEC's sign-count rule.
    @Test func signCountMustIncrease() throws {
        expectCode(.signCountRegression, stored: 10) { $0.signCount = 10 }
        expectCode(.signCountRegression, stored: 10) { $0.signCount = 3 }
        expectCode(.signCountRegression, stored: 10) { $0.signCount = 0 }
        var b = builder()
        b.signCount = 11
        #expect(try Fixture.authenticate(b, stored: 10).newSignCount == 11)
        b.signCount = 5
        #expect(try Fixture.authenticate(b, stored: 0).newSignCount == 5)
    }
    @Test func zeroZeroIsNormal() throws {
        var b = builder()
        b.signCount = 0
        #expect(try Fixture.authenticate(b, stored: 0).cloneWarning == false)
    }
    @Test func flagPolicyAllowsRegressionWithWarning() throws {
        var b = builder()
        b.signCount = 2
        let v = try Fixture.authenticate(b, stored: 9, policy: Fixture.policy { $0.signCountPolicy = .flag })
        #expect(v.cloneWarning)
    }
    @Test func backupEligibilityChangeIsASignal() throws {
        let auth = SoftAuthenticator()
        auth.backupEligible = true
        let key = try COSEKey(bytes: auth.publicKeyCOSE)
        let b = auth.assertion(challenge: Fixture.challenge, rpId: Fixture.rpId, origin: Fixture.origin)
        let v = try AuthenticationVerifier.verify(try ParsedAuthentication(bytes: b.bytes()), expectedChallenge: Fixture.challenge,
                                                  stored: StoredCredential(publicKey: key, signCount: 0, backupEligible: false),
                                                  policy: Fixture.policy())
        #expect(v.backupEligibilityChanged)
    }
}
