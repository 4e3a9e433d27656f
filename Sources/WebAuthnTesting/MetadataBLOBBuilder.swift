import Crypto
import JSON
import WebAuthn

/// One MDS3 entry for a BLOB a test builds: start from a valid statement, change one field.
public struct TestMetadataEntry: Sendable {
    public var aaguid: [UInt8]?
    public var attestationCertificateKeyIdentifiers: [String] = []
    public var description: String
    public var icon: String? = nil
    public var attestationRootCertificates: [Certificate]
    public var authenticationAlgorithms: [String]
    public var attestationTypes: [String]
    /// (status, effectiveDate) in order.
    public var statusReports: [(status: String, effectiveDate: String)]
    public var protocolFamily = "fido2"

    public init(aaguid: [UInt8]?, description: String, roots: [Certificate], algorithms: [COSEAlgorithm] = [.es256],
                attestationTypes: [String] = ["basic_full"],
                statusReports: [(status: String, effectiveDate: String)] = [("FIDO_CERTIFIED_L1", "2020-01-01")]) {
        self.aaguid = aaguid
        self.description = description
        self.attestationRootCertificates = roots
        self.authenticationAlgorithms = algorithms.compactMap(MetadataStatement.algorithmName)
        self.attestationTypes = attestationTypes
        self.statusReports = statusReports
    }

    public var json: JSONValue {
        var statement: [(key: String, value: JSONValue)] = [
            ("legalHeader", "Test metadata; not FIDO Alliance data."), ("description", .string(description)),
            ("authenticatorVersion", 1), ("protocolFamily", .string(protocolFamily)), ("schemaVersion", 3),
            ("upv", .array([.object([("major", 1), ("minor", 0)])])),
            ("authenticationAlgorithms", .array(authenticationAlgorithms.map { .string($0) })),
            ("publicKeyAlgAndEncodings", ["cose"]),
            ("attestationTypes", .array(attestationTypes.map { .string($0) })),
            ("userVerificationDetails", [[.object([("userVerificationMethod", "presence_internal")])]]),
            ("keyProtection", ["hardware", "secure_element"]), ("matcherProtection", ["on_chip"]),
            ("attachmentHint", ["external"]), ("tcDisplay", []),
            ("attestationRootCertificates", .array(attestationRootCertificates.map { .string(Base64.encodeStandard($0.der)) })),
        ]
        if let aaguid { statement.insert(("aaguid", .string(formatUUID(aaguid))), at: 1) }
        if !attestationCertificateKeyIdentifiers.isEmpty {
            statement.insert(("attestationCertificateKeyIdentifiers", .array(attestationCertificateKeyIdentifiers.map { .string($0) })), at: 1)
        }
        if let icon { statement.append(("icon", .string(icon))) }
        var entry: [(key: String, value: JSONValue)] = []
        if let aaguid { entry.append(("aaguid", .string(formatUUID(aaguid)))) }
        if !attestationCertificateKeyIdentifiers.isEmpty {
            entry.append(("attestationCertificateKeyIdentifiers", .array(attestationCertificateKeyIdentifiers.map { .string($0) })))
        }
        entry.append(("metadataStatement", .object(statement)))
        entry.append(("statusReports", .array(statusReports.map { .object([("status", .string($0.status)), ("effectiveDate", .string($0.effectiveDate))]) })))
        entry.append(("timeOfLastStatusChange", .string(statusReports.last?.effectiveDate ?? "2020-01-01")))
        return .object(entry)
    }
}

/// A BLOB signer: its key and x5c chain (leaf first, without the root).
public struct MetadataSigner: Sendable {
    public let key: PrivateKey
    public let chain: [Certificate]
    public init(key: PrivateKey, chain: [Certificate]) {
        self.key = key
        self.chain = chain
    }
}

/// An MDS3 BLOB (a JWS over the payload JSON) signed the way the FIDO Alliance signs the real one.
public struct MetadataBLOBBuilder: Sendable {
    public var number = 1
    public var nextUpdate = "2099-01-01"
    public var legalHeader = "Test metadata; not FIDO Alliance data."
    public var entries: [JSONValue] = []
    /// ES256 (P-256 signer) or RS256 (RSA signer).
    public var algorithm = "ES256"
    public var corruptSignature = false

    public init(entries: [TestMetadataEntry] = []) { self.entries = entries.map(\.json) }

    public var payload: JSONValue {
        .object([("legalHeader", .string(legalHeader)), ("no", .number(Double(number))), ("nextUpdate", .string(nextUpdate)),
                 ("entries", .array(entries))])
    }

    public func signed(by signer: MetadataSigner) -> [UInt8] {
        let header = JSONValue.object([
            ("alg", .string(algorithm)), ("typ", "JWT"), ("x5c", .array(signer.chain.map { .string(Base64.encodeStandard($0.der)) })),
        ])
        let input = Base64URL.encode(header.serialized()) + "." + Base64URL.encode(payload.serialized())
        var signature: [UInt8]
        if algorithm == "RS256" {
            signature = try! signer.key.sign(Array(input.utf8), algorithm: .rsaPKCS1(.sha256))
        } else {
            let der = try! signer.key.sign(Array(input.utf8), algorithm: .ecdsa(.sha256))
            signature = try! ECDSASignature.rawFromDER(der, coordinateLength: 32)
        }
        if corruptSignature { signature[signature.count / 2] ^= 0x01 }
        return Array((input + "." + Base64URL.encode(signature)).utf8)
    }
}

/// The PKI of a test metadata service: a root (what LATCHKEY_MDS_ROOT names) and a BLOB signer under it.
/// Like the FIDO Alliance's, the signer's certificate names `mds.fidoalliance.org` in its
/// subjectAltName (the name LATCHKEY_MDS_SIGNER defaults to); `signerDNSNames` and
/// `signerCommonName` change that.
public struct TestMetadataService: Sendable {
    public let root: TestCertificateAuthority
    public let signer: MetadataSigner

    public init(rsa: Bool = false, signerNotBefore: Int64 = TestCertificateAuthority.defaultNotBefore,
                signerNotAfter: Int64 = TestCertificateAuthority.defaultNotAfter,
                signerCommonName: String = "Latchkey Test MDS BLOB Signer",
                signerDNSNames: [String] = [MetadataBLOB.defaultSigner]) {
        root = .root("Latchkey Test MDS Root", key: rsa ? .generateRSA(bits: 2048) : .generateEC(.p256))
        signer = root.metadataSigner(commonName: signerCommonName, dnsNames: signerDNSNames, key: rsa ? .generateRSA(bits: 2048) : .generateEC(.p256),
                                     notBefore: signerNotBefore, notAfter: signerNotAfter)
    }

    public func blob(_ builder: MetadataBLOBBuilder) -> [UInt8] { builder.signed(by: signer) }

    /// A CRL from the root that revokes the BLOB signer.
    public var revokingSigner: CertificateRevocationList { root.crl(revoking: signer.chain) }
}

extension TestCertificateAuthority {
    /// A BLOB signer this CA issues: subject CN `commonName`, subjectAltName dNSNames `dnsNames`
    /// (none: no subjectAltName at all); x5c is the signer alone, or signer then this CA when it is
    /// an intermediate.
    public func metadataSigner(commonName: String, dnsNames: [String] = [MetadataBLOB.defaultSigner], key: PrivateKey = .generateEC(.p256),
                               notBefore: Int64 = TestCertificateAuthority.defaultNotBefore,
                               notAfter: Int64 = TestCertificateAuthority.defaultNotAfter) -> MetadataSigner {
        let extensions = dnsNames.isEmpty ? [] : [Certificate.Extension.subjectAltName(dnsNames: dnsNames)]
        let (key, cert) = leaf(subject: [("C", "US"), ("O", "Latchkey Test"), ("CN", commonName)], key: key,
                               notBefore: notBefore, notAfter: notAfter, extensions: extensions)
        return MetadataSigner(key: key, chain: certificate.isSelfIssued ? [cert] : [cert, certificate])
    }
}

extension Certificate.Extension {
    /// subjectAltName (2.5.29.17) as SEQUENCE OF dNSName `[2] IA5String` (RFC 5280 §4.2.1.6).
    public static func subjectAltName(dnsNames: [String]) -> Certificate.Extension {
        func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
            let n = content.count
            let length: [UInt8] = n < 0x80 ? [UInt8(n)] : n < 0x100 ? [0x81, UInt8(n)] : [0x82, UInt8(n >> 8), UInt8(n & 0xFF)]
            return [tag] + length + content
        }
        return Certificate.Extension(oid: "2.5.29.17", critical: false,
                                     derValue: tlv(0x30, dnsNames.flatMap { tlv(0x82, Array($0.utf8)) }))
    }
}
