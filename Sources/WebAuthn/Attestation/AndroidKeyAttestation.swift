// Placeholder until the format is implemented: refuses every statement.
public enum AndroidKeyAttestation: AttestationFormat {
    public static let identifier = "android-key"

    public static func verify(_ input: AttestationInput, trace: VerificationTrace?) throws(WebAuthnError) -> AttestationResult {
        throw .attestation("android-key: not implemented yet")
    }
}
