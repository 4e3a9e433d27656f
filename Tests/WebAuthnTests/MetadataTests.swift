import Crypto
import Foundation
import JSON
import Testing
import WebAuthn
import WebAuthnTesting

/// A test PKI: an MDS root and BLOB signer, a vendor root → intermediate → packed attestation
/// leaf for the SoftAuthenticator, and a BLOB with that vendor's statement.
enum MetadataFixture {
    static let now: Int64 = 1_800_000_000  // Fixture.policy's clock
    static let aaguid: [UInt8] = [0x6d, 0x44, 0xba, 0x9b, 0xf6, 0xec, 0x2e, 0x49, 0xb9, 0x30, 0x0c, 0x8f, 0xe9, 0x20, 0xcb, 0x73]
    static let mds = TestMetadataService()
    static let vendorRoot = TestCertificateAuthority.root("Latchkey Test Vendor Root")
    static let vendorCA = vendorRoot.intermediate("Latchkey Test Vendor Attestation CA")
    static let identity = vendorCA.packedAttestation(aaguid: aaguid)
    static let otherRoot = TestCertificateAuthority.root("Some Other Vendor Root")

    static func entry(_ change: (inout TestMetadataEntry) -> Void = { _ in }) -> TestMetadataEntry {
        var e = TestMetadataEntry(aaguid: aaguid, description: "Latchkey Test Key", roots: [vendorRoot.certificate],
                                  algorithms: [.es256])
        e.icon = "data:image/png;base64,iVBORw0KGgo="
        change(&e)
        return e
    }

    static func blob(_ entries: [TestMetadataEntry] = [entry()], _ change: (inout MetadataBLOBBuilder) -> Void = { _ in })
        throws(WebAuthnError) -> MetadataBLOB {
        var b = MetadataBLOBBuilder(entries: entries)
        change(&b)
        return try MetadataBLOB.verify(bytes: mds.blob(b), roots: [mds.root.certificate], at: now)
    }

    static func registration(format: (AttestationIdentity) -> RegistrationFormat = { .packedFull($0) }) -> RegistrationBuilder {
        let auth = SoftAuthenticator(algorithm: .es256, aaguid: aaguid)
        var b = auth.registration(challenge: Fixture.challenge, rpId: Fixture.rpId, origin: Fixture.origin)
        b.format = format(identity)
        return b
    }

    static func register(_ b: RegistrationBuilder = registration(), metadata: MetadataPolicy) throws(WebAuthnError) -> VerifiedRegistration {
        try Fixture.register(b, policy: Fixture.policy { $0.metadata = metadata })
    }
}

@Suite struct MetadataBLOBTests {
    @Test func shippedFIDORootIsGlobalSignR3ByFingerprint() throws {
        let roots = FIDOMetadataRoot.certificates
        #expect(roots.count == 1)
        let root = try #require(roots.first)
        let hex = Digest.sha256(root.der).map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
        #expect(hex == FIDOMetadataRoot.sha256)
        #expect(root.commonName == "GlobalSign")
        #expect(root.isSelfIssued)
    }

    @Test(arguments: [false, true])
    func goodBLOBLoadsWithEveryEntryDecoded(rsa: Bool) throws {
        let mds = TestMetadataService(rsa: rsa)
        var u2f = TestMetadataEntry(aaguid: nil, description: "Latchkey Test U2F", roots: [MetadataFixture.vendorRoot.certificate])
        u2f.attestationCertificateKeyIdentifiers = ["0123456789abcdef0123456789abcdef01234567"]
        var b = MetadataBLOBBuilder(entries: [MetadataFixture.entry(), u2f])
        b.number = 42
        b.algorithm = rsa ? "RS256" : "ES256"
        let blob = try MetadataBLOB.verify(bytes: mds.blob(b), roots: [mds.root.certificate], at: MetadataFixture.now)
        #expect(blob.number == 42)
        #expect(blob.nextUpdate == "2099-01-01")
        #expect(blob.entries.count == 2 && blob.skipped.isEmpty)
        let e = try #require(blob.entry(aaguid: MetadataFixture.aaguid))
        let s = try #require(e.statement)
        #expect(s.description == "Latchkey Test Key")
        #expect(s.icon == "data:image/png;base64,iVBORw0KGgo=")
        #expect(s.attestationRootCertificates.map(\.der) == [MetadataFixture.vendorRoot.certificate.der])
        #expect(s.authenticationAlgorithms == ["secp256r1_ecdsa_sha256_raw"] && s.coseAlgorithms == [.es256])
        #expect(s.attestationTypes == ["basic_full"])
        #expect(e.latestStatus?.status == AuthenticatorStatus("FIDO_CERTIFIED_L1") && e.certification == .l1)
        #expect(blob.entry(keyIdentifier: "0123456789ABCDEF0123456789ABCDEF01234567")?.statement?.description == "Latchkey Test U2F")
    }

    @Test func anEntryThatDoesNotDecodeIsSkippedNotTrusted() throws {
        let blob = try MetadataFixture.blob { $0.entries.append(.object([("aaguid", "not-a-uuid"), ("statusReports", [])])) }
        #expect(blob.entries.count == 1)
        #expect(blob.skipped.map(\.index) == [1])
    }

    @Test func badSignatureIsRefused() {
        #expect(throws: WebAuthnError(.metadataInvalid, "")) { try MetadataFixture.blob { $0.corruptSignature = true } }
    }

    @Test func signerFromAnotherRootIsRefused() {
        let other = TestMetadataService()
        #expect(throws: WebAuthnError(.metadataInvalid, "")) {
            try MetadataBLOB.verify(bytes: other.blob(MetadataBLOBBuilder()), roots: [MetadataFixture.mds.root.certificate], at: MetadataFixture.now)
        }
    }

    @Test func expiredSignerIsRefused() {
        let mds = TestMetadataService(signerNotAfter: MetadataFixture.now - 86400)
        let trace = VerificationTrace()
        #expect(throws: WebAuthnError(.metadataInvalid, "")) {
            try MetadataBLOB.verify(bytes: mds.blob(MetadataBLOBBuilder()), roots: [mds.root.certificate], at: MetadataFixture.now, trace: trace)
        }
        #expect(trace.checks.last?.name == "blob.chain" && trace.checks.last?.detail.contains("expired") == true)
    }

    @Test func revokedSignerIsRefused() throws {
        let mds = MetadataFixture.mds
        let bytes = mds.blob(MetadataBLOBBuilder())
        _ = try MetadataBLOB.verify(bytes: bytes, roots: [mds.root.certificate], crls: [mds.root.crl(revoking: [])], at: MetadataFixture.now)
        let trace = VerificationTrace()
        #expect(throws: WebAuthnError(.metadataInvalid, "")) {
            try MetadataBLOB.verify(bytes: bytes, roots: [mds.root.certificate], crls: [mds.revokingSigner], at: MetadataFixture.now, trace: trace)
        }
        #expect(trace.checks.last?.detail.contains("revoked") == true)
    }

    @Test func aCRLThatIsNotCurrentFailsClosed() {
        let mds = MetadataFixture.mds
        let old = mds.root.crl(revoking: [], thisUpdate: MetadataFixture.now - 200_000, nextUpdate: MetadataFixture.now - 100_000)
        #expect(throws: WebAuthnError(.metadataInvalid, "")) {
            try MetadataBLOB.verify(bytes: mds.blob(MetadataBLOBBuilder()), roots: [mds.root.certificate], crls: [old], at: MetadataFixture.now)
        }
    }

    @Test func staleNextUpdateIsRefusedPastTheAllowance() throws {
        // nextUpdate 2027-01-01; now is 2027-01-15.
        let bytes = MetadataFixture.mds.blob({ var b = MetadataBLOBBuilder(); b.nextUpdate = "2027-01-01"; return b }())
        let now: Int64 = 1_799_971_200 + 14 * 86400
        let root = [MetadataFixture.mds.root.certificate]
        _ = try MetadataBLOB.verify(bytes: bytes, roots: root, maxStaleSeconds: 30 * 86400, at: now)
        #expect(throws: WebAuthnError(.metadataInvalid, "")) { try MetadataBLOB.verify(bytes: bytes, roots: root, maxStaleSeconds: 7 * 86400, at: now) }
    }

    @Test(arguments: ["", "a.b", "e30.e30.", "!!.e30.AA"])
    func malformedBLOBsAreRefused(_ text: String) {
        #expect(throws: WebAuthnError(.metadataInvalid, "")) {
            try MetadataBLOB.verify(bytes: Array(text.utf8), roots: [MetadataFixture.mds.root.certificate], at: MetadataFixture.now)
        }
    }

    @Test func crlsParseFromDERAndPEM() throws {
        let crl = MetadataFixture.mds.revokingSigner
        #expect(try CertificateRevocationList.parse(crl.der).count == 1)
        let pem = PEM.encode(crl.der, label: "X509 CRL") + PEM.encode(crl.der, label: "X509 CRL")
        let parsed = try CertificateRevocationList.parse(Array(pem.utf8))
        #expect(parsed.count == 2)
        #expect(parsed[0].lists(MetadataFixture.mds.signer.chain[0]))
        #expect(parsed[0].isIssued(by: MetadataFixture.mds.root.certificate))
        #expect(!parsed[0].isIssued(by: MetadataFixture.otherRoot.certificate))
    }
}

/// SPEC "Authenticator metadata": the BLOB's signing certificate (x5c leaf) must name
/// `mds.fidoalliance.org` (LATCHKEY_MDS_SIGNER: another name) in a subjectAltName dNSName, else —
/// only when it has none — in its subject CN. Any other certificate the root issued is refused.
@Suite struct MetadataSignerNameTests {
    /// Verifies a BLOB signed by a certificate with `cn` and `dns` under a fresh test root.
    static func verify(cn: String = "Latchkey Test MDS BLOB Signer", dns: [String], signer: String = MetadataBLOB.defaultSigner,
                       trace: VerificationTrace? = nil) throws(WebAuthnError) -> MetadataBLOB {
        let mds = TestMetadataService(signerCommonName: cn, signerDNSNames: dns)
        return try MetadataBLOB.verify(bytes: mds.blob(MetadataBLOBBuilder()), roots: [mds.root.certificate], signer: signer,
                                       at: MetadataFixture.now, trace: trace)
    }

    static func refusal(cn: String = "Latchkey Test MDS BLOB Signer", dns: [String], signer: String = MetadataBLOB.defaultSigner) -> String? {
        let trace = VerificationTrace()
        do { _ = try verify(cn: cn, dns: dns, signer: signer, trace: trace); return nil } catch {
            #expect(error.code == .metadataInvalid)
            #expect(trace.checks.last?.name == "blob.signer", "\(trace.checks.map(\.name))")
            return error.reason
        }
    }

    @Test func theRealMDSSignerChainsToTheShippedRootAndCarriesTheDefaultName() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/mds/fido-mds3-blob-signer-2023.pem")
        let chain = try Certificate.parsePEM(try String(contentsOf: url, encoding: .utf8))
        #expect(chain.count == 2)
        let leaf = try #require(chain.first)
        #expect(try leaf.subjectAltNameDNSNames == ["mds.fidoalliance.org"])
        #expect(leaf.commonName == "mds.fidoalliance.org")
        // 2024-01-01, inside the leaf's validity: the real x5c leads to the shipped GlobalSign root.
        let path = try CertificatePath.validate(leaf: leaf, intermediates: Array(chain.dropFirst()), anchors: FIDOMetadataRoot.certificates,
                                                at: 1_704_067_200)
        #expect(path.last?.der == FIDOMetadataRoot.certificates.first?.der)
        try MetadataBLOB.requireSignerName(leaf, MetadataBLOB.defaultSigner)
        #expect(throws: WebAuthnError(.metadataInvalid, "")) { try MetadataBLOB.requireSignerName(leaf, "mds3.fidoalliance.org") }
        // Its intermediate, also issued under the root, names no signer: it could not sign a BLOB.
        #expect(throws: WebAuthnError(.metadataInvalid, "")) { try MetadataBLOB.requireSignerName(chain[1], MetadataBLOB.defaultSigner) }
    }

    @Test(arguments: [["mds.fidoalliance.org"], ["MDS.FidoAlliance.ORG"], ["example.org", "mds.fidoalliance.org"]])
    func aDNSNameOfTheSubjectAltNameNamesTheSigner(_ dns: [String]) throws {
        #expect(try Self.verify(dns: dns).number == 1)
    }

    @Test func withoutADNSNameTheSubjectCNNamesTheSigner() throws {
        #expect(try Self.verify(cn: "mds.fidoalliance.org", dns: []).number == 1)
        #expect(try Self.verify(cn: "Mds.FIDOalliance.org", dns: []).number == 1)
        #expect(Self.refusal(cn: "Latchkey Test MDS BLOB Signer", dns: [])?.contains("subject CN") == true)
    }

    @Test func aDNSNameElsewhereIsNotOverriddenByTheCN() {
        // RFC 6125 §6.4.4: with a DNS-ID present, the CN is not looked at.
        let reason = Self.refusal(cn: "mds.fidoalliance.org", dns: ["shop.example"])
        #expect(reason?.contains("subjectAltName dNSName is shop.example") == true, "\(reason ?? "accepted")")
    }

    @Test(arguments: ["*.fidoalliance.org", "*", "fidoalliance.org", "mds.fidoalliance.org.", "mds.fidoalliance.org.evil.example",
                      "evilmds.fidoalliance.org", "x.mds.fidoalliance.org", "mds.fidoalliance.or", " mds.fidoalliance.org"])
    func onlyTheExactNameCounts(_ name: String) {
        #expect(Self.refusal(dns: [name]) != nil, "\(name)")
        #expect(Self.refusal(cn: name, dns: []) != nil, "CN \(name)")
    }

    @Test func anEmptyNameNamesNothing() {
        #expect(Self.refusal(dns: [""]) != nil)
        #expect(Self.refusal(dns: [""], signer: "") != nil)
    }

    @Test func letterCaseFoldsForASCIIOnly() {
        // U+212A KELVIN SIGN lower-cases to "k" in Unicode; DNS names fold A–Z only (RFC 4343).
        #expect(Self.refusal(cn: "\u{212A}ey.example", dns: [], signer: "key.example") != nil)
        #expect(Self.refusal(cn: "KEY.example", dns: [], signer: "key.example") == nil)
    }

    @Test func anotherSignerNameCanBeConfigured() throws {
        #expect(try Self.verify(dns: ["mds.conformance.example"], signer: "mds.conformance.example").number == 1)
        #expect(Self.refusal(dns: ["mds.conformance.example"])?.contains("not mds.fidoalliance.org") == true)
        #expect(Self.refusal(dns: ["mds.fidoalliance.org"], signer: "mds.conformance.example") != nil)
    }

    @Test func aSubjectAltNameThatDoesNotParseIsRefused() {
        let root = TestCertificateAuthority.root("Latchkey Test MDS Root")
        let broken = Certificate.Extension(oid: "2.5.29.17", critical: false, derValue: [0x30, 0x03, 0x82, 0x05, 0x61])
        let (key, leaf) = root.leaf(subject: [("CN", "mds.fidoalliance.org")], extensions: [broken])
        let blob = MetadataBLOBBuilder().signed(by: MetadataSigner(key: key, chain: [leaf]))
        #expect(throws: WebAuthnError(.metadataInvalid, "")) {
            try MetadataBLOB.verify(bytes: blob, roots: [root.certificate], at: MetadataFixture.now)
        }
    }
}

@Suite struct MetadataTrustTests {
    typealias F = MetadataFixture

    @Test func packedFullAttestationChainsToTheStatementRoot() throws {
        let v = try F.register(metadata: .loaded(try F.blob()))
        #expect(v.attestationType == .basic)
        let match = try #require(v.metadata)
        #expect(match.description == "Latchkey Test Key")
        #expect(match.matchedBy == .aaguid(F.aaguid))
        #expect(match.anchor?.der == F.vendorRoot.certificate.der)
    }

    @Test func chainingToNoMetadataRootIsRefusedAndPassesWithMetadataOff() throws {
        let blob = try F.blob([F.entry { $0.attestationRootCertificates = [F.otherRoot.certificate] }])
        let trace = VerificationTrace()
        #expect(throws: WebAuthnError(.attestationInvalid, "")) {
            try Fixture.register(F.registration(), policy: Fixture.policy { $0.metadata = .loaded(blob) }).credentialId
        }
        _ = try? RegistrationVerifier.verify(ParsedRegistration(bytes: F.registration().bytes()), expectedChallenge: Fixture.challenge,
                                             policy: Fixture.policy { $0.metadata = .loaded(blob) }, trace: trace)
        #expect(trace.checks.last?.name == "metadata.trustPath")
        #expect(trace.checks.last?.detail.contains("Some Other Vendor Root") == true)
        #expect(try F.register(metadata: .off).metadata == nil)
    }

    @Test func denyListedAAGUIDIsRefusedAndPassesWithMetadataOff() throws {
        var policy = MetadataPolicy.loaded(try F.blob())
        policy.deniedAAGUIDs = [F.aaguid]
        #expect(throws: WebAuthnError(.attestationInvalid, "")) { try F.register(metadata: policy) }
        _ = try F.register(metadata: .off)
    }

    @Test(arguments: ["REVOKED", "USER_VERIFICATION_BYPASS", "ATTESTATION_KEY_COMPROMISE", "USER_KEY_REMOTE_COMPROMISE",
                      "USER_KEY_PHYSICAL_COMPROMISE"])
    func aRefusingLatestStatusIsRefusedAndPassesWithMetadataOff(_ status: String) throws {
        let blob = try F.blob([F.entry { $0.statusReports = [("FIDO_CERTIFIED_L1", "2020-01-01"), (status, "2024-05-01")] }])
        #expect(throws: WebAuthnError(.attestationInvalid, "")) { try F.register(metadata: .loaded(blob)) }
        _ = try F.register(metadata: .off)
    }

    @Test func anOlderRefusingStatusFollowedByAFixIsAccepted() throws {
        let blob = try F.blob([F.entry { $0.statusReports = [("USER_VERIFICATION_BYPASS", "2021-01-01"), ("UPDATE_AVAILABLE", "2022-01-01")] }])
        _ = try F.register(metadata: .loaded(blob))
    }

    @Test func anAttestedRegistrationWithoutAnEntryIsRefused_selfAndNoneAreNot() throws {
        let blob = try F.blob([F.entry { $0.aaguid = [UInt8](repeating: 0x11, count: 16) }])
        #expect(throws: WebAuthnError(.attestationInvalid, "")) { try F.register(metadata: .loaded(blob)) }
        #expect(try F.register(F.registration { _ in .packedSelf }, metadata: .loaded(blob)).metadata == nil)
        #expect(try F.register(F.registration { _ in .none }, metadata: .loaded(blob)).metadata == nil)
    }

    @Test func configuredButNeverLoadedFailsClosedForAnythingButNone() throws {
        let policy = MetadataPolicy(source: .unavailable(reason: "no BLOB yet"))
        #expect(throws: WebAuthnError(.attestationInvalid, "")) { try F.register(metadata: policy) }
        #expect(throws: WebAuthnError(.attestationInvalid, "")) { try F.register(F.registration { _ in .packedSelf }, metadata: policy) }
        _ = try F.register(F.registration { _ in .none }, metadata: policy)
    }

    @Test func theStatementMustListTheAttestationType() throws {
        let blob = try F.blob([F.entry { $0.attestationTypes = ["attca"] }])
        #expect(throws: WebAuthnError(.attestationInvalid, "")) { try F.register(metadata: .loaded(blob)) }
        // Self attestation with an entry must be listed as basic_surrogate.
        #expect(throws: WebAuthnError(.attestationInvalid, "")) { try F.register(F.registration { _ in .packedSelf }, metadata: .loaded(blob)) }
        let surrogate = try F.blob([F.entry { $0.attestationTypes = ["basic_surrogate"] }])
        #expect(try F.register(F.registration { _ in .packedSelf }, metadata: .loaded(surrogate)).metadata?.anchor == nil)
    }

    @Test func theStatementMustListTheAlgorithm() throws {
        let blob = try F.blob([F.entry { $0.authenticationAlgorithms = ["ed25519_eddsa_sha512_raw"] }])
        #expect(throws: WebAuthnError(.attestationInvalid, "")) { try F.register(metadata: .loaded(blob)) }
    }

    @Test func aPackedX5cMustNotCarryTheRoot() throws {
        let withRoot = AttestationIdentity(key: F.identity.key, chain: F.identity.chain + [F.vendorRoot.certificate])
        let b = F.registration { _ in .packedFull(withRoot) }
        _ = try F.register(b, metadata: .off)
        #expect(throws: WebAuthnError(.attestationInvalid, "")) { try F.register(b, metadata: .loaded(try F.blob())) }
    }

    @Test func allowListAndCertificationLevelNarrowFurther() throws {
        let blob = try F.blob()
        var allow = MetadataPolicy.loaded(blob)
        allow.allowedAAGUIDs = [[UInt8](repeating: 0x22, count: 16)]
        #expect(throws: WebAuthnError(.attestationInvalid, "")) { try F.register(metadata: allow) }
        allow.allowedAAGUIDs = [F.aaguid]
        _ = try F.register(metadata: allow)

        var certified = MetadataPolicy.loaded(blob)
        certified.requiredCertification = .l1
        _ = try F.register(metadata: certified)
        certified.requiredCertification = .l2
        #expect(throws: WebAuthnError(.attestationInvalid, "")) { try F.register(metadata: certified) }
        // None attestation proves no model, so it cannot show a certification.
        certified.requiredCertification = .l1
        #expect(throws: WebAuthnError(.attestationInvalid, "")) { try F.register(F.registration { _ in .none }, metadata: certified) }
    }

    @Test func aRevokedAttestationCertificateIsRefusedWhereCRLsAreConfigured() throws {
        var policy = MetadataPolicy.loaded(try F.blob())
        policy.crls = [F.vendorCA.crl(revoking: [F.identity.chain[0]])]
        #expect(throws: WebAuthnError(.attestationInvalid, "")) { try F.register(metadata: policy) }
        policy.crls = [F.vendorCA.crl(revoking: [])]
        _ = try F.register(metadata: policy)
    }
}
