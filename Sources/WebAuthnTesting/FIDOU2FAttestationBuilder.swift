import CBOR
import Crypto

/// `fido-u2f` (WebAuthn L3 §8.6): a U2F authenticator's attestation. The attestation certificate
/// holds a P-256 key; sig covers 0x00 || rpIdHash || clientDataHash || credentialId || publicKeyU2F.
/// The authenticator must be ES256 with an all-zero AAGUID, as U2F authenticators are.
public struct FIDOU2FAttestationBuilder: AttestationStatementBuilder {
    public var identity: AttestationIdentity
    public var corruptSignature = false
    public let format = "fido-u2f"

    public init(identity: AttestationIdentity) { self.identity = identity }

    /// A U2F attestation certificate (no WebAuthn subject requirements, no AAGUID extension) under `ca`.
    public static func identity(under ca: TestCertificateAuthority, commonName: String = "Latchkey Test U2F Attestation") -> AttestationIdentity {
        let (key, cert) = ca.leaf(subject: [("C", "US"), ("O", "Latchkey Test"), ("CN", commonName)])
        return AttestationIdentity(key: key, chain: [cert])
    }

    public func statement(authenticatorData: [UInt8], clientDataHash: [UInt8], authenticator: SoftAuthenticator) -> [CBORPair] {
        let rpIdHash = Array(authenticatorData[0..<32])
        let point = authenticator.privateKey.publicKey.x963Point ?? []
        var sig = try! identity.key.sign([0x00] + rpIdHash + clientDataHash + authenticator.credentialId + point,
                                         algorithm: .ecdsa(.sha256))
        if corruptSignature { sig[sig.count / 2] ^= 0x01 }
        return [CBORPair(.text("sig"), .bytes(sig)), CBORPair(.text("x5c"), .array(identity.chain.map { .bytes($0.der) }))]
    }
}
