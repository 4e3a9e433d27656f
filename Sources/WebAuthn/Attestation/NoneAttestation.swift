import CBOR

/// WebAuthn L3 §8.7: the `none` format carries an empty statement.
public enum NoneAttestation: AttestationFormat {
    public static let identifier = "none"

    public static func verify(_ input: AttestationInput, trace: VerificationTrace?) throws(WebAuthnError) -> AttestationResult {
        try trace.require("attestation.none.emptyStatement", input.statement.mapValue?.isEmpty == true,
                          .attestation("none: attStmt must be empty"))
        return AttestationResult(type: .none)
    }
}
