import Crypto
import JSON
import Testing
import WebAuthn
import WebAuthnTesting

/// WebAuthn L3 §7.1 through `RegistrationCeremony`: options out, state kept, response and state in.
@Suite struct RegistrationCeremonyTests {
    static let existing = [CredentialDescriptor(id: [1, 2, 3, 4], transports: ["internal", "hybrid"]),
                           CredentialDescriptor(id: [5, 6, 7, 8])]

    @Test("Creation options are the JSON PasskeyService renders, member for member, in order")
    func optionsJSON() {
        let (options, _) = CeremonyFixture.registration().begin(user: CeremonyFixture.user, account: "acct-1", purpose: .addToAccount,
                                                                 excludeCredentials: Self.existing)
        #expect(options.json.text == #"""
            {"rp":{"id":"example.com","name":"Example"},\#
            "user":{"id":"qqqqqqqqqqqqqqqqqqqqqg","name":"alice","displayName":"Alice Liddell"},\#
            "challenge":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8",\#
            "pubKeyCredParams":[{"type":"public-key","alg":-7},{"type":"public-key","alg":-8},{"type":"public-key","alg":-35},\#
            {"type":"public-key","alg":-36},{"type":"public-key","alg":-37},{"type":"public-key","alg":-257}],\#
            "timeout":300000,\#
            "excludeCredentials":[{"type":"public-key","id":"AQIDBA","transports":["internal","hybrid"]},{"type":"public-key","id":"BQYHCA"}],\#
            "authenticatorSelection":{"residentKey":"required","requireResidentKey":true,"userVerification":"preferred"},\#
            "attestation":"none","hints":[],"extensions":{"credProps":true}}
            """#)
    }

    @Test("Hints, attestation and user verification are the ceremony's")
    func configuredOptions() {
        let ceremony = RegistrationCeremony(rp: CeremonyFixture.rp, algorithms: [.es256], userVerification: .required,
                                            attestation: .direct, timeoutSeconds: 60, hints: ["client-device"],
                                            environment: CeremonyFixture.environment)
        let json = ceremony.begin(user: CeremonyFixture.user, account: nil, purpose: .signUp, excludeCredentials: []).options.json
        #expect(json["authenticatorSelection"]?["userVerification"] == "required")
        #expect(json["attestation"] == "direct")
        #expect(json["hints"] == ["client-device"])
        #expect(json["timeout"] == 60000)
        #expect(json["excludeCredentials"] == [])
    }

    @Test("The state records what the options set, and has one encoding")
    func stateRoundTrip() throws {
        let (options, state) = CeremonyFixture.registration(userVerification: .required)
            .begin(user: CeremonyFixture.user, account: nil, purpose: .signUp, excludeCredentials: [])
        #expect(state.challenge == options.challenge && state.challenge == CeremonyFixture.challenge)
        #expect(state.rpId == "example.com" && state.userVerification == .required)
        #expect(state.algorithms == CeremonyFixture.algorithms && state.user == CeremonyFixture.user)
        #expect(state.account == nil && state.isNewAccount)
        let bytes = state.encoded()
        #expect(String(decoding: bytes, as: UTF8.self) == #"""
            {"account":null,"algorithms":[-7,-8,-35,-36,-37,-257],"ceremony":"registration",\#
            "challenge":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8","isNewAccount":true,"rpId":"example.com",\#
            "user":{"displayName":"Alice Liddell","id":"qqqqqqqqqqqqqqqqqqqqqg","name":"alice"},"userVerification":"required","v":1}
            """#)
        #expect(try RegistrationState(decoding: bytes) == state)
        let withAccount = CeremonyFixture.registration()
            .begin(user: CeremonyFixture.user, account: "acct-1", purpose: .addToAccount, excludeCredentials: []).state
        #expect(try RegistrationState(decoding: withAccount.encoded()) == withAccount)
    }

    /// A state of the previous code, whose server context was a string (`binding`): the addition's
    /// state with that member added where canonical order puts it.
    static func storedState(binding: String?, isNewAccount: Bool = false) -> [UInt8] {
        let addition = CeremonyFixture.registration()
            .begin(user: CeremonyFixture.user, account: "acct-1", purpose: .addToAccount, excludeCredentials: []).state.encoded()
        var text = String(decoding: addition, as: UTF8.self)
        if let binding { text = text.replacing(#""ceremony":"#, with: #""binding":"\#(binding)","ceremony":"#) }
        if isNewAccount { text = text.replacing(#""isNewAccount":false"#, with: #""isNewAccount":true"#) }
        return Array(text.utf8)
    }

    @Test("Each purpose is spelled as states always were, and comes back typed", arguments: [
        (RegistrationPurpose.signUp, true, nil), (.addToAccount, false, nil), (.held, false, "held"),
        (.recovery(id: "rec_1x2y"), false, "recovery:rec_1x2y"),
    ] as [(RegistrationPurpose, Bool, String?)])
    func purposeInTheState(_ purpose: RegistrationPurpose, _ isNewAccount: Bool, _ binding: String?) throws {
        let state = CeremonyFixture.registration()
            .begin(user: CeremonyFixture.user, account: "acct-1", purpose: purpose, excludeCredentials: []).state
        #expect(state.purpose == purpose && state.isNewAccount == isNewAccount)
        let stored = Self.storedState(binding: binding, isNewAccount: isNewAccount)
        #expect(state.encoded() == stored)
        #expect(try RegistrationState(decoding: stored) == state)
    }

    static let corruptions: [(String, [UInt8])] = {
        let good = CeremonyFixture.registration()
            .begin(user: CeremonyFixture.user, account: "acct-1", purpose: .addToAccount, excludeCredentials: []).state.encoded()
        let other = CeremonyFixture.authentication().begin(allowCredentials: [], account: nil).state.encoded()
        let text = String(decoding: good, as: UTF8.self)
        return CeremonyFixture.corruptions(of: good, otherCeremony: other) + [
            ("a short challenge", Array(text.replacing("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8", with: "AAEC").utf8)),
            ("an unknown user verification", Array(text.replacing("\"preferred\"", with: "\"sometimes\"").utf8)),
            ("a member missing", Array(text.replacing("\"account\":\"acct-1\",", with: "").utf8)),
            // Server contexts the code never wrote: a held sign-up, an unknown or earlier spelling.
            ("a held sign-up", storedState(binding: "held", isNewAccount: true)),
            ("a recovery's sign-up", storedState(binding: "recovery:rec_1", isNewAccount: true)),
            ("an unknown binding", storedState(binding: "approves-from:1764620000")),
            ("a binding that is not a string", Array(text.replacing(#""ceremony":"#, with: #""binding":true,"ceremony":"#).utf8)),
        ]
    }()

    @Test("An unreadable state is challenge_invalid", arguments: corruptions)
    func unreadableState(_ label: String, _ bytes: [UInt8]) {
        #expect(throws: WebAuthnError(.challengeInvalid, ""), "\(label)") { try RegistrationState(decoding: bytes) }
        do { _ = try RegistrationState(decoding: bytes) } catch {
            #expect(error.reason == "the stored ceremony state is unreadable")
        }
    }

    /// begin → the software authenticator answers the options → the state goes through storage → finish.
    func run(ceremony: RegistrationCeremony = CeremonyFixture.registration(), authenticator: SoftAuthenticator = SoftAuthenticator(),
             stateRpId: String? = nil, _ answer: (inout RegistrationBuilder) -> Void = { _ in }) throws(WebAuthnError) -> VerifiedRegistration {
        let (options, state) = ceremony.begin(user: CeremonyFixture.user, account: nil, purpose: .signUp, excludeCredentials: [])
        var builder = authenticator.registration(challenge: options.challenge, rpId: options.rp.id, origin: Fixture.origin)
        answer(&builder)
        var kept = state
        if let stateRpId {
            kept = RegistrationState(challenge: state.challenge, rpId: stateRpId, userVerification: state.userVerification,
                                     algorithms: state.algorithms, user: state.user, account: state.account,
                                     purpose: state.purpose)
        }
        let stored = try RegistrationState(decoding: kept.encoded())
        return try ceremony.finish(try ParsedRegistration(bytes: builder.bytes()), state: stored, policy: Fixture.policy())
    }

    @Test("begin → SoftAuthenticator → finish verifies", arguments: [RegistrationFormat.none, .packedSelf])
    func fullCeremony(_ format: RegistrationFormat) throws {
        let authenticator = SoftAuthenticator()
        let verified = try run(authenticator: authenticator) { $0.format = format }
        #expect(verified.credentialId == authenticator.credentialId)
        #expect(verified.publicKeyBytes == authenticator.publicKeyCOSE)
        #expect(verified.userVerified && verified.origin == Fixture.origin)
    }

    @Test("A response to another challenge is challenge_invalid (§7.1 step 8)")
    func wrongChallenge() {
        #expect(throws: WebAuthnError(.challengeInvalid, "")) { try run { $0.clientData.challenge = Array(repeating: 7, count: 32) } }
    }

    @Test("A state for another rpId is challenge_invalid, even when the response matches it")
    func wrongRpIdInState() {
        #expect(throws: WebAuthnError(.challengeInvalid, "")) {
            try run(stateRpId: "other.example") { $0.rpId = "other.example" }
        }
    }

    @Test("UV required in the state, UV flag absent → user_verification_required (§7.1 step 15)")
    func userVerificationFromState() throws {
        // The policy passed to finish says "preferred"; the state's requirement wins.
        #expect(Fixture.policy().userVerification == .preferred)
        #expect(throws: WebAuthnError(.userVerificationRequired, "")) {
            try run(ceremony: CeremonyFixture.registration(userVerification: .required)) { $0.userVerified = false }
        }
        let verified = try run(ceremony: CeremonyFixture.registration(userVerification: .preferred)) { $0.userVerified = false }
        #expect(!verified.userVerified)
    }

    @Test("An algorithm the options did not offer is algorithm_unsupported (§7.1 step 19)")
    func algorithmFromState() {
        #expect(throws: WebAuthnError(.algorithmUnsupported, "")) {
            try run(ceremony: CeremonyFixture.registration(algorithms: [.es256]), authenticator: SoftAuthenticator(algorithm: .edDSA))
        }
    }
}
