import Crypto

// Parsing for the `tpm` attestation statement format (WebAuthn L3 §8.3): the TPM 2.0 Part 2
// structures carried in attStmt.pubArea and attStmt.certInfo, and the AIK certificate's
// subjectAlternativeName. These types only check structure (every length bounded, nothing left
// over); TPMAttestation.swift decides whether what they hold is acceptable.

/// TPM_ALG_ID values (TPM 2.0 Part 2 §6.3) that the structures below refer to.
enum TPMAlgorithm {
    static let rsa: UInt16 = 0x0001
    static let sha1: UInt16 = 0x0004
    static let mgf1: UInt16 = 0x0007
    static let sha256: UInt16 = 0x000B
    static let sha384: UInt16 = 0x000C
    static let sha512: UInt16 = 0x000D
    static let null: UInt16 = 0x0010
    static let rsassa: UInt16 = 0x0014
    static let rsaes: UInt16 = 0x0015
    static let rsapss: UInt16 = 0x0016
    static let oaep: UInt16 = 0x0017
    static let ecdsa: UInt16 = 0x0018
    static let ecdh: UInt16 = 0x0019
    static let ecdaa: UInt16 = 0x001A
    static let sm2: UInt16 = 0x001B
    static let ecschnorr: UInt16 = 0x001C
    static let ecmqv: UInt16 = 0x001D
    static let kdf1SP800_56A: UInt16 = 0x0020
    static let kdf2: UInt16 = 0x0021
    static let kdf1SP800_108: UInt16 = 0x0022
    static let ecc: UInt16 = 0x0023

    /// The hash a TPMI_ALG_HASH names, nil for hashes Latchkey does not compute.
    static func hash(_ alg: UInt16) -> HashFunction? {
        switch alg {
        case sha1: .sha1
        case sha256: .sha256
        case sha384: .sha384
        case sha512: .sha512
        default: nil
        }
    }
}

/// TPM_ECC_CURVE values (TPM 2.0 Part 2 §6.4).
enum TPMECCCurve {
    static func curve(_ id: UInt16) -> EllipticCurve? {
        switch id {
        case 0x0003: .p256
        case 0x0004: .p384
        case 0x0005: .p521
        default: nil
        }
    }
}

/// Big-endian, bounds-checked reads over one TPM structure. Every read either returns the bytes
/// it promised or throws `attestation_invalid`; nothing here can trap on hostile input.
struct TPMReader {
    private var bytes: ArraySlice<UInt8>
    private let structure: String

    init(_ bytes: [UInt8], structure: String) {
        self.bytes = bytes[...]
        self.structure = structure
    }

    private func truncated(_ field: String) -> WebAuthnError {
        .attestation("tpm: \(structure).\(field) is truncated")
    }

    mutating func take(_ count: Int, _ field: String) throws(WebAuthnError) -> [UInt8] {
        guard count >= 0, count <= bytes.count else { throw truncated(field) }
        let out = Array(bytes.prefix(count))
        bytes = bytes.dropFirst(count)
        return out
    }

    mutating func u8(_ field: String) throws(WebAuthnError) -> UInt8 {
        guard let b = bytes.popFirst() else { throw truncated(field) }
        return b
    }

    mutating func u16(_ field: String) throws(WebAuthnError) -> UInt16 {
        let b = try take(2, field)
        return UInt16(b[0]) << 8 | UInt16(b[1])
    }

    mutating func u32(_ field: String) throws(WebAuthnError) -> UInt32 {
        let b = try take(4, field)
        return b.reduce(0) { $0 << 8 | UInt32($1) }
    }

    mutating func u64(_ field: String) throws(WebAuthnError) -> UInt64 {
        let b = try take(8, field)
        return b.reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// A TPM2B: UINT16 size, then that many bytes; `max` is the largest size Part 2 allows.
    mutating func sized(_ field: String, max: Int) throws(WebAuthnError) -> [UInt8] {
        let size = Int(try u16(field + ".size"))
        guard size <= max else { throw .attestation("tpm: \(structure).\(field) is larger than \(max) bytes") }
        return try take(size, field)
    }

    func requireEnd() throws(WebAuthnError) {
        guard bytes.isEmpty else { throw .attestation("tpm: \(bytes.count) unexpected bytes after \(structure)") }
    }
}

/// TPMT_PUBLIC (TPM 2.0 Part 2 §12.2.4) for RSA and ECC keys: the credential key as the TPM
/// describes it (attStmt.pubArea).
struct TPMTPublic {
    enum Key {
        /// `exponent` as written: 0 stands for the default 65537 (Part 2 §12.2.3.5).
        case rsa(keyBits: UInt16, exponent: UInt32, modulus: [UInt8])
        case ecc(curveID: UInt16, x: [UInt8], y: [UInt8])
    }

    /// Only what verification reads is kept: type, objectAttributes, authPolicy, the symmetric
    /// definition and the signing scheme are read (and bounds-checked) but not stored; they count
    /// through `raw`, over which the Name is computed.
    let nameAlg: UInt16
    let key: Key
    /// The exact bytes parsed: the TPM's Name is computed over them.
    let raw: [UInt8]

    // Largest sizes TPM 2.0 Part 2 allows: TPM2B_DIGEST ≤ sizeof(TPMU_HA) = 64 (SHA-512),
    // TPM2B_PUBLIC_KEY_RSA ≤ MAX_RSA_KEY_BYTES (512 for RSA-4096; 1024 here for 8192-bit keys),
    // TPM2B_ECC_PARAMETER ≤ MAX_ECC_KEY_BYTES (66 for P-521).
    static let maxDigest = 64, maxRSAModulus = 1024, maxECCParameter = 66

    init(bytes: [UInt8]) throws(WebAuthnError) {
        var r = TPMReader(bytes, structure: "pubArea")
        raw = bytes
        let type = try r.u16("type")
        nameAlg = try r.u16("nameAlg")
        _ = try r.u32("objectAttributes")
        _ = try r.sized("authPolicy", max: Self.maxDigest)

        // parameters: TPMU_PUBLIC_PARMS selected by `type`.
        // TPMT_SYM_DEF_OBJECT (§11.1.7): algorithm, then keyBits and mode unless it is TPM_ALG_NULL.
        let symmetric = try r.u16("parameters.symmetric.algorithm")
        if symmetric != TPMAlgorithm.null {
            _ = try r.u16("parameters.symmetric.keyBits")
            _ = try r.u16("parameters.symmetric.mode")
        }
        // TPMT_RSA_SCHEME / TPMT_ECC_SCHEME (§11.2.4.2, §11.2.5.6): scheme, then its details.
        let scheme = try r.u16("parameters.scheme")
        try Self.skipSchemeDetails(scheme, type: type, reader: &r)

        switch type {
        case TPMAlgorithm.rsa:
            // TPMS_RSA_PARMS (§12.2.3.5): keyBits, exponent; unique is TPM2B_PUBLIC_KEY_RSA.
            let keyBits = try r.u16("parameters.keyBits")
            let exponent = try r.u32("parameters.exponent")
            let modulus = try r.sized("unique", max: Self.maxRSAModulus)
            key = .rsa(keyBits: keyBits, exponent: exponent, modulus: modulus)
        case TPMAlgorithm.ecc:
            // TPMS_ECC_PARMS (§12.2.3.6): curveID, kdf (TPMT_KDF_SCHEME); unique is TPMS_ECC_POINT.
            let curveID = try r.u16("parameters.curveID")
            let kdf = try r.u16("parameters.kdf.scheme")
            switch kdf {
            case TPMAlgorithm.null: break
            case TPMAlgorithm.mgf1, TPMAlgorithm.kdf1SP800_56A, TPMAlgorithm.kdf2, TPMAlgorithm.kdf1SP800_108:
                _ = try r.u16("parameters.kdf.hashAlg")
            default:
                throw .attestation("tpm: pubArea.parameters.kdf scheme 0x\(String(kdf, radix: 16)) is unknown")
            }
            let x = try r.sized("unique.x", max: Self.maxECCParameter)
            let y = try r.sized("unique.y", max: Self.maxECCParameter)
            key = .ecc(curveID: curveID, x: x, y: y)
        default:
            throw .attestation("tpm: pubArea.type 0x\(String(type, radix: 16)) is neither TPM_ALG_RSA nor TPM_ALG_ECC")
        }
        try r.requireEnd()
    }

    /// TPMU_ASYM_SCHEME details (§11.2.3.5): a hashAlg for every signing / encryption scheme
    /// except RSAES (empty); ECDAA adds a UINT16 count. An unknown scheme has an unknown size.
    private static func skipSchemeDetails(_ scheme: UInt16, type: UInt16, reader r: inout TPMReader) throws(WebAuthnError) {
        switch (type, scheme) {
        case (_, TPMAlgorithm.null), (TPMAlgorithm.rsa, TPMAlgorithm.rsaes):
            return
        case (TPMAlgorithm.rsa, TPMAlgorithm.rsassa), (TPMAlgorithm.rsa, TPMAlgorithm.rsapss), (TPMAlgorithm.rsa, TPMAlgorithm.oaep),
             (TPMAlgorithm.ecc, TPMAlgorithm.ecdsa), (TPMAlgorithm.ecc, TPMAlgorithm.ecdh), (TPMAlgorithm.ecc, TPMAlgorithm.sm2),
             (TPMAlgorithm.ecc, TPMAlgorithm.ecschnorr), (TPMAlgorithm.ecc, TPMAlgorithm.ecmqv):
            _ = try r.u16("parameters.scheme.hashAlg")
        case (TPMAlgorithm.ecc, TPMAlgorithm.ecdaa):
            _ = try r.u16("parameters.scheme.hashAlg")
            _ = try r.u16("parameters.scheme.count")
        default:
            throw .attestation("tpm: pubArea.parameters.scheme 0x\(String(scheme, radix: 16)) is unknown")
        }
    }
}

/// TPMS_ATTEST (TPM 2.0 Part 2 §10.12.12) as produced by TPM2_Certify (attStmt.certInfo).
struct TPMSAttest {
    /// TPMS_CERTIFY_INFO (§10.12.3); qualifiedName is read but not kept.
    struct CertifyInfo {
        let name: [UInt8]
    }

    static let generatedValue: UInt32 = 0xFF54_4347  // TPM_GENERATED_VALUE, "\xffTCG"
    static let attestCertify: UInt16 = 0x8017         // TPM_ST_ATTEST_CERTIFY

    // TPM2B_NAME ≤ sizeof(TPMU_NAME) = 2 + 64 (a TPMT_HA with SHA-512); TPM2B_DATA ≤ sizeof(TPMT_HA) = 66.
    static let maxName = 66, maxData = 66

    /// qualifiedSigner, clockInfo and firmwareVersion are read (and bounds-checked) but not kept:
    /// §8.3.2 ignores them.
    let magic: UInt32
    let type: UInt16
    let extraData: [UInt8]
    /// The `attested` union when `type` is TPM_ST_ATTEST_CERTIFY; nil for any other type, whose
    /// layout this verifier does not read (the type check refuses those).
    let certify: CertifyInfo?

    init(bytes: [UInt8]) throws(WebAuthnError) {
        var r = TPMReader(bytes, structure: "certInfo")
        magic = try r.u32("magic")
        type = try r.u16("type")
        _ = try r.sized("qualifiedSigner", max: Self.maxName)
        extraData = try r.sized("extraData", max: Self.maxData)
        // TPMS_CLOCK_INFO (§10.11.1): clock, resetCount, restartCount, safe.
        _ = try r.u64("clockInfo.clock")
        _ = try r.u32("clockInfo.resetCount")
        _ = try r.u32("clockInfo.restartCount")
        _ = try r.u8("clockInfo.safe")
        _ = try r.u64("firmwareVersion")
        if type == Self.attestCertify {
            let name = try r.sized("attested.name", max: Self.maxName)
            _ = try r.sized("attested.qualifiedName", max: Self.maxName)
            certify = CertifyInfo(name: name)
            try r.requireEnd()
        } else {
            certify = nil
        }
    }
}

/// The TPM device attributes of an AIK certificate's subjectAlternativeName (WebAuthn L3 §8.3.1,
/// TCG EK Credential Profile §3.2.9): a directoryName holding TPMManufacturer (2.23.133.2.1),
/// TPMModel (2.23.133.2.2) and TPMVersion (2.23.133.2.3). Certificates put the three in one
/// multi-valued RDN or in three RDNs; both are read here.
struct TPMDeviceAttributes {
    static let manufacturerOID = "2.23.133.2.1", modelOID = "2.23.133.2.2", versionOID = "2.23.133.2.3"

    let manufacturer: String
    let model: String
    let version: String

    /// `extensionValue` is the DER inside the extension's OCTET STRING: GeneralNames.
    init(subjectAlternativeName extensionValue: [UInt8]) throws(WebAuthnError) {
        func bad(_ why: String) -> WebAuthnError { .attestation("tpm: AIK subjectAlternativeName \(why)") }
        var attributes: [(oid: String, value: String)] = []
        do {
            // GeneralNames ::= SEQUENCE SIZE (1..MAX) OF GeneralName (RFC 5280 §4.2.1.6).
            let names = try DERNode.parse(extensionValue)
            guard names.isUniversal(DERNode.sequence) else { throw bad("is not a SEQUENCE") }
            for name in try names.children {
                // directoryName [4] Name: explicit, since Name is a CHOICE.
                guard name.isContext(4) else { continue }
                guard name.constructed else { throw bad("directoryName is not constructed") }
                let inner = try name.children
                guard inner.count == 1, let rdnSequence = inner.first, rdnSequence.isUniversal(DERNode.sequence) else {
                    throw bad("directoryName is not one RDNSequence")
                }
                for rdn in try rdnSequence.children {
                    // RelativeDistinguishedName ::= SET SIZE (1..MAX) OF AttributeTypeAndValue
                    guard rdn.isUniversal(DERNode.set) else { throw bad("holds an RDN that is not a SET") }
                    let pairs = try rdn.children
                    guard !pairs.isEmpty else { throw bad("holds an empty RDN") }
                    for pair in pairs {
                        guard pair.isUniversal(DERNode.sequence) else { throw bad("holds a malformed attribute") }
                        let parts = try pair.children
                        guard parts.count == 2 else { throw bad("holds a malformed attribute") }
                        let oid = try parts[0].oidString
                        let value = parts[1]
                        // TCG: the values are UTF8String; PrintableString is its ASCII subset.
                        guard value.isUniversal(DERNode.utf8String) || value.isUniversal(DERNode.printableString) else {
                            throw bad("attribute \(oid) is not a string")
                        }
                        guard let text = String(validating: value.content, as: UTF8.self) else {
                            throw bad("attribute \(oid) is not UTF-8")
                        }
                        attributes.append((oid, text))
                    }
                }
            }
        } catch let error as WebAuthnError {
            throw error
        } catch {
            throw bad("is not valid DER")
        }
        func one(_ oid: String, _ label: String) throws(WebAuthnError) -> String {
            let found = attributes.filter { $0.oid == oid }
            guard found.count == 1, let value = found.first?.value, !value.isEmpty else {
                throw bad(found.isEmpty ? "lacks \(label)" : "holds \(label) more than once or empty")
            }
            return value
        }
        manufacturer = try one(Self.manufacturerOID, "TPMManufacturer")
        model = try one(Self.modelOID, "TPMModel")
        version = try one(Self.versionOID, "TPMVersion")
    }

    /// The manufacturer's TPM_PT_MANUFACTURER value from "id:XXXXXXXX" (8 hex digits), or nil.
    var manufacturerID: UInt32? {
        guard manufacturer.hasPrefix("id:") else { return nil }
        let hex = manufacturer.dropFirst(3)
        guard hex.count == 8, hex.allSatisfy(\.isHexDigit) else { return nil }
        return UInt32(hex, radix: 16)
    }
}

/// basicConstraints (RFC 5280 §4.2.1.9) read strictly: SEQUENCE { cA BOOLEAN DEFAULT FALSE,
/// pathLenConstraint INTEGER OPTIONAL }. Returns cA, or nil when the encoding is malformed.
func strictBasicConstraintsCA(_ extensionValue: [UInt8]) -> Bool? {
    guard let seq = try? DERNode.parse(extensionValue), seq.isUniversal(DERNode.sequence),
          let items = try? seq.children, items.count <= 2 else { return nil }
    var rest = items[...]
    var ca = false
    if let first = rest.first, first.isUniversal(DERNode.boolean) {
        guard let value = try? first.boolValue else { return nil }
        ca = value
        rest = rest.dropFirst()
    }
    if let next = rest.first {
        guard next.isUniversal(DERNode.integer), rest.count == 1 else { return nil }
    }
    return ca
}
