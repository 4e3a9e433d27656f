import JSON

/// `acr` / `amr` (RFC 8176) of Latchkey's tokens by how the user authenticated, in one place: access
/// tokens carry the passkey and email-code ones, step-up tokens any of them (SPEC "Trust chain": the response tells
/// the truth — `hwk` only for a key whose attestation proved hardware).
struct AuthenticationClaims {
    let acr: String
    let amr: [JSONValue]
    static let passkeyVerified = AuthenticationClaims(acr: "urn:latchkey:acr:passkey-uv", amr: ["pop", "user", "mfa"])
    static let passkey = AuthenticationClaims(acr: "urn:latchkey:acr:passkey", amr: ["pop"])
    static let deviceKeyAttested = AuthenticationClaims(acr: "urn:latchkey:acr:device-key-attested", amr: ["hwk", "pop"])
    static let deviceKey = AuthenticationClaims(acr: "urn:latchkey:acr:device-key", amr: ["swk", "pop"])
    /// SPEC "Email sign-in": a session a mailed one-time code began.
    static let emailOTP = AuthenticationClaims(acr: "urn:latchkey:acr:email-otp", amr: ["otp"])
}
