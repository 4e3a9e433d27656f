/// The recovery feature's settings, read once from the configuration (SPEC "Recovery and fallback
/// sign-in", "Assurance" → Limits): the service decides with these and nothing else of the
/// deployment's 78 settings.
struct RecoveryPolicy: Sendable {
    /// Mailed codes can go out (SMTP configured, or development mode's logged mail).
    var mailEnabled: Bool
    /// `LATCHKEY_EMAIL_SIGN_IN`: the email sign-in endpoints exist.
    var emailSignIn: Bool
    /// Digits of a mailed one-time code (`LATCHKEY_OTP_DIGITS`).
    var codeDigits: Int
    /// Seconds a mailed code lives (`LATCHKEY_OTP_TTL`).
    var codeTTL: Int
    /// Seconds between a recovery's start and its token's first use (`LATCHKEY_RECOVERY_DELAY`).
    var delaySeconds: Int
    /// Seconds a recovery token lives after the delay (`LATCHKEY_RECOVERY_TOKEN_TTL`).
    var tokenTTL: Int
    /// `LATCHKEY_RECOVERY_REVOKES=all`: completing a recovery revokes the account's other passkeys too.
    var revokesPasskeys: Bool

    init(_ c: Configuration) {
        mailEnabled = c.mailEnabled
        emailSignIn = c.emailSignIn
        codeDigits = c.otpDigits
        codeTTL = c.otpTTL
        delaySeconds = c.recoveryDelaySeconds
        tokenTTL = c.recoveryTokenTTL
        revokesPasskeys = c.recoveryRevokesPasskeys
    }
}
