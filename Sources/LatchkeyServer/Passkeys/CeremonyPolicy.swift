import WebAuthn

/// The passkey ceremonies' settings, read once from the configuration (SPEC "Ceremonies",
/// "Assurance"): registration, sign-in and the passkey list decide with these and nothing else of
/// the deployment's settings.
struct CeremonyPolicy: Sendable {
    /// `LATCHKEY_USER_VERIFICATION`: what options ask for and verification requires.
    var userVerification: VerificationPolicy.UserVerification
    /// `LATCHKEY_ATTESTATION`: the attestation registration options ask for.
    var attestation: AttestationConveyance
    /// `LATCHKEY_HINTS`: the options' `hints`.
    var hints: [String]
    /// Seconds a sealed challenge lives (`LATCHKEY_CHALLENGE_TTL`); the options' `timeout`.
    var challengeTTL: Int
    /// `LATCHKEY_MAX_PASSKEYS`: live passkeys an account may hold.
    var maxPasskeys: Int
    /// `LATCHKEY_SIGN_COUNT_POLICY`: a counter that went back is refused or flagged (§7.2 step 22).
    var signCountPolicy: VerificationPolicy.SignCountPolicy
    /// `LATCHKEY_EMBEDDING_ORIGINS`: top-level origins that may embed a ceremony (crossOrigin).
    var embeddingOrigins: [String]
    /// `LATCHKEY_CONFORMANCE`: the conformance profile's endpoints exist (their assertions may lack UP).
    var conformance: Bool
    /// Seconds a passkey registered during a recovery is held (`LATCHKEY_RECOVERY_DELAY`).
    var recoveryDelaySeconds: Int
    /// Mailed codes can go out, so a verified address is a way in (SPEC "Assurance", the last way in).
    var mailEnabled: Bool

    init(_ c: Configuration) {
        userVerification = c.userVerification
        attestation = c.attestation
        hints = c.hints
        challengeTTL = c.challengeTTL
        maxPasskeys = c.maxPasskeys
        signCountPolicy = c.signCountPolicy
        embeddingOrigins = c.embeddingOrigins
        conformance = c.conformance
        recoveryDelaySeconds = c.recoveryDelaySeconds
        mailEnabled = c.mailEnabled
    }

    /// The §7.1/§7.2 policy for `rpId` without the allowlist (which changes at run time; each
    /// ceremony copies this and sets `origins` from the OriginCache).
    func verification(rpId: String) -> VerificationPolicy {
        var p = VerificationPolicy(rpId: rpId, origins: OriginPolicy([String]()))
        p.userVerification = userVerification
        p.signCountPolicy = signCountPolicy
        if !embeddingOrigins.isEmpty { p.crossOrigin = .allow(topOrigins: Set(embeddingOrigins)) }
        return p
    }
}
