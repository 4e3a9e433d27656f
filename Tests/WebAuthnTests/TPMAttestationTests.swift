import CBOR
import Crypto
import Foundation
import JSON
import Testing
@testable import WebAuthn

// WebAuthn L3 §8.3 `tpm` attestation: the third-party vectors (every "format": "tpm" entry of
// registration.json and mpl-registration.json), then one-field mutations of real statements and
// truncated / garbage TPM structures, which must fail with attestation_invalid and never crash.

struct TPMVector: Sendable, CustomTestStringConvertible {
    let id: String
    let json: JSONValue
    var testDescription: String { id }

    var expectOK: Bool { json["expect"]?.stringValue == "ok" }
    var responseBytes: [UInt8] { json["response"]?.serialized() ?? [] }
    var challenge: [UInt8] { Base64URL.decode(json["expectedChallenge"]?.stringValue ?? "") ?? [] }

    /// The RP configuration the vector describes (README.md of the vectors).
    func policy() throws -> VerificationPolicy {
        let originValue = json["expectedOrigin"]
        let origins = originValue?.stringValue.map { [$0] } ?? originValue?.arrayValue?.compactMap(\.stringValue) ?? []
        let clock: @Sendable () -> Int64
        if let at = json["verifyAt"]?.stringValue {
            let instant = try #require(Inspection.parseISO8601(at), "verifyAt \(at) does not parse")
            clock = { instant }
        } else {
            clock = VerificationPolicy.systemClock
        }
        var policy = VerificationPolicy(rpId: json["rpId"]?.stringValue ?? "",
                                        origins: OriginPolicy(origins, allowSubdomains: json["allowSubdomainOrigins"]?.boolValue ?? false),
                                        clock: clock)
        if let pems = json["trustAnchors"]?.arrayValue {
            policy.trustAnchors = try pems.flatMap { pem in try Certificate.parsePEM(try #require(pem.stringValue)) }
        }
        if let algs = json["supportedAlgs"]?.arrayValue {
            policy.allowedAlgorithms = algs.compactMap(\.intValue).map(COSEAlgorithm.init)
        } else {
            policy.allowedAlgorithms = COSEAlgorithm.credentialDefaults + [COSEAlgorithm(try #require(json["alg"]?.intValue))]
        }
        if json["requireUserVerification"]?.boolValue == true { policy.userVerification = .required }
        return policy
    }

    /// Runs §7.1 on `response` (the vector's own unless given) and returns the outcome with its trace.
    func run(response: [UInt8]? = nil) throws -> (Result<VerifiedRegistration, WebAuthnError>, VerificationTrace) {
        let trace = VerificationTrace()
        let policy = try policy()
        do {
            let parsed = try ParsedRegistration(bytes: response ?? responseBytes)
            let verified = try RegistrationVerifier.verify(parsed, expectedChallenge: challenge, policy: policy, trace: trace)
            return (.success(verified), trace)
        } catch {
            return (.failure(error), trace)
        }
    }
}

enum TPMVectors {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/vectors")

    static let all: [TPMVector] = {
        var out: [TPMVector] = []
        for file in ["registration.json", "mpl-registration.json"] {
            guard let data = FileManager.default.contents(atPath: directory.appendingPathComponent(file).path),
                  let list = try? JSONParser.parse(Array(data), maxDepth: 64).arrayValue else { continue }
            for entry in list where entry["format"]?.stringValue == "tpm" {
                out.append(TPMVector(id: entry["id"]?.stringValue ?? "?", json: entry))
            }
        }
        return out
    }()

    static func named(_ id: String) throws -> TPMVector {
        try #require(all.first { $0.id == id }, "vector \(id) is missing")
    }
}

// MARK: - Third-party vectors

@Suite("TPM attestation (WebAuthn L3 §8.3)")
struct TPMAttestationTests {
    static let expectedChecks = [
        "attestation.tpm.noECDAA", "attestation.tpm.ver", "attestation.tpm.x5c", "attestation.tpm.pubAreaKey",
        "attestation.tpm.certInfoMagic", "attestation.tpm.certInfoType", "attestation.tpm.extraData",
        "attestation.tpm.nameAlg", "attestation.tpm.attestedName", "attestation.tpm.signature",
        "attestation.tpm.aikVersion", "attestation.tpm.aikSubjectEmpty", "attestation.tpm.aikSANPresent",
        "attestation.tpm.aikSANCritical", "attestation.tpm.aikSAN", "attestation.tpm.aikManufacturer",
        "attestation.tpm.aikExtendedKeyUsage", "attestation.tpm.aikNotCA",
    ]

    @Test func vectorsArePresent() {
        #expect(TPMVectors.all.count == 18)
    }

    @Test func iso8601() {
        #expect(Inspection.parseISO8601("1970-01-01T00:00:00Z") == 0)
        #expect(Inspection.parseISO8601("2023-04-27T21:51:54Z") == 1_682_632_314)
    }

    @Test(arguments: TPMVectors.all)
    func vector(_ v: TPMVector) throws {
        let (result, trace) = try v.run()
        switch result {
        case .success(let verified):
            #expect(v.expectOK, "\(v.id) verified but the source expects failure: \(v.json["why"]?.stringValue ?? "")")
            #expect(verified.format == "tpm")
            #expect(verified.attestationType == .attCA)
            #expect(!verified.trustPath.isEmpty)
            // Every §8.3.2 / §8.3.1 check ran and passed.
            let passed = Set(trace.checks.filter(\.passed).map(\.name))
            for check in TPMAttestationTests.expectedChecks {
                #expect(passed.contains(check), "\(v.id): \(check) did not run")
            }
            // With trust anchors configured, the AIK chain was validated to one of them at verifyAt.
            if v.json["trustAnchors"] != nil {
                #expect(passed.contains("attestation.trustPath"))
            }
        case .failure(let error):
            let failed = trace.checks.first { !$0.passed }.map { "\($0.name): \($0.detail)" } ?? error.description
            #expect(!v.expectOK, "\(v.id) failed: \(failed)")
            // The one tpm vector expected to fail is an AAGUID extension mismatch.
            #expect(error.code == .attestationInvalid)
        }
    }

    @Test func aaguidMismatchIsTheCheckThatFails() throws {
        let (result, trace) = try TPMVectors.named("sw-tpm-aaguid-ext-mismatch").run()
        #expect(throws: WebAuthnError(.attestationInvalid, "")) { try result.get() }
        #expect(trace.checks.first { !$0.passed }?.name == "attestation.aaguidExtension")
    }

    @Test func bothSANLayoutsAreRead() throws {
        // One multi-valued RDN (non-compliant but real) and three single-valued RDNs (per profile).
        for id in ["sw-tpm-san-non-compliant", "sw-tpm-san-spec-compliant"] {
            let (result, trace) = try TPMVectors.named(id).run()
            #expect(throws: Never.self) { try result.get() }
            #expect(trace.checks.contains { $0.name == "attestation.tpm.aikSAN" && $0.passed })
        }
    }
}

// MARK: - Mutations of real statements

/// A tpm vector's attestation object taken apart so one attStmt member can be changed.
struct TPMStatementEditor {
    let vector: TPMVector
    var attStmt: [CBORPair]
    let authData: [UInt8]

    init(_ vector: TPMVector) throws {
        self.vector = vector
        let encoded = try #require(vector.json["response"]?["response"]?["attestationObject"]?.stringValue)
        let object = try CBORDecoder.decode(try #require(Base64URL.decode(encoded)))
        attStmt = try #require(object[text: "attStmt"]?.mapValue)
        authData = try #require(object[text: "authData"]?.bytesValue)
    }

    func bytes(_ key: String) throws -> [UInt8] {
        try #require(attStmt.first { $0.key == .text(key) }?.value.bytesValue)
    }

    mutating func set(_ key: String, _ value: CBORValue?) {
        attStmt.removeAll { $0.key == .text(key) }
        if let value { attStmt.append(CBORPair(.text(key), value)) }
    }

    /// The vector's response JSON with this attestation object in place of the original.
    func response() throws -> [UInt8] {
        let object = CBORValue.map([CBORPair(.text("fmt"), .text("tpm")), CBORPair(.text("attStmt"), .map(attStmt)),
                                    CBORPair(.text("authData"), .bytes(authData))])
        let encoded = Base64URL.encode(CBOREncoder.encode(object))
        guard case .object(var outer) = try #require(vector.json["response"]),
              let i = outer.firstIndex(where: { $0.key == "response" }),
              case .object(var inner) = outer[i].value,
              let j = inner.firstIndex(where: { $0.key == "attestationObject" }) else {
            throw TPMTestError.shape
        }
        inner[j].value = .string(encoded)
        outer[i].value = .object(inner)
        return JSONValue.object(outer).serialized()
    }

    /// Verifies the edited statement; returns the error and the name of the first failed check.
    func verifyFailure() throws -> (WebAuthnError?, String?) {
        let (result, trace) = try vector.run(response: try response())
        switch result {
        case .success: return (nil, nil)
        case .failure(let error): return (error, trace.checks.first { !$0.passed }?.name)
        }
    }
}

enum TPMTestError: Error { case shape }

/// Offsets inside TPMS_ATTEST: magic (4) | type (2) | qualifiedSigner TPM2B | extraData TPM2B | …
func extraDataOffset(_ certInfo: [UInt8]) -> Int {
    let signerSize = Int(certInfo[6]) << 8 | Int(certInfo[7])
    return 8 + signerSize + 2
}

extension TPMAttestationTests {
    /// An ECC credential with an ES256 AIK (W3C) and an RSA credential with an RS1 AIK (Windows Hello).
    static let bases = ["spec-reg-TPMES256", "py-tpm-surfacepro4-intel"]

    @Test(arguments: bases)
    func unmodifiedStatementStillVerifies(_ id: String) throws {
        let editor = try TPMStatementEditor(try TPMVectors.named(id))
        let (error, _) = try editor.verifyFailure()
        #expect(error == nil, "re-encoding the attestation object changed the outcome: \(String(describing: error))")
    }

    @Test(arguments: bases)
    func pubAreaKeyChanged(_ id: String) throws {
        var editor = try TPMStatementEditor(try TPMVectors.named(id))
        var pubArea = try editor.bytes("pubArea")
        pubArea[pubArea.count - 1] ^= 0x01  // last byte of unique (modulus or y)
        editor.set("pubArea", .bytes(pubArea))
        let (error, check) = try editor.verifyFailure()
        #expect(error?.code == .attestationInvalid)
        #expect(check == "attestation.tpm.pubAreaKey")
    }

    @Test(arguments: bases)
    func pubAreaAttributesChangedBreaksTheName(_ id: String) throws {
        var editor = try TPMStatementEditor(try TPMVectors.named(id))
        var pubArea = try editor.bytes("pubArea")
        pubArea[7] ^= 0x01  // objectAttributes: the key is the same, its Name is not
        editor.set("pubArea", .bytes(pubArea))
        let (error, check) = try editor.verifyFailure()
        #expect(error?.code == .attestationInvalid)
        #expect(check == "attestation.tpm.attestedName")
    }

    @Test(arguments: bases)
    func pubAreaTrailingByte(_ id: String) throws {
        var editor = try TPMStatementEditor(try TPMVectors.named(id))
        editor.set("pubArea", .bytes(try editor.bytes("pubArea") + [0]))
        let (error, _) = try editor.verifyFailure()
        #expect(error?.code == .attestationInvalid)
    }

    @Test(arguments: bases)
    func certInfoMagicChanged(_ id: String) throws {
        var editor = try TPMStatementEditor(try TPMVectors.named(id))
        var certInfo = try editor.bytes("certInfo")
        certInfo[0] = 0xFE
        editor.set("certInfo", .bytes(certInfo))
        let (error, check) = try editor.verifyFailure()
        #expect(error?.code == .attestationInvalid)
        #expect(check == "attestation.tpm.certInfoMagic")
    }

    @Test(arguments: bases)
    func certInfoTypeChanged(_ id: String) throws {
        var editor = try TPMStatementEditor(try TPMVectors.named(id))
        var certInfo = try editor.bytes("certInfo")
        certInfo[5] = 0x18  // TPM_ST_ATTEST_QUOTE
        editor.set("certInfo", .bytes(certInfo))
        let (error, check) = try editor.verifyFailure()
        #expect(error?.code == .attestationInvalid)
        #expect(check == "attestation.tpm.certInfoType")
    }

    @Test(arguments: bases)
    func extraDataChanged(_ id: String) throws {
        var editor = try TPMStatementEditor(try TPMVectors.named(id))
        var certInfo = try editor.bytes("certInfo")
        certInfo[extraDataOffset(certInfo)] ^= 0x80
        editor.set("certInfo", .bytes(certInfo))
        let (error, check) = try editor.verifyFailure()
        #expect(error?.code == .attestationInvalid)
        #expect(check == "attestation.tpm.extraData")
    }

    @Test(arguments: bases)
    func attestedNameChanged(_ id: String) throws {
        var editor = try TPMStatementEditor(try TPMVectors.named(id))
        var certInfo = try editor.bytes("certInfo")
        // attested.name follows clockInfo (17) and firmwareVersion (8) after extraData.
        let extra = extraDataOffset(certInfo)
        let extraSize = Int(certInfo[extra - 2]) << 8 | Int(certInfo[extra - 1])
        let nameData = extra + extraSize + 17 + 8 + 2
        certInfo[nameData + 5] ^= 0x01
        editor.set("certInfo", .bytes(certInfo))
        let (error, check) = try editor.verifyFailure()
        #expect(error?.code == .attestationInvalid)
        #expect(check == "attestation.tpm.attestedName")
    }

    @Test(arguments: bases)
    func clockInfoChangedBreaksTheSignature(_ id: String) throws {
        // §8.3.2 ignores clockInfo's value, but it is signed: changing it must fail the signature.
        var editor = try TPMStatementEditor(try TPMVectors.named(id))
        var certInfo = try editor.bytes("certInfo")
        let extra = extraDataOffset(certInfo)
        let extraSize = Int(certInfo[extra - 2]) << 8 | Int(certInfo[extra - 1])
        certInfo[extra + extraSize + 3] ^= 0x01
        editor.set("certInfo", .bytes(certInfo))
        let (error, check) = try editor.verifyFailure()
        #expect(error?.code == .attestationInvalid)
        #expect(check == "attestation.tpm.signature")
    }

    @Test(arguments: bases)
    func signatureChanged(_ id: String) throws {
        var editor = try TPMStatementEditor(try TPMVectors.named(id))
        var sig = try editor.bytes("sig")
        sig[sig.count - 1] ^= 0x01
        editor.set("sig", .bytes(sig))
        let (error, check) = try editor.verifyFailure()
        #expect(error?.code == .attestationInvalid)
        #expect(check == "attestation.tpm.signature")
    }

    @Test(arguments: bases)
    func emptySignature(_ id: String) throws {
        var editor = try TPMStatementEditor(try TPMVectors.named(id))
        editor.set("sig", .bytes([]))
        let (error, check) = try editor.verifyFailure()
        #expect(error?.code == .attestationInvalid)
        #expect(check == "attestation.tpm.signature")
    }

    @Test(arguments: bases)
    func wrongVersion(_ id: String) throws {
        var editor = try TPMStatementEditor(try TPMVectors.named(id))
        editor.set("ver", .text("1.2"))
        let (error, check) = try editor.verifyFailure()
        #expect(error?.code == .attestationInvalid)
        #expect(check == "attestation.tpm.ver")
    }

    @Test(arguments: bases)
    func missingX5cIsECDAAAndUnsupported(_ id: String) throws {
        var editor = try TPMStatementEditor(try TPMVectors.named(id))
        editor.set("x5c", nil)
        let (error, check) = try editor.verifyFailure()
        #expect(error?.code == .attestationInvalid)
        #expect(check == "attestation.tpm.x5c")

        editor.set("ecdaaKeyId", .bytes([UInt8](repeating: 1, count: 32)))
        let (error2, check2) = try editor.verifyFailure()
        #expect(error2?.code == .attestationInvalid)
        #expect(check2 == "attestation.tpm.noECDAA")
    }

    @Test(arguments: bases)
    func unexpectedMember(_ id: String) throws {
        var editor = try TPMStatementEditor(try TPMVectors.named(id))
        editor.set("extra", .bytes([1]))
        let (error, _) = try editor.verifyFailure()
        #expect(error?.code == .attestationInvalid)
    }

    @Test(arguments: bases)
    func algorithmThatIsNotTheAIKs(_ id: String) throws {
        // PS256 over an RS1 / ES256 statement: extraData's hash or the signature no longer fits.
        var editor = try TPMStatementEditor(try TPMVectors.named(id))
        editor.set("alg", .int(COSEAlgorithm.ps512.rawValue))
        let (error, _) = try editor.verifyFailure()
        #expect(error?.code == .attestationInvalid)
    }

    @Test(arguments: bases)
    func unsupportedAlgorithms(_ id: String) throws {
        for alg in [COSEAlgorithm.edDSA.rawValue, -48, 12345] {
            var editor = try TPMStatementEditor(try TPMVectors.named(id))
            editor.set("alg", .int(alg))
            let (error, _) = try editor.verifyFailure()
            #expect(error?.code == .algorithmUnsupported, "alg \(alg)")
        }
    }

    @Test(arguments: bases)
    func wrongTypedMembers(_ id: String) throws {
        for key in ["sig", "pubArea", "certInfo", "alg", "ver", "x5c"] {
            var editor = try TPMStatementEditor(try TPMVectors.named(id))
            editor.set(key, key == "alg" ? .text("RS256") : .int(7))
            let (error, _) = try editor.verifyFailure()
            #expect(error?.code == .attestationInvalid, "\(key)")
        }
    }

    @Test(arguments: bases)
    func truncatedStructuresInTheStatement(_ id: String) throws {
        let original = try TPMStatementEditor(try TPMVectors.named(id))
        for key in ["pubArea", "certInfo"] {
            let full = try original.bytes(key)
            for length in stride(from: 0, to: full.count, by: 7) {
                var editor = original
                editor.set(key, .bytes(Array(full.prefix(length))))
                let (error, _) = try editor.verifyFailure()
                #expect(error?.code == .attestationInvalid, "\(key) cut to \(length)")
            }
        }
    }
}

// MARK: - Structure parsers on hostile input

extension TPMAttestationTests {
    static func realStructures() throws -> [(pubArea: [UInt8], certInfo: [UInt8])] {
        try bases.map { id in
            let editor = try TPMStatementEditor(try TPMVectors.named(id))
            return (try editor.bytes("pubArea"), try editor.bytes("certInfo"))
        }
    }

    @Test func realStructuresParse() throws {
        for (pubArea, certInfo) in try Self.realStructures() {
            let p = try TPMTPublic(bytes: pubArea)
            #expect(p.nameAlg == TPMAlgorithm.sha256)
            let c = try TPMSAttest(bytes: certInfo)
            #expect(c.magic == TPMSAttest.generatedValue)
            #expect(c.type == TPMSAttest.attestCertify)
            #expect(c.certify?.name.count == 34)
        }
    }

    @Test func everyTruncationIsRefused() throws {
        for (pubArea, certInfo) in try Self.realStructures() {
            for length in 0..<pubArea.count {
                #expect(throws: WebAuthnError(.attestationInvalid, "")) { try TPMTPublic(bytes: Array(pubArea.prefix(length))) }
            }
            for length in 0..<certInfo.count {
                #expect(throws: WebAuthnError(.attestationInvalid, "")) { try TPMSAttest(bytes: Array(certInfo.prefix(length))) }
            }
        }
    }

    @Test func oversizedLengthsAreRefused() throws {
        for (pubArea, certInfo) in try Self.realStructures() {
            var p = pubArea
            p[8] = 0xFF; p[9] = 0xFF  // authPolicy.size
            #expect(throws: WebAuthnError(.attestationInvalid, "")) { try TPMTPublic(bytes: p) }
            var c = certInfo
            c[6] = 0xFF; c[7] = 0xFF  // qualifiedSigner.size
            #expect(throws: WebAuthnError(.attestationInvalid, "")) { try TPMSAttest(bytes: c) }
        }
    }

    @Test func unknownTypesAndSchemesAreRefused() throws {
        for (pubArea, _) in try Self.realStructures() {
            var p = pubArea
            p[1] = 0x08  // TPM_ALG_KEYEDHASH
            #expect(throws: WebAuthnError(.attestationInvalid, "")) { try TPMTPublic(bytes: p) }
        }
    }

    @Test func garbageNeverCrashes() {
        // Deterministic pseudo-random inputs (xorshift), including TPM-looking headers.
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt8 {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        }
        for round in 0..<3000 {
            var bytes = (0..<(round % 160)).map { _ in next() }
            if round % 3 == 0, bytes.count >= 6 { bytes[0] = 0x00; bytes[1] = round % 2 == 0 ? 0x01 : 0x23; bytes[2] = 0; bytes[3] = 0x0B }
            if round % 3 == 1, bytes.count >= 6 { bytes[0...5] = [0xFF, 0x54, 0x43, 0x47, 0x80, 0x17] }
            _ = try? TPMTPublic(bytes: bytes)
            _ = try? TPMSAttest(bytes: bytes)
            _ = try? TPMDeviceAttributes(subjectAlternativeName: bytes)
            _ = strictBasicConstraintsCA(bytes)
        }
    }
}

// MARK: - AIK certificate subjectAlternativeName (§8.3.1)

/// Minimal DER writer for hand-made SAN values.
enum DERBuild {
    static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        let n = content.count
        let length: [UInt8] = n < 0x80 ? [UInt8(n)] : n < 0x100 ? [0x81, UInt8(n)] : [0x82, UInt8(n >> 8), UInt8(n & 0xFF)]
        return [tag] + length + content
    }
    static func oid(_ dotted: String) -> [UInt8] {
        let arcs = dotted.split(separator: ".").compactMap { UInt64($0) }
        var body: [UInt8] = [UInt8(arcs[0] * 40 + arcs[1])]
        for arc in arcs.dropFirst(2) {
            var chunk: [UInt8] = [UInt8(arc & 0x7F)]
            var v = arc >> 7
            while v > 0 { chunk.insert(UInt8(v & 0x7F) | 0x80, at: 0); v >>= 7 }
            body += chunk
        }
        return tlv(0x06, body)
    }
    static func attribute(_ oid: String, _ value: String) -> [UInt8] {
        tlv(0x30, Self.oid(oid) + tlv(0x0C, Array(value.utf8)))
    }
    /// GeneralNames with one directoryName built from `rdns` (each inner array is one RDN SET).
    static func san(_ rdns: [[(String, String)]]) -> [UInt8] {
        let name = tlv(0x30, rdns.flatMap { rdn in tlv(0x31, rdn.flatMap { attribute($0.0, $0.1) }) })
        return tlv(0x30, tlv(0xA4, name))
    }
}

extension TPMAttestationTests {
    static let m = TPMDeviceAttributes.manufacturerOID, model = TPMDeviceAttributes.modelOID, ver = TPMDeviceAttributes.versionOID

    @Test func sanAsOneMultiValuedRDN() throws {
        let san = DERBuild.san([[(Self.ver, "id:13"), (Self.model, "NPCT6xx"), (Self.m, "id:4E544300")]])
        let attrs = try TPMDeviceAttributes(subjectAlternativeName: san)
        #expect(attrs.manufacturerID == 0x4E54_4300)
        #expect(attrs.model == "NPCT6xx")
        #expect(attrs.version == "id:13")
    }

    @Test func sanAsSeparateRDNs() throws {
        let san = DERBuild.san([[(Self.m, "id:53544D20")], [(Self.model, "ST33")], [(Self.ver, "id:00490008")]])
        let attrs = try TPMDeviceAttributes(subjectAlternativeName: san)
        #expect(attrs.manufacturerID == 0x5354_4D20)
        #expect(TPMAttestation.registeredVendors.contains(try #require(attrs.manufacturerID)))
    }

    @Test func sanMissingOrDuplicatedAttributes() {
        let cases: [[[(String, String)]]] = [
            [[(Self.model, "x"), (Self.ver, "id:1")]],                                    // no manufacturer
            [[(Self.m, "id:4E544300"), (Self.ver, "id:1")]],                              // no model
            [[(Self.m, "id:4E544300"), (Self.model, "x")]],                               // no version
            [[(Self.m, "id:4E544300")], [(Self.m, "id:494E5443")], [(Self.model, "x")], [(Self.ver, "1")]],  // two manufacturers
            [[(Self.m, ""), (Self.model, "x"), (Self.ver, "1")]],                         // empty manufacturer
        ]
        for rdns in cases {
            #expect(throws: WebAuthnError(.attestationInvalid, "")) {
                try TPMDeviceAttributes(subjectAlternativeName: DERBuild.san(rdns))
            }
        }
    }

    @Test func sanTruncationsAreRefused() {
        let san = DERBuild.san([[(Self.m, "id:4E544300"), (Self.model, "NPCT6xx"), (Self.ver, "id:13")]])
        for length in 0..<san.count {
            #expect(throws: WebAuthnError(.attestationInvalid, "")) {
                try TPMDeviceAttributes(subjectAlternativeName: Array(san.prefix(length)))
            }
        }
    }

    @Test func manufacturerIdFormat() throws {
        func id(_ text: String) throws -> UInt32? {
            try TPMDeviceAttributes(subjectAlternativeName: DERBuild.san([[(Self.m, text), (Self.model, "x"), (Self.ver, "1")]])).manufacturerID
        }
        #expect(try id("id:FFFFF1D0") == 0xFFFF_F1D0)
        #expect(try id("id:4e544300") == 0x4E54_4300)
        #expect(try id("4E544300") == nil)
        #expect(try id("id:4E5443") == nil)
        #expect(try id("id:+E544300") == nil)
        #expect(try id("id:4E544300 ") == nil)
        // Not in the TCG registry and not a test id.
        #expect(!TPMAttestation.registeredVendors.contains(0x1234_5678) && !TPMAttestation.testVendors.contains(0x1234_5678))
    }

    @Test func basicConstraintsParsing() {
        #expect(strictBasicConstraintsCA([0x30, 0x00]) == false)
        #expect(strictBasicConstraintsCA([0x30, 0x03, 0x01, 0x01, 0x00]) == false)
        #expect(strictBasicConstraintsCA([0x30, 0x03, 0x01, 0x01, 0xFF]) == true)
        #expect(strictBasicConstraintsCA([0x30, 0x06, 0x01, 0x01, 0xFF, 0x02, 0x01, 0x00]) == true)
        #expect(strictBasicConstraintsCA([0x30, 0x03, 0x04, 0x01, 0x00]) == nil)
        #expect(strictBasicConstraintsCA([0x30, 0x03, 0x01, 0x01]) == nil)
    }
}
