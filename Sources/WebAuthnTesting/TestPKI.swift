import Crypto

/// A certificate authority for tests: a key and its certificate, issuing intermediates, leaves and
/// CRLs. Test roots stand in for authenticator vendors' attestation roots and the FIDO MDS root.
public struct TestCertificateAuthority: Sendable {
    public let key: PrivateKey
    public let certificate: Certificate

    /// 2000-01-01 … 2099-12-31: valid at any time a test runs unless it pins another.
    public static let defaultNotBefore: Int64 = 946_684_800
    public static let defaultNotAfter: Int64 = 4_102_358_400

    public init(key: PrivateKey, certificate: Certificate) {
        self.key = key
        self.certificate = certificate
    }

    /// A self-signed root.
    public static func root(_ commonName: String, key: PrivateKey = .generateEC(.p256), notBefore: Int64 = defaultNotBefore,
                            notAfter: Int64 = defaultNotAfter) -> TestCertificateAuthority {
        let template = CertificateTemplate(subject: [("C", "US"), ("O", "Latchkey Test"), ("CN", commonName)], serial: randomSerial(),
                                           notBefore: notBefore, notAfter: notAfter, isCA: true)
        let cert = try! Certificate.issue(template, publicKey: key.publicKey, issuer: nil, signingKey: key, hash: hash(for: key))
        return TestCertificateAuthority(key: key, certificate: cert)
    }

    /// A CA certificate this one issues.
    public func intermediate(_ commonName: String, key: PrivateKey = .generateEC(.p256), notBefore: Int64 = defaultNotBefore,
                             notAfter: Int64 = defaultNotAfter) -> TestCertificateAuthority {
        let template = CertificateTemplate(subject: [("C", "US"), ("O", "Latchkey Test"), ("CN", commonName)], serial: Self.randomSerial(),
                                           notBefore: notBefore, notAfter: notAfter, isCA: true)
        let cert = try! Certificate.issue(template, publicKey: key.publicKey, issuer: certificate, signingKey: self.key,
                                          hash: Self.hash(for: self.key))
        return TestCertificateAuthority(key: key, certificate: cert)
    }

    /// An end-entity certificate for `key` with `subject` and extra extensions.
    public func leaf(subject: [(oid: String, value: String)], key: PrivateKey = .generateEC(.p256), notBefore: Int64 = defaultNotBefore,
                     notAfter: Int64 = defaultNotAfter, extensions: [Certificate.Extension] = []) -> (key: PrivateKey, certificate: Certificate) {
        let template = CertificateTemplate(subject: subject, serial: Self.randomSerial(), notBefore: notBefore, notAfter: notAfter,
                                           isCA: false, extensions: extensions)
        let cert = try! Certificate.issue(template, publicKey: key.publicKey, issuer: certificate, signingKey: self.key,
                                          hash: Self.hash(for: self.key))
        return (key, cert)
    }

    /// A CRL signed by this CA listing `revoked`.
    public func crl(revoking revoked: [Certificate], thisUpdate: Int64 = defaultNotBefore,
                    nextUpdate: Int64 = defaultNotAfter) -> CertificateRevocationList {
        try! CertificateRevocationList.issue(issuer: certificate, key: key, revokedSerials: revoked.map(\.serialNumber),
                                             thisUpdate: thisUpdate, nextUpdate: nextUpdate, hash: Self.hash(for: key) ?? .sha256)
    }

    /// A packed attestation identity (WebAuthn L3 §8.2.1 certificate requirements) under this CA,
    /// carrying the AAGUID extension; `chain` is leaf first, this CA's certificate after it unless
    /// it is a root (packed x5c must not carry the root).
    public func packedAttestation(aaguid: [UInt8], commonName: String = "Latchkey Test Attestation",
                                  notBefore: Int64 = defaultNotBefore, notAfter: Int64 = defaultNotAfter) -> AttestationIdentity {
        let aaguidExtension = Certificate.Extension(oid: "1.3.6.1.4.1.45724.1.1.4", critical: false,
                                                    derValue: [0x04, UInt8(aaguid.count)] + aaguid)
        let (key, cert) = leaf(subject: [("C", "US"), ("O", "Latchkey Test"), ("OU", "Authenticator Attestation"), ("CN", commonName)],
                               notBefore: notBefore, notAfter: notAfter, extensions: [aaguidExtension])
        let chain = certificate.isSelfIssued ? [cert] : [cert, certificate]
        return AttestationIdentity(key: key, chain: chain)
    }

    static func randomSerial() -> [UInt8] {
        var serial = SecureRandom.bytes(12)
        serial[0] = serial[0] & 0x7F | 0x01
        return serial
    }

    static func hash(for key: PrivateKey) -> HashFunction? {
        switch key.type {
        case .ed25519: nil
        case .ec(.p384): .sha384
        case .ec(.p521): .sha512
        default: .sha256
        }
    }
}

/// An attestation key and its certificate chain (leaf first), as an authenticator holds them.
public struct AttestationIdentity: Sendable {
    public let key: PrivateKey
    public let chain: [Certificate]

    public init(key: PrivateKey, chain: [Certificate]) {
        self.key = key
        self.chain = chain
    }
}
