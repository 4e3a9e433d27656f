import Crypto

/// WebAuthn L3 §8.6: the `fido-u2f` format (U2F authenticators through CTAP1).
public enum FIDOU2FAttestation: AttestationFormat {
    public static let identifier = "fido-u2f"

    public static func verify(_ input: AttestationInput, trace: VerificationTrace?) throws(WebAuthnError) -> AttestationResult {
        try input.requireOnly(["sig", "x5c"])
        let sig = try input.bytes("sig")
        guard let x5c = try input.certificates() else { throw .attestation("fido-u2f: attStmt.x5c is missing") }
        // Step 2: exactly one certificate whose key is EC P-256.
        try trace.require("attestation.fido-u2f.singleCertificate", x5c.count == 1,
                          .attestation("fido-u2f: x5c must hold exactly one certificate"))
        let certKey: PublicKey
        do { certKey = try x5c[0].publicKey } catch { throw .attestation("fido-u2f: certificate key is unsupported") }
        try trace.require("attestation.fido-u2f.certificateKeyP256", certKey.type == .ec(.p256),
                          .attestation("fido-u2f: certificate key is not P-256"))
        // Steps 3-4: the credential key must be an uncompressed P-256 point.
        let credentialKey = input.credential.publicKey
        guard credentialKey.algorithm == .es256, let point = credentialKey.publicKey.x963Point, point.count == 65 else {
            throw .attestation("fido-u2f: credential key is not ES256 P-256")
        }
        // Step 5: verificationData = 0x00 || rpIdHash || clientDataHash || credentialId || publicKeyU2F.
        let data: [UInt8] = [0x00] + input.authenticatorData.rpIdHash + input.clientDataHash + input.credential.credentialId + point
        try trace.require("attestation.fido-u2f.signature",
                          certKey.verify(signature: sig, message: data, algorithm: .ecdsa(.sha256)),
                          .attestation("fido-u2f: signature does not verify"))
        return AttestationResult(type: .basic, trustPath: x5c, algorithm: .es256)
    }
}
