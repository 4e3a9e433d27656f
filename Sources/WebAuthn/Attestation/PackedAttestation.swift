import Crypto

/// WebAuthn L3 §8.2: the `packed` format, with a certificate (basic / attCA) or self attestation.
public enum PackedAttestation: AttestationFormat {
    public static let identifier = "packed"

    public static func verify(_ input: AttestationInput, trace: VerificationTrace?) throws(WebAuthnError) -> AttestationResult {
        try input.requireOnly(["alg", "sig", "x5c"])
        let alg = try input.int("alg")
        let sig = try input.bytes("sig")
        let scheme = try attestationSignatureAlgorithm(alg, format: identifier)

        if let x5c = try input.certificates() {
            // Step 2: sig verifies over authenticatorData || clientDataHash with the leaf's key.
            let leaf = x5c[0]
            let key: PublicKey
            do { key = try leaf.publicKey } catch { throw .attestation("packed: attestation certificate key is unsupported") }
            try trace.require("attestation.packed.signature",
                              key.verify(signature: sig, message: input.signedData, algorithm: scheme),
                              WebAuthnError(.attestationInvalid, "packed: signature does not verify with the attestation certificate"))
            try checkCertificateRequirements(leaf, trace: trace)
            try checkAAGUIDExtension(leaf, aaguid: input.credential.aaguid, format: identifier, trace: trace)
            return AttestationResult(type: .basic, trustPath: x5c, algorithm: COSEAlgorithm(alg))
        }

        // Self attestation: alg must be the credential's own, and the credential key signs.
        try trace.require("attestation.packed.selfAlgorithm", alg == input.credential.publicKey.algorithm.rawValue,
                          .attestation("packed: self attestation alg differs from the credential key's"))
        try trace.require("attestation.packed.selfSignature",
                          input.credential.publicKey.verify(signature: sig, over: input.signedData),
                          .attestation("packed: self attestation signature does not verify"))
        return AttestationResult(type: .self, algorithm: COSEAlgorithm(alg))
    }

    /// §8.2.1 packed attestation statement certificate requirements.
    static func checkCertificateRequirements(_ cert: Certificate, trace: VerificationTrace?) throws(WebAuthnError) {
        try trace.require("attestation.packed.certVersion", cert.version == 3, .attestation("packed: certificate is not X.509 v3"))
        let subject = cert.subject
        func has(_ oid: String) -> Bool { subject.contains { $0.oid == oid && !$0.value.isEmpty } }
        // C (2.5.4.6), O (2.5.4.10), OU (2.5.4.11) = "Authenticator Attestation", CN (2.5.4.3).
        try trace.require("attestation.packed.certSubject",
                          has("2.5.4.6") && has("2.5.4.10") && has("2.5.4.3")
                              && subject.contains { $0.oid == "2.5.4.11" && $0.value == "Authenticator Attestation" },
                          .attestation("packed: certificate subject lacks C, O, OU=Authenticator Attestation or CN"))
        try trace.require("attestation.packed.certNotCA", !cert.isCA, .attestation("packed: attestation certificate is a CA"))
    }
}
