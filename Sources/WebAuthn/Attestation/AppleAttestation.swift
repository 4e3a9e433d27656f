import Crypto

/// WebAuthn L3 §8.8: Apple anonymous attestation.
public enum AppleAttestation: AttestationFormat {
    public static let identifier = "apple"
    static let nonceExtension = "1.2.840.113635.100.8.2"

    public static func verify(_ input: AttestationInput, trace: VerificationTrace?) throws(WebAuthnError) -> AttestationResult {
        guard let x5c = try input.certificates() else { throw .attestation("apple: attStmt.x5c is missing") }
        let leaf = x5c[0]
        // Steps 2-4: nonce = SHA-256(authenticatorData || clientDataHash) equals the leaf's extension
        // 1.2.840.113635.100.8.2, a SEQUENCE { [1] EXPLICIT OCTET STRING nonce }.
        let nonce = Digest.sha256(input.signedData)
        guard let ext = leaf.extension(nonceExtension) else { throw .attestation("apple: nonce extension is missing") }
        var found: [UInt8]? = nil
        if let seq = try? DERNode.parse(ext.value), seq.isUniversal(DERNode.sequence),
           let tagged = try? seq.children.first, tagged.isContext(1),
           let octets = try? tagged.children.first, octets.isUniversal(DERNode.octetString) {
            found = Array(octets.content)
        }
        try trace.require("attestation.apple.nonce", found == nonce, .attestation("apple: nonce extension does not match"))
        // Step 5: the credential public key equals the leaf certificate's key.
        let certKey: PublicKey
        do { certKey = try leaf.publicKey } catch { throw .attestation("apple: certificate key is unsupported") }
        try trace.require("attestation.apple.publicKey", certKey.isSameKey(as: input.credential.publicKey.publicKey),
                          .attestation("apple: credential key differs from the certificate key"))
        // The chain's own link (leaf by its issuer) holds even when no root is configured.
        try checkLeafSignedByIssuer(x5c, format: identifier, trace: trace)
        return AttestationResult(type: .anonCA, trustPath: x5c)
    }
}
