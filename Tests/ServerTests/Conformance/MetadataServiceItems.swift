import Crypto
import Foundation
import JSON
import LatchkeyServer
import Testing
import WebAuthn
import WebAuthnTesting

// "Metadata Service Tests": the items of the public FIDO2 server test list, offline. Each broken
// BLOB is built here and given to a conformance server of its own; a refused BLOB leaves the
// server with no metadata, so an attested registration fails closed.

enum MetadataService {
    static let group = "Server-ServerAuthenticatorAttestationResponse-Resp-1 (Metadata Service)"

    /// A conformance server whose LATCHKEY_MDS_BLOB holds `blob` (signed under `root`'s MDS service),
    /// with `crls`; also the store's refusal, when it refused.
    static func server(blob: [UInt8], mds: TestMetadataService, crls: [CertificateRevocationList] = []) throws -> (TestServer, String?) {
        let dir = try ConformanceFixture.folder(mds: mds, blob: blob, crls: crls)
        let server = try TestServer(name: "conformance-mds", configure: ConformanceFixture.configure(dir))
        let loaded = server.services.metadata.reload()
        if case .failure(let e) = loaded { return (server, e.description) }
        return (server, nil)
    }

    /// A FULL packed registration (vendor CA chain) on `server`, which must fail, and the refusal
    /// the BLOB got, which must mention `because`.
    static func refused(_ r: ConformanceRun, _ server: TestServer, _ refusal: String?, because: String) throws -> [String] {
        var problems = failed(try r.on(server).register(SoftAuthenticator(aaguid: ConformanceFixture.packedAAGUID),
                                                        .packedFull(r.fixture.packedIdentity)))
        if refusal?.contains(because) != true { problems.append("the BLOB was not refused for \(because): \(refusal ?? "it loaded")") }
        return problems
    }

    /// An MDS PKI with an intermediate: root → CA → BLOB signer; x5c = signer, CA.
    static func layered(_ base: TestMetadataService) -> (signer: MetadataSigner, ca: TestCertificateAuthority, leaf: Certificate) {
        let ca = base.root.intermediate("Latchkey Test MDS Intermediate")
        let signer = ca.metadataSigner(commonName: "Latchkey Test MDS BLOB Signer 2")
        return (signer, ca, signer.chain[0])
    }

    static var items: [ConformanceItem] {
        var g = ItemGroup(group)
        g.P("P-1", "FULL \"packed\" attestation for valid MDS metadata: the server succeeds") { r in
            succeeded(try r.register(SoftAuthenticator(aaguid: ConformanceFixture.packedAAGUID), .packedFull(r.fixture.packedIdentity)))
        }
        g.P("F-1", "FULL \"packed\" attestation for metadata whose hash can not be verified (MDS3: the payload changed after signing): the server returns an error") { r in
            var original = MetadataBLOBBuilder(entries: r.fixture.entries)
            original.number = 2
            var altered = original
            altered.number = 3
            let a = r.fixture.mds.blob(original).split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
            let b = r.fixture.mds.blob(altered).split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
            let (server, refusal) = try server(blob: Array(a[0]) + [0x2E] + Array(b[1]) + [0x2E] + Array(a[2]), mds: r.fixture.mds)
            return try refused(r, server, refusal, because: "signature")
        }
        g.P("F-2", "FULL \"packed\" attestation for metadata whose status is USER_VERIFICATION_BYPASS, ATTESTATION_KEY_COMPROMISE, USER_KEY_REMOTE_COMPROMISE or USER_KEY_PHYSICAL_COMPROMISE: the server returns an error") { r in
            var problems: [String] = []
            for (i, status) in ConformanceFixture.compromised.enumerated() {
                let aaguid = ConformanceFixture.compromisedAAGUID(i)
                let reply = try r.register(SoftAuthenticator(aaguid: aaguid), .packedFull(r.fixture.vendorCA.packedAttestation(aaguid: aaguid)))
                problems += failed(reply).map { "\(status): \($0)" }
                if reply.json?["code"]?.stringValue != "attestation_invalid" { problems.append("\(status): code is not attestation_invalid") }
            }
            return problems
        }
        g.P("F-3", "FULL \"packed\" attestation for metadata whose signature can not be verified: the server returns an error") { r in
            var blob = MetadataBLOBBuilder(entries: r.fixture.entries)
            blob.corruptSignature = true
            let (server, refusal) = try server(blob: r.fixture.mds.blob(blob), mds: r.fixture.mds)
            return try refused(r, server, refusal, because: "signature")
        }
        g.P("F-4", "FULL \"packed\" attestation for metadata whose certificate chain can not be verified: the server returns an error") { r in
            let stranger = TestMetadataService()
            let (server, refusal) = try server(blob: stranger.blob(MetadataBLOBBuilder(entries: r.fixture.entries)), mds: r.fixture.mds)
            return try refused(r, server, refusal, because: "certificate path")
        }
        g.P("F-5", "FULL \"packed\" attestation for metadata whose metadata service intermediate certificate is revoked: the server returns an error") { r in
            let (signer, ca, _) = layered(r.fixture.mds)
            let blob = MetadataBLOBBuilder(entries: r.fixture.entries).signed(by: signer)
            let (server, refusal) = try server(blob: blob, mds: r.fixture.mds,
                                               crls: [r.fixture.mds.root.crl(revoking: [ca.certificate]), ca.crl(revoking: [])])
            return try refused(r, server, refusal, because: "revoked")
        }
        g.P("F-6", "FULL \"packed\" attestation for metadata whose metadata service leaf certificate is revoked: the server returns an error") { r in
            let (signer, ca, leaf) = layered(r.fixture.mds)
            let blob = MetadataBLOBBuilder(entries: r.fixture.entries).signed(by: signer)
            let (server, refusal) = try server(blob: blob, mds: r.fixture.mds,
                                               crls: [r.fixture.mds.root.crl(revoking: []), ca.crl(revoking: [leaf])])
            return try refused(r, server, refusal, because: "revoked")
        }
        return g.items
    }

    /// Items of the public list this offline run cannot perform, and why.
    static let notRun: [(group: String, id: String, text: String, why: String)] = [
        ("Server-ServerAuthenticatorAttestationResponse-Resp-4", "P-1",
         "OPTIONAL: SELF \"packed\" attestation for ALG_SIGN_SECP256K1_ECDSA_SHA256_RAW [AWAITS IANA]",
         "Latchkey does not verify secp256k1 (ES256K, COSE -47): not an algorithm it supports, so not offered"),
    ]
}

@Suite("FIDO2 server conformance: Metadata Service") struct MetadataServiceItems {
    @Test("Server-ServerAuthenticatorAttestationResponse-Resp-1 (Metadata Service)", arguments: MetadataService.items)
    func metadata(_ item: ConformanceItem) { check(item) }

    /// Not an item of the list: shows that F-5 and F-6 fail for the revocation alone.
    @Test("F-5/F-6 control: the same layered MDS chain with nothing revoked loads, and the registration succeeds")
    func layeredChainLoads() throws {
        let r = ConformanceRun(fixture: try ConformanceFixture.shared.get())
        let (signer, ca, _) = MetadataService.layered(r.fixture.mds)
        let blob = MetadataBLOBBuilder(entries: r.fixture.entries).signed(by: signer)
        let (server, refusal) = try MetadataService.server(blob: blob, mds: r.fixture.mds,
                                                           crls: [r.fixture.mds.root.crl(revoking: []), ca.crl(revoking: [])])
        #expect(refusal == nil, "\(refusal ?? "")")
        let reply = try r.on(server).register(SoftAuthenticator(aaguid: ConformanceFixture.packedAAGUID), .packedFull(r.fixture.packedIdentity))
        #expect(succeeded(reply).isEmpty, "\(reply)")
    }

    @Test("Items not run offline, with the reason") func notRun() {
        for item in MetadataService.notRun {
            ConformanceReport.record(group: item.group, id: item.id, text: item.text, outcome: "not run", detail: item.why)
        }
    }
}
