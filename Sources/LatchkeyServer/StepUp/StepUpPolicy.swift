import WebAuthn

/// The step-up's settings, read once from the configuration (SPEC "Step-up"): the service decides
/// with these and nothing else of the deployment's settings.
struct StepUpPolicy: Sendable {
    /// Seconds a step-up challenge lives (`LATCHKEY_STEP_UP_TTL`); the passkey options' `timeout`.
    var challengeTTL: Int
    /// Seconds a step-up token lives at most (`LATCHKEY_STEP_UP_TOKEN_TTL`, never above the challenge's).
    var tokenTTL: Int
    /// `LATCHKEY_HINTS`: the passkey options' `hints`.
    var hints: [String]
    /// §7.2 for a passkey's approval: the deployment's checks, with user verification required.
    var passkeyVerification: VerificationPolicy

    init(_ c: Configuration) {
        challengeTTL = c.stepUpTTL
        tokenTTL = c.stepUpTokenTTL
        hints = c.hints
        var verification = CeremonyPolicy(c).verification(rpId: c.rpId)
        verification.userVerification = .required
        passkeyVerification = verification
    }
}
