// Placeholder until the format is implemented: refuses every statement.
public enum TPMAttestation: AttestationFormat {
    public static let identifier = "tpm"

    public static func verify(_ input: AttestationInput, trace: VerificationTrace?) throws(WebAuthnError) -> AttestationResult {
        throw .attestation("tpm: not implemented yet")
    }
}
