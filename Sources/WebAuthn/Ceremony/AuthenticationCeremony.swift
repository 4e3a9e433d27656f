import Crypto
import JSON

/// Authentication (WebAuthn L3 §7.2) without state or I/O, in SPEC's order: `begin` returns the
/// request options and the state; `check` runs the steps that need no stored credential; the
/// server then finds the credential by `rawId`; `finish` runs the credential-dependent steps.
public struct AuthenticationCeremony: Sendable {
    public let rpId: String
    public let userVerification: VerificationPolicy.UserVerification
    public let timeoutSeconds: Int
    public let hints: [String]
    public let environment: CeremonyEnvironment

    public init(rpId: String, userVerification: VerificationPolicy.UserVerification, timeoutSeconds: Int,
                hints: [String] = [], environment: CeremonyEnvironment = .system) {
        self.rpId = rpId
        self.userVerification = userVerification
        self.timeoutSeconds = timeoutSeconds
        self.hints = hints
        self.environment = environment
    }

    /// Options and state. `challenge` given: those bytes (a passkey step-up signs the step-up
    /// challenge itself); else 32 fresh bytes from `environment.random`. `restrictToAllowed`: only
    /// the credentials in `allowCredentials` may answer (§7.2 step 5), as step-up requires; else any
    /// credential of the account (the list may be a decoy for an unknown username).
    /// `userVerification` / `extensions`: this one ceremony's requirement and client extension inputs
    /// instead of the defaults (the FIDO conformance profile's options request); the state keeps the
    /// requirement the options state.
    public func begin(allowCredentials: [CredentialDescriptor], account: String?, challenge: [UInt8]? = nil,
                      restrictToAllowed: Bool = false, userVerification: VerificationPolicy.UserVerification? = nil,
                      extensions: JSONValue? = nil) -> (options: RequestOptions, state: AuthenticationState) {
        if let challenge { precondition(challenge.count >= 16, "a WebAuthn challenge is at least 16 bytes (§13.4.3)") }
        let challenge = challenge ?? environment.challenge()
        let userVerification = userVerification ?? self.userVerification
        let options = RequestOptions(challenge: challenge, timeoutMilliseconds: timeoutSeconds * 1000, rpId: rpId,
                                     allowCredentials: allowCredentials, userVerification: userVerification, hints: hints,
                                     extensions: extensions)
        let state = AuthenticationState(challenge: challenge, rpId: rpId, userVerification: userVerification, account: account,
                                        allowedCredentials: restrictToAllowed ? allowCredentials.map(\.id) : nil)
        return (options, state)
    }

    /// §7.2 steps 11-18 (`AuthenticationVerifier.checkCeremony`) with the state's challenge
    /// (step 12) and user verification requirement (step 17); a state for another RP ID
    /// (step 15) is `challenge_invalid`. `policy` carries the origins, cross-origin rule, AppID and
    /// sign-count policy.
    public func check(_ parsed: ParsedAuthentication, state: AuthenticationState, policy: VerificationPolicy,
                      trace: VerificationTrace? = nil) throws(WebAuthnError) -> CeremonyCheckedAuthentication {
        guard state.rpId == policy.rpId else {
            throw WebAuthnError(.challengeInvalid, "the ceremony was begun for another relying party")
        }
        var policy = policy
        policy.userVerification = state.userVerification
        policy.acceptRegistrationWithoutUserPresence = false
        return try AuthenticationVerifier.checkCeremony(parsed, expectedChallenge: state.challenge, policy: policy, trace: trace)
    }

    /// The rest, once the server found `credential` by the response's `rawId` and the account that
    /// owns it (whose user handle is `userHandle`): §7.2 steps 5 and 6, then the signature
    /// (step 20) and the counter (step 21).
    public func finish(_ checked: CeremonyCheckedAuthentication, state: AuthenticationState, credential: StoredCredential,
                       userHandle: [UInt8], trace: VerificationTrace? = nil) throws(WebAuthnError) -> VerifiedAuthentication {
        let response = checked.parsed.response
        // `checked` must come from `check` with this very state.
        guard constantTimeEquals(checked.parsed.clientData.challenge, state.challenge), checked.policy.rpId == state.rpId else {
            throw WebAuthnError(.challengeInvalid, "the assertion was checked against another ceremony")
        }
        // Step 5: when the options listed the credentials that may answer, this must be one of them.
        if let allowed = state.allowedCredentials {
            var listed = false
            for id in allowed where constantTimeEquals(id, response.rawId) { listed = true }
            try trace.require("credential.allowed", listed, WebAuthnError(.credentialUnknown, "this passkey was not offered"))
        }
        // Step 6: if the user was not identified before the ceremony (discoverable: the state names
        // no account), response.userHandle must be present — it is what identifies the account, and
        // it is then a required member, so its absence is invalid_request (SPEC), not
        // credential_unknown (whose signalUnknownCredential would tell the provider to drop a passkey
        // that exists). An empty handle is parsed as none.
        if state.account == nil, response.userHandle == nil {
            try trace.fail("credential.userHandle", .invalid("userHandle is required when no user was identified before the ceremony"))
        }
        // The credential's owner is the account identified; a user handle, when the authenticator
        // returns one, must be that account's.
        if let handle = response.userHandle {
            try trace.require("credential.userHandle", constantTimeEquals(handle, userHandle),
                              WebAuthnError(.credentialUnknown, "the user handle does not match the passkey"))
        }
        // Steps 20-21.
        return try AuthenticationVerifier.verify(checked, stored: credential, trace: trace)
    }
}
