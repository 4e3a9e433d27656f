import CBOR
import Crypto

/// WebAuthn L3 §8.3: the `tpm` attestation statement format. The TPM certifies the credential key
/// (pubArea) with TPM2_Certify (certInfo), signed by an Attestation Identity Key whose certificate
/// (aikCert) leads x5c. ECDAA is not supported. Result: attCA with trust path x5c.
public enum TPMAttestation: AttestationFormat {
    public static let identifier = "tpm"

    /// TCG TPM Vendor ID Registry: TPM_PT_MANUFACTURER values (four ASCII characters, space padded).
    static let registeredVendors: Set<UInt32> = [
        0x414D_4400,  // "AMD"  AMD
        0x4154_4D4C,  // "ATML" Atmel
        0x4252_434D,  // "BRCM" Broadcom
        0x4353_434F,  // "CSCO" Cisco
        0x464C_5953,  // "FLYS" Flyslice Technologies
        0x474F_4F47,  // "GOOG" Google
        0x4850_4500,  // "HPE"  HPE
        0x4849_5349,  // "HISI" Huawei
        0x4942_4D00,  // "IBM"  IBM
        0x4946_5800,  // "IFX"  Infineon
        0x494E_5443,  // "INTC" Intel
        0x4C45_4E00,  // "LEN"  Lenovo
        0x4D53_4654,  // "MSFT" Microsoft
        0x4E53_4D20,  // "NSM " National Semiconductor
        0x4E54_5A00,  // "NTZ"  Nationz
        0x4E54_4300,  // "NTC"  Nuvoton Technology
        0x5143_4F4D,  // "QCOM" Qualcomm
        0x524F_4343,  // "ROCC" Fuzhou Rockchip
        0x534D_5343,  // "SMSC" SMSC
        0x5354_4D20,  // "STM " ST Microelectronics
        0x534D_534E,  // "SMSN" Samsung
        0x534E_5300,  // "SNS"  Sinosun
        0x5458_4E00,  // "TXN"  Texas Instruments
        0x5745_4300,  // "WEC"  Winbond
    ]

    /// Vendor ids of test TPMs that real attestation vectors carry: FFFFF1D0 is the FIDO Alliance
    /// conformance tools' TPM, 00000000 the W3C WebAuthn L3 §16 test vectors' AIK. They prove nothing
    /// about hardware on their own; trust in an AIK comes from configured trust anchors, which
    /// would never include those test roots in production.
    static let testVendors: Set<UInt32> = [0xFFFF_F1D0, 0x0000_0000]

    static let subjectAltNameOID = "2.5.29.17"
    static let basicConstraintsOID = "2.5.29.19"
    static let aikCertificateEKU = "2.23.133.8.3"  // tcg-kp-AIKCertificate

    public static func verify(_ input: AttestationInput, trace: VerificationTrace?) throws(WebAuthnError) -> AttestationResult {
        // §8.3.2 step 1: attStmt has the syntax of §8.3 {ver, alg, x5c, sig, certInfo, pubArea}.
        // ECDAA (ecdaaKeyId, no x5c) was removed from WebAuthn and is not supported.
        try trace.require("attestation.tpm.noECDAA", input.statement[text: "ecdaaKeyId"] == nil,
                          .attestation("tpm: ECDAA attestation is not supported"))
        try input.requireOnly(["ver", "alg", "x5c", "sig", "certInfo", "pubArea"])
        try trace.require("attestation.tpm.ver", input.statement[text: "ver"]?.textValue == "2.0",
                          .attestation("tpm: attStmt.ver is not \"2.0\""))
        let alg = try input.int("alg")
        let scheme = try attestationSignatureAlgorithm(alg, format: identifier)
        guard let algHash = hashFunction(of: scheme) else {
            throw WebAuthnError(.algorithmUnsupported, "tpm: attestation algorithm \(COSEAlgorithm(alg).name) is not a TPM signing algorithm")
        }
        let sig = try input.bytes("sig")
        let pubAreaBytes = try input.bytes("pubArea")
        let certInfoBytes = try input.bytes("certInfo")
        // certificates() returns nil or a non-empty array.
        guard let x5c = try input.certificates(), let aikCert = x5c.first else {
            try trace.fail("attestation.tpm.x5c", .attestation("tpm: attStmt.x5c is missing (ECDAA is not supported)"))
        }
        trace.pass("attestation.tpm.x5c")

        // Parse first: both TPM structures, every length checked, no trailing bytes.
        let pubArea = try TPMTPublic(bytes: pubAreaBytes)
        let certInfo = try TPMSAttest(bytes: certInfoBytes)

        // Step 2: the key in pubArea's parameters and unique is the credentialPublicKey.
        try trace.require("attestation.tpm.pubAreaKey", pubAreaKeyMatches(pubArea, input.credential.publicKey.publicKey),
                          .attestation("tpm: pubArea key differs from the credential public key"))

        // Step 3: attToBeSigned = authenticatorData || clientDataHash.
        let attToBeSigned = input.signedData

        // Step 4: certInfo is valid.
        // magic is TPM_GENERATED_VALUE: the TPM itself produced this structure.
        try trace.require("attestation.tpm.certInfoMagic", certInfo.magic == TPMSAttest.generatedValue,
                          .attestation("tpm: certInfo.magic is not TPM_GENERATED_VALUE"))
        // type is TPM_ST_ATTEST_CERTIFY.
        try trace.require("attestation.tpm.certInfoType", certInfo.type == TPMSAttest.attestCertify,
                          .attestation("tpm: certInfo.type is not TPM_ST_ATTEST_CERTIFY"))
        // extraData is the hash of attToBeSigned with the hash algorithm of "alg".
        try trace.require("attestation.tpm.extraData", constantTimeEquals(certInfo.extraData, algHash.hash(attToBeSigned)),
                          .attestation("tpm: certInfo.extraData is not the hash of authenticatorData || clientDataHash"))
        // attested.name is the Name of pubArea: nameAlg || H_nameAlg(pubArea) (TPM 2.0 Part 1 §16).
        // qualifiedSigner, clockInfo and firmwareVersion are ignored, as §8.3.2 says.
        guard let nameHash = TPMAlgorithm.hash(pubArea.nameAlg) else {
            try trace.fail("attestation.tpm.nameAlg", .attestation("tpm: pubArea.nameAlg is not SHA-1, SHA-256, SHA-384 or SHA-512"))
        }
        trace.pass("attestation.tpm.nameAlg")
        let expectedName = [UInt8(pubArea.nameAlg >> 8), UInt8(pubArea.nameAlg & 0xFF)] + nameHash.hash(pubArea.raw)
        try trace.require("attestation.tpm.attestedName", certInfo.certify?.name == expectedName,
                          .attestation("tpm: certInfo.attested.name is not the Name of pubArea"))

        // Step 5 (x5c present): sig is a valid signature over certInfo with aikCert's key and "alg".
        let aikKey: PublicKey
        do { aikKey = try aikCert.publicKey } catch { throw .attestation("tpm: AIK certificate key is unsupported") }
        try trace.require("attestation.tpm.signature",
                          aikKey.verify(signature: sig, message: certInfoBytes, algorithm: scheme),
                          .attestation("tpm: sig does not verify over certInfo with the AIK certificate"))
        // aikCert meets §8.3.1.
        try checkAIKCertificate(aikCert, trace: trace)
        // id-fido-gen-ce-aaguid, when present, equals authenticatorData's AAGUID.
        try checkAAGUIDExtension(aikCert, aaguid: input.credential.aaguid, format: identifier, trace: trace)
        return AttestationResult(type: .attCA, trustPath: x5c, algorithm: COSEAlgorithm(alg))
    }

    /// §8.3.1 TPM attestation statement certificate requirements.
    static func checkAIKCertificate(_ cert: Certificate, trace: VerificationTrace?) throws(WebAuthnError) {
        // Version MUST be 3.
        try trace.require("attestation.tpm.aikVersion", cert.version == 3, .attestation("tpm: AIK certificate is not X.509 v3"))
        // Subject MUST be empty.
        try trace.require("attestation.tpm.aikSubjectEmpty", cert.subject.isEmpty,
                          .attestation("tpm: AIK certificate subject is not empty"))
        // subjectAlternativeName as TCG EK Credential Profile §3.2.9 defines it. With an empty
        // subject it carries the identity, so it is critical (RFC 5280 §4.2.1.6).
        guard let san = cert.extension(subjectAltNameOID) else {
            try trace.fail("attestation.tpm.aikSANPresent", .attestation("tpm: AIK certificate has no subjectAlternativeName"))
        }
        trace.pass("attestation.tpm.aikSANPresent")
        try trace.require("attestation.tpm.aikSANCritical", san.critical,
                          .attestation("tpm: AIK certificate subjectAlternativeName is not critical"))
        let device: TPMDeviceAttributes
        do { device = try TPMDeviceAttributes(subjectAlternativeName: san.value) } catch {
            try trace.fail("attestation.tpm.aikSAN", error)
        }
        trace.pass("attestation.tpm.aikSAN", device.manufacturer)
        // TPMManufacturer is a TCG-registered vendor (or a known test TPM's id).
        let vendor = device.manufacturerID
        try trace.require("attestation.tpm.aikManufacturer",
                          vendor.map { registeredVendors.contains($0) || testVendors.contains($0) } == true,
                          .attestation("tpm: AIK certificate TPMManufacturer is not a TCG-registered vendor id"))
        // extKeyUsage contains tcg-kp-AIKCertificate.
        try trace.require("attestation.tpm.aikExtendedKeyUsage", cert.extendedKeyUsage.contains(aikCertificateEKU),
                          .attestation("tpm: AIK certificate lacks extended key usage tcg-kp-AIKCertificate (2.23.133.8.3)"))
        // basicConstraints with cA false.
        let ca = cert.extension(basicConstraintsOID).flatMap { strictBasicConstraintsCA($0.value) }
        try trace.require("attestation.tpm.aikNotCA", ca == false,
                          .attestation("tpm: AIK certificate basicConstraints is missing, malformed or says CA"))
    }

    /// Whether pubArea describes exactly the credential's public key.
    static func pubAreaKeyMatches(_ pubArea: TPMTPublic, _ credential: PublicKey) -> Bool {
        switch pubArea.key {
        case .rsa(let keyBits, let exponent, let modulus):
            guard let (n, e) = credential.rsaComponents else { return false }
            // The TPM writes the modulus at its full keyBits size.
            guard modulus.count * 8 == Int(keyBits), modulus.first.map({ $0 != 0 }) == true else { return false }
            let tpmExponent = UInt64(exponent == 0 ? 65537 : exponent)
            guard e.count <= 8, !e.isEmpty else { return false }
            let credentialExponent = e.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            return modulus == n && tpmExponent == credentialExponent
        case .ecc(let curveID, let x, let y):
            guard let curve = TPMECCCurve.curve(curveID), credential.type == .ec(curve),
                  let point = credential.x963Point else { return false }
            let size = curve.coordinateLength
            guard x.count <= size, y.count <= size else { return false }
            // Coordinates are integers: a TPM may drop leading zero octets.
            let padded = [0x04] + [UInt8](repeating: 0, count: size - x.count) + x
                + [UInt8](repeating: 0, count: size - y.count) + y
            return point == padded
        }
    }

    /// The hash "alg" uses, which also makes certInfo.extraData. EdDSA has none: a TPM cannot use it.
    static func hashFunction(of scheme: SignatureAlgorithm) -> HashFunction? {
        switch scheme {
        case .ecdsa(let h), .rsaPKCS1(let h), .rsaPSS(let h): h
        case .ed25519: nil
        }
    }
}
