import Crypto
import JSON
import Testing
import WebAuthn
import WebAuthnTesting

/// WebAuthn L3 §7.2 through `AuthenticationCeremony`: options out, state kept, check, then finish
/// once the credential is found.
@Suite struct AuthenticationCeremonyTests {
    static let userHandle = CeremonyFixture.user.id

    @Test("Request options are the JSON PasskeyService renders, member for member, in order")
    func optionsJSON() {
        let allow = [CredentialDescriptor(id: [1, 2, 3, 4], transports: ["internal", "hybrid"]), CredentialDescriptor(id: [5, 6, 7, 8])]
        let (options, _) = CeremonyFixture.authentication().begin(allowCredentials: allow, account: "acct-1")
        #expect(options.json.text == #"""
            {"challenge":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8","timeout":300000,"rpId":"example.com",\#
            "allowCredentials":[{"type":"public-key","id":"AQIDBA","transports":["internal","hybrid"]},{"type":"public-key","id":"BQYHCA"}],\#
            "userVerification":"preferred","hints":[]}
            """#)
        let discoverable = CeremonyFixture.authentication().begin(allowCredentials: [], account: nil).options
        #expect(discoverable.json.text == #"""
            {"challenge":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8","timeout":300000,"rpId":"example.com",\#
            "allowCredentials":[],"userVerification":"preferred","hints":[]}
            """#)
    }

    @Test("Step-up: the given challenge bytes, UV required, only the listed passkeys")
    func stepUpOptions() throws {
        let challenge = [UInt8](repeating: 0x5A, count: 138)
        let ceremony = AuthenticationCeremony(rpId: Fixture.rpId, userVerification: .required, timeoutSeconds: 120,
                                              environment: CeremonyFixture.environment)
        let (options, state) = ceremony.begin(allowCredentials: [CredentialDescriptor(id: [1, 2, 3, 4])], account: "acct-1",
                                              challenge: challenge, restrictToAllowed: true)
        #expect(options.challenge == challenge && state.challenge == challenge)
        #expect(options.json.text == #"""
            {"challenge":"\#(Base64URL.encode(challenge))","timeout":120000,"rpId":"example.com",\#
            "allowCredentials":[{"type":"public-key","id":"AQIDBA"}],"userVerification":"required","hints":[]}
            """#)
        #expect(state.allowedCredentials == [[1, 2, 3, 4]] && state.userVerification == .required && state.account == "acct-1")
    }

    @Test("The state records what the options set, and has one encoding")
    func stateRoundTrip() throws {
        let (_, state) = CeremonyFixture.authentication().begin(allowCredentials: [CredentialDescriptor(id: [1, 2, 3, 4])],
                                                               account: "acct-1", restrictToAllowed: true)
        let bytes = state.encoded()
        #expect(String(decoding: bytes, as: UTF8.self) == #"""
            {"account":"acct-1","allowedCredentials":["AQIDBA"],"ceremony":"authentication",\#
            "challenge":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8","rpId":"example.com","userVerification":"preferred","v":1}
            """#)
        #expect(try AuthenticationState(decoding: bytes) == state)
        // Discoverable, no account: both nil, and nil survives storage.
        let open = CeremonyFixture.authentication().begin(allowCredentials: [CredentialDescriptor(id: [1])], account: nil).state
        #expect(open.account == nil && open.allowedCredentials == nil)
        #expect(try AuthenticationState(decoding: open.encoded()) == open)
    }

    /// `encoded()` writes the state directly; it must be byte for byte the generic canonical
    /// encoder's output, for every shape a state can take (and strings that need escaping).
    @Test("The direct state encoding is the canonical encoder's", arguments: [nil, "acct-1", "a\"b\\c\u{1}é😀"] as [String?])
    func directEncodingIsTheReference(account: String?) throws {
        for allowed in [nil, [], [[1]], [[1, 2, 3, 4], Array(repeating: 0xFF, count: 64), [0]]] as [[[UInt8]]?] {
            for uv in [VerificationPolicy.UserVerification.required, .preferred, .discouraged] {
                for rpId in ["example.com", "bücher.example"] {
                    let state = AuthenticationState(challenge: Array(0..<32), rpId: rpId, userVerification: uv, account: account,
                                                    allowedCredentials: allowed)
                    #expect(state.encoded() == state.referenceEncoding())
                    #expect(try AuthenticationState(decoding: state.encoded()) == state)
                    // The in-place read handles every state whose strings need no escape; the
                    // others are left to the generic decode (which the line above just used).
                    let inPlace = AuthenticationState.decodingInPlace(state.encoded())
                    #expect(account?.contains(where: { $0 == "\"" || $0 == "\\" || $0.asciiValue.map { $0 < 0x20 } == true }) == true
                            ? inPlace == nil : inPlace == state)
                }
            }
        }
    }

    /// Whatever the in-place read accepts, the generic decode accepts as the same state: over
    /// every corruption of a good state, and every one-byte change of it.
    @Test("The in-place state read never accepts what the generic decode refuses")
    func inPlaceReadIsNoLooser() throws {
        let good = CeremonyFixture.authentication().begin(allowCredentials: [CredentialDescriptor(id: [1, 2, 3, 4])],
                                                          account: "acct-1", restrictToAllowed: true).state.encoded()
        var candidates = Self.corruptions.map(\.1)
        for position in good.indices {
            for replacement: UInt8 in [0x00, 0x22, 0x5C, 0x41, 0x7B, 0xFF] where good[position] != replacement {
                var changed = good
                changed[position] = replacement
                candidates.append(changed)
            }
            candidates.append(Array(good[..<position]))
        }
        for bytes in candidates {
            guard let inPlace = AuthenticationState.decodingInPlace(bytes), inPlace.encoded() == bytes else { continue }
            #expect(try AuthenticationState(decodingGenerically: bytes) == inPlace)
        }
    }

    static let corruptions: [(String, [UInt8])] = {
        let good = CeremonyFixture.authentication().begin(allowCredentials: [CredentialDescriptor(id: [1, 2, 3, 4])],
                                                          account: "acct-1", restrictToAllowed: true).state.encoded()
        let other = CeremonyFixture.registration()
            .begin(user: CeremonyFixture.user, account: nil, purpose: .signUp, excludeCredentials: []).state.encoded()
        let text = String(decoding: good, as: UTF8.self)
        return CeremonyFixture.corruptions(of: good, otherCeremony: other) + [
            ("allowedCredentials not base64url", Array(text.replacing("[\"AQIDBA\"]", with: "[\"***\"]").utf8)),
            ("allowedCredentials not an array", Array(text.replacing("[\"AQIDBA\"]", with: "\"AQIDBA\"").utf8)),
        ]
    }()

    @Test("An unreadable state is challenge_invalid", arguments: corruptions)
    func unreadableState(_ label: String, _ bytes: [UInt8]) {
        #expect(throws: WebAuthnError(.challengeInvalid, ""), "\(label)") { try AuthenticationState(decoding: bytes) }
    }

    /// begin → the software authenticator signs → the state goes through storage → check → finish.
    func run(ceremony: AuthenticationCeremony = CeremonyFixture.authentication(), allow: [CredentialDescriptor] = [],
             restrictToAllowed: Bool = false, authenticator: SoftAuthenticator = SoftAuthenticator(),
             userHandle: [UInt8] = userHandle, stateRpId: String? = nil, account: String? = "acct-1",
             _ answer: (inout AssertionBuilder) -> Void = { _ in }) throws(WebAuthnError) -> VerifiedAuthentication {
        let (options, state) = ceremony.begin(allowCredentials: allow, account: account, restrictToAllowed: restrictToAllowed)
        var builder = authenticator.assertion(challenge: options.challenge, rpId: options.rpId, origin: Fixture.origin)
        builder.userHandle = Self.userHandle
        answer(&builder)
        var kept = state
        if let stateRpId {
            kept = AuthenticationState(challenge: state.challenge, rpId: stateRpId, userVerification: state.userVerification,
                                       account: state.account, allowedCredentials: state.allowedCredentials)
        }
        let stored = try AuthenticationState(decoding: kept.encoded())
        let checked = try ceremony.check(try ParsedAuthentication(bytes: builder.bytes()), state: stored, policy: Fixture.policy())
        let credential = StoredCredential(publicKey: try COSEKey(bytes: authenticator.publicKeyCOSE), signCount: 0)
        return try ceremony.finish(checked, state: stored, credential: credential, userHandle: userHandle)
    }

    @Test("begin → SoftAuthenticator → check → finish verifies")
    func fullCeremony() throws {
        let authenticator = SoftAuthenticator(signCount: 4)
        let verified = try run(authenticator: authenticator)
        #expect(verified.credentialId == authenticator.credentialId && verified.newSignCount == 5)
        #expect(verified.userHandle == Self.userHandle && verified.userVerified)
        // Restricted to a list that holds the credential, and with no user handle in the response.
        let listed = SoftAuthenticator()
        _ = try run(allow: [CredentialDescriptor(id: [9, 9]), CredentialDescriptor(id: listed.credentialId)], restrictToAllowed: true,
                    authenticator: listed) { $0.userHandle = nil }
    }

    @Test("A response to another challenge is challenge_invalid (§7.2 step 12)")
    func wrongChallenge() {
        #expect(throws: WebAuthnError(.challengeInvalid, "")) { try run { $0.clientData.challenge = Array(repeating: 7, count: 32) } }
    }

    @Test("A state for another rpId is challenge_invalid, even when the response matches it")
    func wrongRpIdInState() {
        #expect(throws: WebAuthnError(.challengeInvalid, "")) {
            try run(stateRpId: "other.example") { $0.rpId = "other.example" }
        }
    }

    @Test("UV required in the state, UV flag absent → user_verification_required (§7.2 step 17)")
    func userVerificationFromState() throws {
        #expect(throws: WebAuthnError(.userVerificationRequired, "")) {
            try run(ceremony: CeremonyFixture.authentication(userVerification: .required)) { $0.userVerified = false }
        }
        #expect(try !run { $0.userVerified = false }.userVerified)
    }

    @Test("A user handle that is not the account's is credential_unknown (§7.2 step 6)")
    func userHandleMismatch() {
        #expect(throws: WebAuthnError(.credentialUnknown, "")) { try run(userHandle: [UInt8](repeating: 0xBB, count: 16)) }
        #expect(throws: WebAuthnError(.credentialUnknown, "")) { try run { $0.userHandle = [UInt8](repeating: 0xAA, count: 15) } }
    }

    @Test("Discoverable (no account identified): an assertion without userHandle is invalid_request (§7.2 step 6)")
    func discoverableNeedsUserHandle() throws {
        #expect(throws: WebAuthnError(.invalidRequest, "")) { try run(account: nil) { $0.userHandle = nil } }
        // An empty handle is parsed as none: refused the same way.
        #expect(throws: WebAuthnError(.invalidRequest, "")) { try run(account: nil) { $0.userHandle = [] } }
        // With the account's handle it verifies; another account's handle is still credential_unknown.
        #expect(try run(account: nil).userHandle == Self.userHandle)
        #expect(throws: WebAuthnError(.credentialUnknown, "")) {
            try run(account: nil) { $0.userHandle = [UInt8](repeating: 0xBB, count: 16) }
        }
        // Username-first (the user was identified): the handle stays optional.
        _ = try run { $0.userHandle = nil }
    }

    @Test("A credential outside allowedCredentials is credential_unknown (§7.2 step 5)")
    func credentialNotAllowed() {
        #expect(throws: WebAuthnError(.credentialUnknown, "")) {
            try run(allow: [CredentialDescriptor(id: [1, 2, 3, 4])], restrictToAllowed: true)
        }
    }

    @Test("Without restrictToAllowed, allowCredentials only guides the client")
    func allowListNotEnforcedWhenOpen() throws {
        _ = try run(allow: [CredentialDescriptor(id: [1, 2, 3, 4])], restrictToAllowed: false)
    }

    @Test("finish with another ceremony's state than the one checked is challenge_invalid")
    func finishWithAnotherState() throws {
        let authenticator = SoftAuthenticator()
        let ceremony = CeremonyFixture.authentication()
        let (options, state) = ceremony.begin(allowCredentials: [], account: nil)
        let parsed = try ParsedAuthentication(bytes: authenticator.assertion(challenge: options.challenge, rpId: Fixture.rpId,
                                                                             origin: Fixture.origin).bytes())
        let checked = try ceremony.check(parsed, state: state, policy: Fixture.policy())
        let other = AuthenticationState(challenge: [UInt8](repeating: 3, count: 32), rpId: Fixture.rpId, userVerification: .preferred,
                                        account: nil, allowedCredentials: nil)
        let credential = StoredCredential(publicKey: try COSEKey(bytes: authenticator.publicKeyCOSE), signCount: 0)
        #expect(throws: WebAuthnError(.challengeInvalid, "")) {
            try ceremony.finish(checked, state: other, credential: credential, userHandle: Self.userHandle)
        }
    }

    @Test("A wrong signature is still signature_invalid (§7.2 step 20)")
    func wrongSignature() {
        #expect(throws: WebAuthnError(.signatureInvalid, "")) { try run { $0.corruptSignature = true } }
    }
}
