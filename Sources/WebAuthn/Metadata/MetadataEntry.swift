import Crypto
import JSON

/// FIDO MDS3 §3.1.8 AuthenticatorStatus (and 3.1.1's RETIRED). A struct over the raw value, so a
/// status FIDO adds later decodes instead of failing the BLOB; it simply refuses nothing.
public struct AuthenticatorStatus: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    public static let notFIDOCertified = AuthenticatorStatus("NOT_FIDO_CERTIFIED")
    public static let fidoCertified = AuthenticatorStatus("FIDO_CERTIFIED")
    public static let userVerificationBypass = AuthenticatorStatus("USER_VERIFICATION_BYPASS")
    public static let attestationKeyCompromise = AuthenticatorStatus("ATTESTATION_KEY_COMPROMISE")
    public static let userKeyRemoteCompromise = AuthenticatorStatus("USER_KEY_REMOTE_COMPROMISE")
    public static let userKeyPhysicalCompromise = AuthenticatorStatus("USER_KEY_PHYSICAL_COMPROMISE")
    public static let updateAvailable = AuthenticatorStatus("UPDATE_AVAILABLE")
    public static let revoked = AuthenticatorStatus("REVOKED")
    public static let retired = AuthenticatorStatus("RETIRED")
    public static let selfAssertionSubmitted = AuthenticatorStatus("SELF_ASSERTION_SUBMITTED")

    /// SPEC "Authenticator metadata": a latest status report with one of these refuses the registration.
    public static let refusing: Set<AuthenticatorStatus> = [
        .revoked, .userVerificationBypass, .attestationKeyCompromise, .userKeyRemoteCompromise, .userKeyPhysicalCompromise,
    ]

    /// The certification level this status states, if it is a certification status
    /// (`FIDO_CERTIFIED` is the phased-out name of L1; `NOT_FIDO_CERTIFIED` is level "none").
    public var certification: CertificationLevel? {
        switch rawValue {
        case "NOT_FIDO_CERTIFIED": .none
        case "FIDO_CERTIFIED", "FIDO_CERTIFIED_L1": .l1
        default: CertificationLevel(rawValue: rawValue)
        }
    }
}

/// FIDO certification levels in order (`LATCHKEY_REQUIRE_CERTIFIED`).
public enum CertificationLevel: String, Sendable, Comparable, CaseIterable {
    case none = "NOT_FIDO_CERTIFIED"
    case l1 = "FIDO_CERTIFIED_L1", l1plus = "FIDO_CERTIFIED_L1plus", l2 = "FIDO_CERTIFIED_L2"
    case l2plus = "FIDO_CERTIFIED_L2plus", l3 = "FIDO_CERTIFIED_L3", l3plus = "FIDO_CERTIFIED_L3plus"

    private var rank: Int { Self.allCases.firstIndex(of: self)! }
    public static func < (l: CertificationLevel, r: CertificationLevel) -> Bool { l.rank < r.rank }
}

/// MDS3 §3.1.3 StatusReport.
public struct StatusReport: Sendable {
    public let status: AuthenticatorStatus
    /// ISO-8601 date (`YYYY-MM-DD`) as written, and as seconds since 1970 (midnight UTC) when it parses.
    public let effectiveDate: String?
    public let effectiveTime: Int64?
    public let authenticatorVersion: Int?
    public let certificateNumber: String?
    public let certificationDescriptor: String?
    public let certificationPolicyVersion: String?
    public let url: String?
}

/// MDS3 metadata statement (FIDO Metadata Statement §4): the members Latchkey's trust rules read,
/// plus the whole statement as JSON for `latchkey mds show`.
public struct MetadataStatement: Sendable {
    public let description: String?
    public let icon: String?
    public let aaguid: [UInt8]?
    public let attestationCertificateKeyIdentifiers: [String]
    public let protocolFamily: String?
    public let schemaVersion: Int?
    public let authenticatorVersion: Int?
    /// `authenticationAlgorithms` as written (e.g. `secp256r1_ecdsa_sha256_raw`).
    public let authenticationAlgorithms: [String]
    /// `attestationTypes` as written (`basic_full`, `basic_surrogate`, `attca`, `anonca`, `none`, …).
    public let attestationTypes: [String]
    public let attestationRootCertificates: [Certificate]
    public let json: JSONValue

    /// The COSE algorithms `authenticationAlgorithms` names (FIDO Registry of Predefined Values §3.6.1).
    public var coseAlgorithms: Set<COSEAlgorithm> {
        Set(authenticationAlgorithms.flatMap { MetadataStatement.coseAlgorithms(named: $0) })
    }

    static func coseAlgorithms(named name: String) -> [COSEAlgorithm] {
        switch name {
        case "secp256r1_ecdsa_sha256_raw", "secp256r1_ecdsa_sha256_der": [.es256]
        case "secp384r1_ecdsa_sha384_raw": [.es384]
        case "secp521r1_ecdsa_sha512_raw": [.es512]
        case "ed25519_eddsa_sha512_raw": [.edDSA, .ed25519]
        case "rsassa_pss_sha256_raw", "rsassa_pss_sha256_der": [.ps256]
        case "rsassa_pss_sha384_raw": [.ps384]
        case "rsassa_pss_sha512_raw": [.ps512]
        case "rsassa_pkcsv15_sha256_raw", "rsa_emsa_pkcs1_sha256_raw", "rsa_emsa_pkcs1_sha256_der": [.rs256]
        case "rsassa_pkcsv15_sha384_raw": [.rs384]
        case "rsassa_pkcsv15_sha512_raw": [.rs512]
        case "rsassa_pkcsv15_sha1_raw": [.rs1]
        default: []  // secp256k1, sm2, ed448: nothing Latchkey verifies
        }
    }

    /// The registry name of a COSE algorithm, for statements tests build.
    public static func algorithmName(_ alg: COSEAlgorithm) -> String? {
        switch alg {
        case .es256: "secp256r1_ecdsa_sha256_raw"
        case .es384: "secp384r1_ecdsa_sha384_raw"
        case .es512: "secp521r1_ecdsa_sha512_raw"
        case .edDSA, .ed25519: "ed25519_eddsa_sha512_raw"
        case .ps256: "rsassa_pss_sha256_raw"
        case .ps384: "rsassa_pss_sha384_raw"
        case .ps512: "rsassa_pss_sha512_raw"
        case .rs256: "rsassa_pkcsv15_sha256_raw"
        case .rs384: "rsassa_pkcsv15_sha384_raw"
        case .rs512: "rsassa_pkcsv15_sha512_raw"
        case .rs1: "rsassa_pkcsv15_sha1_raw"
        default: nil
        }
    }

    /// The `attestationTypes` value of a WebAuthn attestation type (MDS "Authenticator Attestation Types").
    public static func attestationTypeName(_ type: AttestationType) -> String {
        switch type {
        case .basic: "basic_full"
        case .self: "basic_surrogate"
        case .attCA: "attca"
        case .anonCA: "anonca"
        case .none: "none"
        }
    }
}

/// MDS3 §3.1.1 MetadataBLOBPayloadEntry.
public struct MetadataEntry: Sendable {
    public let aaid: String?
    public let aaguid: [UInt8]?
    /// Lower-case hex SHA-1 of each attestation certificate's subjectPublicKey (RFC 5280 §4.2.1.2 (1)).
    public let attestationCertificateKeyIdentifiers: [String]
    public let statement: MetadataStatement?
    public let statusReports: [StatusReport]
    public let timeOfLastStatusChange: String?

    /// The report with the latest `effectiveDate` (a later one in the list wins a tie; one without
    /// a date counts as the newest, as MDS3 §3.1.3 says an absent date means "now").
    public var latestStatus: StatusReport? {
        var best: StatusReport? = nil
        for report in statusReports {
            guard let current = best else { best = report; continue }
            if (report.effectiveTime ?? .max) >= (current.effectiveTime ?? .max) { best = report }
        }
        return best
    }

    /// The entry's certification level: the latest report that states one.
    public var certification: CertificationLevel? {
        var best: (report: StatusReport, level: CertificationLevel)? = nil
        for report in statusReports {
            guard let level = report.status.certification else { continue }
            if best == nil || (report.effectiveTime ?? .max) >= (best!.report.effectiveTime ?? .max) { best = (report, level) }
        }
        return best?.level
    }

    /// A name for messages: the statement's description, else the AAGUID / AAID / first key id.
    public var displayName: String {
        statement?.description ?? aaguid.map(formatUUID) ?? aaid ?? attestationCertificateKeyIdentifiers.first ?? "entry"
    }
}

// MARK: Decoding (MDS3 §3.1.1, §3.1.3; Metadata Statement §4)

extension MetadataEntry {
    /// Decodes one BLOB entry. Anything malformed in it throws: the BLOB keeps the entries that
    /// decode and reports the others (an entry that does not decode cannot vouch for anything).
    init(json: JSONValue) throws(WebAuthnError) {
        func fail(_ why: String) -> WebAuthnError { .metadata("entry: \(why)") }
        guard json.objectValue != nil else { throw fail("not an object") }
        aaid = json["aaid"]?.stringValue
        if let text = json["aaguid"] {
            guard let s = text.stringValue, let bytes = parseUUID(s) else { throw fail("aaguid is not a UUID") }
            aaguid = bytes
        } else {
            aaguid = nil
        }
        attestationCertificateKeyIdentifiers = try decodeKeyIdentifiers(json["attestationCertificateKeyIdentifiers"], fail)
        if let s = json["metadataStatement"] {
            do { statement = try MetadataStatement(json: s) } catch { throw fail("metadataStatement: \(error.reason)") }
        } else {
            statement = nil
        }
        guard let reports = json["statusReports"]?.arrayValue else { throw fail("statusReports is missing") }
        var decoded: [StatusReport] = []
        for r in reports {
            guard let status = r["status"]?.stringValue, !status.isEmpty else { throw fail("a status report has no status") }
            let date = r["effectiveDate"]?.stringValue
            decoded.append(StatusReport(
                status: AuthenticatorStatus(status), effectiveDate: date, effectiveTime: date.flatMap(parseDate),
                authenticatorVersion: r["authenticatorVersion"]?.intValue, certificateNumber: r["certificateNumber"]?.stringValue,
                certificationDescriptor: r["certificationDescriptor"]?.stringValue,
                certificationPolicyVersion: r["certificationPolicyVersion"]?.stringValue, url: r["url"]?.stringValue))
        }
        statusReports = decoded
        timeOfLastStatusChange = json["timeOfLastStatusChange"]?.stringValue
        guard aaid != nil || aaguid != nil || !attestationCertificateKeyIdentifiers.isEmpty else {
            throw fail("names no authenticator (no aaid, aaguid or attestationCertificateKeyIdentifiers)")
        }
    }
}

extension MetadataStatement {
    init(json: JSONValue) throws(WebAuthnError) {
        guard json.objectValue != nil else { throw .metadata("not an object") }
        description = json["description"]?.stringValue
        icon = json["icon"]?.stringValue
        if let s = json["aaguid"] {
            guard let text = s.stringValue, let bytes = parseUUID(text) else { throw .metadata("aaguid is not a UUID") }
            aaguid = bytes
        } else {
            aaguid = nil
        }
        attestationCertificateKeyIdentifiers = try decodeKeyIdentifiers(json["attestationCertificateKeyIdentifiers"]) { .metadata($0) }
        protocolFamily = json["protocolFamily"]?.stringValue
        schemaVersion = json["schemaVersion"]?.intValue
        authenticatorVersion = json["authenticatorVersion"]?.intValue
        func strings(_ key: String) throws(WebAuthnError) -> [String] {
            guard let value = json[key] else { return [] }
            guard let items = value.arrayValue else { throw .metadata("\(key) is not an array") }
            var out: [String] = []
            for item in items {
                guard let s = item.stringValue else { throw .metadata("\(key) holds a non-string") }
                out.append(s)
            }
            return out
        }
        authenticationAlgorithms = try strings("authenticationAlgorithms")
        attestationTypes = try strings("attestationTypes")
        var roots: [Certificate] = []
        for (i, text) in try strings("attestationRootCertificates").enumerated() {
            // Standard base64 of DER (Metadata Statement §4), not base64url.
            guard let der = Base64.decodeStandard(text) else { throw .metadata("attestationRootCertificates[\(i)] is not base64") }
            do { roots.append(try Certificate(der: der)) } catch { throw .metadata("attestationRootCertificates[\(i)] does not parse") }
        }
        attestationRootCertificates = roots
        self.json = json
    }
}

private func decodeKeyIdentifiers(_ value: JSONValue?, _ fail: (String) -> WebAuthnError) throws(WebAuthnError) -> [String] {
    guard let value else { return [] }
    guard let items = value.arrayValue else { throw fail("attestationCertificateKeyIdentifiers is not an array") }
    var out: [String] = []
    for item in items {
        guard let s = item.stringValue, s.count == 40, s.allSatisfy(\.isHexDigit) else {
            throw fail("attestationCertificateKeyIdentifiers holds something other than 40 hex digits")
        }
        out.append(s.lowercased())
    }
    return out
}

/// 8-4-4-4-12 hex → 16 bytes.
public func parseUUID(_ text: String) -> [UInt8]? {
    let hex = text.filter { $0 != "-" }
    let groups = text.split(separator: "-", omittingEmptySubsequences: false).map(\.count)
    guard groups == [8, 4, 4, 4, 12], hex.count == 32 else { return nil }
    return Hex.decode(hex)
}

/// `YYYY-MM-DD` → midnight UTC, seconds since 1970.
func parseDate(_ text: String) -> Int64? {
    guard text.count == 10 else { return nil }
    return Inspection.parseISO8601(text + "T00:00:00Z")
}

/// The key identifier MDS3 uses for attestation certificates: lower-case hex SHA-1 of the
/// subjectPublicKey BIT STRING's value (RFC 5280 §4.2.1.2 method (1)).
public func attestationKeyIdentifier(_ certificate: Certificate) -> String? {
    guard let spki = try? certificate.publicKey.spkiDER, let node = try? DERNode.parse(spki),
          let parts = try? node.children, parts.count == 2, parts[1].isUniversal(DERNode.bitString),
          parts[1].content.first == 0 else { return nil }
    return Hex.encode(HashFunction.sha1.hash(Array(parts[1].content.dropFirst())))
}
