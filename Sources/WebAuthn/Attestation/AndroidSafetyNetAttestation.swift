// Placeholder until the format is implemented: refuses every statement.
public enum AndroidSafetyNetAttestation: AttestationFormat {
    public static let identifier = "android-safetynet"

    public static func verify(_ input: AttestationInput, trace: VerificationTrace?) throws(WebAuthnError) -> AttestationResult {
        throw .attestation("android-safetynet: not implemented yet")
    }
}
