import CBOR
import Crypto
import WebAuthn

/// `tpm` (WebAuthn L3 §8.3): a TPM certifies the credential key. pubArea (TPMT_PUBLIC) describes
/// the authenticator's RSA credential key, certInfo (TPMS_ATTEST from TPM2_Certify) names it and
/// carries the hash of authenticatorData || clientDataHash, and the AIK signs certInfo. The AIK
/// certificate meets §8.3.1: empty subject, critical SAN with the TPM device attributes, EKU
/// tcg-kp-AIKCertificate, not a CA, and the AAGUID extension. Layouts: TPM 2.0 Part 2 §10.12, §12.2.
public struct TPMAttestationBuilder: AttestationStatementBuilder {
    public let aikKey: PrivateKey
    public let aikCertificate: Certificate
    /// x5c after the AIK certificate.
    public var rest: [Certificate]
    /// `alg`: RS256 (extraData SHA-256) or RS1 (SHA-1).
    public var algorithm: COSEAlgorithm = .rs256
    /// pubArea.nameAlg (TPM_ALG_SHA256 0x000B, TPM_ALG_SHA1 0x0004); attested.name is hashed with it.
    public var nameAlg: UInt16 = 0x000B
    public var magic: UInt32 = 0xFF54_4347
    public var extraDataOverride: [UInt8]? = nil
    /// pubArea.unique from this key's modulus instead of the credential's.
    public var uniqueKey: PrivateKey? = nil
    /// The AIK certificate after the CA certificate (incorrect order).
    public var reverseChain = false
    public let format = "tpm"

    /// An AIK and its certificate under `ca` for an authenticator with `aaguid`.
    public init(ca: TestCertificateAuthority, aaguid: [UInt8]) {
        let san = DERWriter.sequence(DERWriter.tlv([0xA4], DERWriter.sequence(
            DERWriter.set(DERWriter.sequence(DERWriter.oid("2.23.133.2.1"), DERWriter.utf8String("id:4D534654"))),
            DERWriter.set(DERWriter.sequence(DERWriter.oid("2.23.133.2.2"), DERWriter.utf8String("Latchkey Test TPM"))),
            DERWriter.set(DERWriter.sequence(DERWriter.oid("2.23.133.2.3"), DERWriter.utf8String("id:13"))))))
        let extensions = [
            Certificate.Extension(oid: "2.5.29.17", critical: true, derValue: san),
            Certificate.Extension(oid: "2.5.29.37", critical: false, derValue: DERWriter.sequence(DERWriter.oid("2.23.133.8.3"))),
            Certificate.Extension(oid: "1.3.6.1.4.1.45724.1.1.4", critical: false, derValue: DERWriter.octetString(aaguid)),
        ]
        (aikKey, aikCertificate) = ca.leaf(subject: [], key: .generateRSA(bits: 2048), extensions: extensions)
        rest = [ca.certificate]
    }

    static func u16(_ v: UInt16) -> [UInt8] { [UInt8(v >> 8), UInt8(v & 0xFF)] }
    static func u32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    static func sized(_ b: [UInt8]) -> [UInt8] { u16(UInt16(b.count)) + b }
    static func hash(_ alg: UInt16, _ data: [UInt8]) -> [UInt8] { alg == 0x0004 ? HashFunction.sha1.hash(data) : Digest.sha256(data) }

    /// TPMT_PUBLIC for an RSA signing key: type, nameAlg, objectAttributes, authPolicy, parameters, unique.
    public func pubArea(for key: PublicKey) -> [UInt8] {
        let modulus = key.rsaComponents?.modulus ?? []
        return Self.u16(0x0001) + Self.u16(nameAlg) + Self.u32(0x0006_0472) + Self.sized([])
            + Self.u16(0x0010) + Self.u16(0x0010) + Self.u16(UInt16(modulus.count * 8)) + Self.u32(0) + Self.sized(modulus)
    }

    public func statement(authenticatorData: [UInt8], clientDataHash: [UInt8], authenticator: SoftAuthenticator) -> [CBORPair] {
        let pubArea = pubArea(for: (uniqueKey ?? authenticator.privateKey).publicKey)
        let extraHash: UInt16 = algorithm == .rs1 ? 0x0004 : 0x000B
        let extraData = extraDataOverride ?? Self.hash(extraHash, authenticatorData + clientDataHash)
        let name = Self.u16(nameAlg) + Self.hash(nameAlg, pubArea)
        let certInfo = Self.u32(magic) + Self.u16(0x8017) + Self.sized(Self.u16(0x000B) + [UInt8](repeating: 0x11, count: 32))
            + Self.sized(extraData)
            + [0, 0, 0, 0, 0, 0x12, 0x34, 0x56] + Self.u32(1) + Self.u32(0) + [1]  // clockInfo
            + [0, 0, 0, 0x02, 0, 0, 0, 0x01]  // firmwareVersion
            + Self.sized(name) + Self.sized([])
        let sig = try! aikKey.sign(certInfo, algorithm: algorithm.signatureAlgorithm!)
        let chain = reverseChain ? rest + [aikCertificate] : [aikCertificate] + rest
        return [CBORPair(.text("ver"), .text("2.0")), CBORPair(.text("alg"), .int(algorithm.rawValue)),
                CBORPair(.text("x5c"), .array(chain.map { .bytes($0.der) })), CBORPair(.text("sig"), .bytes(sig)),
                CBORPair(.text("certInfo"), .bytes(certInfo)), CBORPair(.text("pubArea"), .bytes(pubArea))]
    }
}
