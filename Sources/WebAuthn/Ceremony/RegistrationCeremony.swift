import JSON

/// Registration (WebAuthn L3 §7.1) without state or I/O: `begin` returns the creation options and
/// the state the server keeps; `finish` takes the parsed response and that state back.
public struct RegistrationCeremony: Sendable {
    public let rp: RelyingParty
    /// `pubKeyCredParams`, in order of preference; verification refuses any other algorithm.
    public let algorithms: [COSEAlgorithm]
    public let userVerification: VerificationPolicy.UserVerification
    public let attestation: AttestationConveyance
    public let timeoutSeconds: Int
    public let hints: [String]
    public let environment: CeremonyEnvironment

    public init(rp: RelyingParty, algorithms: [COSEAlgorithm], userVerification: VerificationPolicy.UserVerification,
                attestation: AttestationConveyance, timeoutSeconds: Int, hints: [String] = [],
                environment: CeremonyEnvironment = .system) {
        self.rp = rp
        self.algorithms = algorithms
        self.userVerification = userVerification
        self.attestation = attestation
        self.timeoutSeconds = timeoutSeconds
        self.hints = hints
        self.environment = environment
    }

    /// Options for `user` with `challenge` (a server that seals its state into the challenge), else
    /// a fresh 32-byte one from `environment.random`, and the state
    /// that `finish` checks against. `excludeCredentials`: the account's existing passkeys, so an
    /// authenticator that already holds one says so instead of making a second. `request`: what this
    /// one ceremony asks for instead of the defaults (the FIDO conformance profile's options request);
    /// the state keeps whatever the options say, so `finish` checks exactly that.
    /// `conditional`: options for conditional create (the one registration that may lack UP);
    /// `purpose`: what the server begins it for, returned in the state.
    public func begin(user: UserEntity, account: String?, purpose: RegistrationPurpose, excludeCredentials: [CredentialDescriptor],
                      request: Request = Request(), conditional: Bool = false,
                      challenge: [UInt8]? = nil) -> (options: CreationOptions, state: RegistrationState) {
        if let challenge { precondition(challenge.count >= 16, "a WebAuthn challenge is at least 16 bytes (§13.4.3)") }
        let challenge = challenge ?? environment.challenge()
        let algorithms = request.algorithms ?? algorithms
        let userVerification = request.userVerification ?? userVerification
        var extensions = CreationOptions.defaultExtensions
        if case .object(let asked)? = request.extensions, case .object(var members) = extensions {
            for member in asked where !members.contains(where: { $0.key == member.key }) { members.append(member) }
            extensions = .object(members)
        }
        let options = CreationOptions(rp: rp, user: user, challenge: challenge, algorithms: algorithms,
                                      timeoutMilliseconds: timeoutSeconds * 1000, excludeCredentials: excludeCredentials,
                                      userVerification: userVerification, attestation: request.attestation ?? attestation, hints: hints,
                                      authenticatorAttachment: request.authenticatorAttachment, extensions: extensions)
        let state = RegistrationState(challenge: challenge, rpId: rp.id, userVerification: userVerification,
                                      algorithms: algorithms, user: user, account: account, purpose: purpose,
                                      conditional: conditional)
        return (options, state)
    }

    /// One ceremony's departures from the defaults; nil members keep them.
    public struct Request: Sendable {
        public var algorithms: [COSEAlgorithm]?
        public var userVerification: VerificationPolicy.UserVerification?
        public var attestation: AttestationConveyance?
        public var authenticatorAttachment: String?
        /// Client extension inputs to add (an object); `credProps` is always asked for.
        public var extensions: JSONValue?

        public init(algorithms: [COSEAlgorithm]? = nil, userVerification: VerificationPolicy.UserVerification? = nil,
                    attestation: AttestationConveyance? = nil, authenticatorAttachment: String? = nil, extensions: JSONValue? = nil) {
            self.algorithms = algorithms
            self.userVerification = userVerification
            self.attestation = attestation
            self.authenticatorAttachment = authenticatorAttachment
            self.extensions = extensions
        }
    }

    /// §7.1 steps 5-25 (`RegistrationVerifier.verify`) against what the options set, taken from
    /// `state`: the challenge (step 8), the RP ID (step 13), the user verification requirement
    /// (step 15) and the offered algorithms (step 19). `policy` carries the rest: the origin
    /// allowlist, the cross-origin rule, trust anchors and the clock. Step 26 (the credential is
    /// not registered yet) is the storage layer's.
    public func finish(_ parsed: ParsedRegistration, state: RegistrationState, policy: VerificationPolicy,
                       trace: VerificationTrace? = nil) throws(WebAuthnError) -> VerifiedRegistration {
        // A state made for another RP ID is another deployment's ceremony (§7.1 step 13 would
        // compare against the wrong hash).
        guard state.rpId == policy.rpId else {
            throw WebAuthnError(.challengeInvalid, "the ceremony was begun for another relying party")
        }
        var policy = policy
        policy.userVerification = state.userVerification
        policy.allowedAlgorithms = state.algorithms
        // WebAuthn L3 §7.1 step 14 is relaxed only for a conditional create (§5.1.3: the user was
        // not asked); every other ceremony keeps UP required.
        policy.acceptRegistrationWithoutUserPresence = state.conditional
        return try RegistrationVerifier.verify(parsed, expectedChallenge: state.challenge, policy: policy, trace: trace)
    }
}
