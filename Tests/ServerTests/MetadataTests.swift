import Crypto
import Foundation
import JSON
import LatchkeyServer
import Storage
import Testing
import WebAuthn
import WebAuthnTesting

/// LATCHKEY_MDS_*: the BLOB file, its root, CRLs; a store per instance; registration over HTTP.
enum MDSFiles {
    static let aaguid: [UInt8] = [0x1a, 0x7c, 0x00, 0x42, 0x9e, 0x10, 0x4b, 0x3d, 0x8f, 0x55, 0x60, 0x31, 0x2c, 0xd4, 0x88, 0x01]
    static let mds = TestMetadataService()
    static let vendorRoot = TestCertificateAuthority.root("Latchkey Server Test Vendor Root")
    static let identity = vendorRoot.intermediate("Latchkey Server Test Attestation CA").packedAttestation(aaguid: aaguid)

    static func entry(status: String = "FIDO_CERTIFIED_L2") -> TestMetadataEntry {
        TestMetadataEntry(aaguid: aaguid, description: "Latchkey Server Test Key", roots: [vendorRoot.certificate],
                          statusReports: [(status, "2021-02-03")])
    }

    /// A fresh folder with root.pem and blob.jwt (number `number`). Every test server shares one
    /// database, and so the last accepted BLOB number per root: a test that moves numbers up signs
    /// under a `TestMetadataService` of its own.
    static func folder(number: Int = 1, entries: [TestMetadataEntry] = [entry()], mds: TestMetadataService = MDSFiles.mds) throws -> String {
        let dir = NSTemporaryDirectory() + "latchkey-mds-\(uniqueSuffix())"
        try FileManager.default.createDirectory(atPath: dir + "/crls", withIntermediateDirectories: true)
        try Data(mds.root.certificate.pem.utf8).write(to: URL(fileURLWithPath: dir + "/root.pem"))
        try write(dir, number: number, entries: entries, mds: mds)
        return dir
    }

    static func write(_ dir: String, number: Int, entries: [TestMetadataEntry] = [entry()], mds: TestMetadataService = MDSFiles.mds,
                      change: (inout MetadataBLOBBuilder) -> Void = { _ in }) throws {
        var b = MetadataBLOBBuilder(entries: entries)
        b.number = number
        change(&b)
        try Data(mds.blob(b)).write(to: URL(fileURLWithPath: dir + "/blob.jwt"))
    }

    static func configure(_ dir: String) -> (inout Configuration) -> Void {
        { c in
            c.mdsBlobPath = dir + "/blob.jwt"
            c.mdsRootPath = dir + "/root.pem"
            c.mdsCRLDirectory = dir + "/crls"
            c.mdsPollSeconds = 0
        }
    }

    /// One instance's store on the shared test database (migrated), as `serve` builds it.
    static func store(_ dir: String?, databaseURL: String? = nil, configure more: (inout Configuration) -> Void = { _ in }) throws -> MetadataStore {
        var c = Configuration()
        c.rpId = "mds.latchkey.test"
        if let dir { configure(dir)(&c) }
        more(&c)
        let database = Database(url: try databaseURL ?? TestDatabase.url(), connections: 2)
        if databaseURL == nil { try database.migrate() }
        return Services(configuration: c, database: database).metadata
    }
}

@Suite struct MetadataStoreTests {
    @Test func aGoodBLOBLoadsAndABadOneNeverReplacesIt() throws {
        let mds = TestMetadataService()
        let dir = try MDSFiles.folder(number: 7, mds: mds)
        let store = try MDSFiles.store(dir)
        // Configured but not loaded: fail closed.
        guard case .unavailable = store.policy().source else { Issue.record("expected unavailable"); return }
        #expect(try store.reload().get().number == 7)
        #expect(store.description(aaguid: MDSFiles.aaguid) == "Latchkey Server Test Key")

        // Bad signature, stale nextUpdate, an expired signer, a revoked signer, an older number: refused, 7 stays.
        try MDSFiles.write(dir, number: 8, mds: mds) { $0.corruptSignature = true }
        store.reloadIfChanged()
        #expect(store.current.blob?.number == 7 && store.current.lastError?.contains("signature") == true)
        try MDSFiles.write(dir, number: 9, mds: mds) { $0.nextUpdate = "2001-01-01" }
        store.reloadIfChanged()
        #expect(store.current.blob?.number == 7 && store.current.lastError?.contains("nextUpdate") == true)
        let expired = TestMetadataService(signerNotAfter: 978_307_200)  // 2001
        try Data(expired.blob(MetadataBLOBBuilder())).write(to: URL(fileURLWithPath: dir + "/blob.jwt"))
        store.reloadIfChanged()
        #expect(store.current.blob?.number == 7 && store.current.lastError != nil)
        // Signed under the root by a certificate that does not name mds.fidoalliance.org (LATCHKEY_MDS_SIGNER).
        let stranger = mds.root.metadataSigner(commonName: "mds.fidoalliance.org", dnsNames: ["shop.example"])
        try Data({ var b = MetadataBLOBBuilder(entries: [MDSFiles.entry()]); b.number = 12; return b }().signed(by: stranger))
            .write(to: URL(fileURLWithPath: dir + "/blob.jwt"))
        store.reload()
        #expect(store.current.blob?.number == 7 && store.current.lastError?.contains("not mds.fidoalliance.org") == true)
        try MDSFiles.write(dir, number: 10, mds: mds)
        try Data(mds.revokingSigner.der).write(to: URL(fileURLWithPath: dir + "/crls/root.crl"))
        store.reload()
        #expect(store.current.blob?.number == 7 && store.current.lastError?.contains("revoked") == true)
        try FileManager.default.removeItem(atPath: dir + "/crls/root.crl")
        try MDSFiles.write(dir, number: 3, mds: mds)
        store.reload()
        #expect(store.current.blob?.number == 7 && store.current.lastError?.contains("older") == true)
        guard case .loaded = store.policy().source else { Issue.record("the good BLOB must stay in use"); return }

        // A good newer one replaces it.
        try MDSFiles.write(dir, number: 11, mds: mds)
        store.reloadIfChanged()
        #expect(store.current.blob?.number == 11 && store.current.lastError == nil)
    }

    /// SPEC: no rollback to an older list, across restarts and instances (the number is in PostgreSQL).
    @Test func aRestartWithAnOlderBLOBIsRefusedAndFailsClosed() throws {
        let mds = TestMetadataService()
        let dir = try MDSFiles.folder(number: 7, mds: mds)
        #expect(try MDSFiles.store(dir).reload().get().number == 7)

        // A restarted instance (nothing in memory) finds an older file: refused, attested registrations fail closed.
        try MDSFiles.write(dir, number: 6, mds: mds)
        let restarted = try MDSFiles.store(dir)
        guard case .failure(let e) = restarted.reload() else { Issue.record("an older BLOB loaded after a restart"); return }
        #expect(e.description.contains("older than the last BLOB accepted (7)"), "\(e)")
        #expect(restarted.current.blob == nil)
        guard case .unavailable = restarted.policy().source else { Issue.record("expected fail closed"); return }

        // The same BLOB again is fine; so is a newer one, which then holds every instance to it.
        try MDSFiles.write(dir, number: 7, mds: mds)
        #expect(try restarted.reload().get().number == 7)
        let other = try MDSFiles.folder(number: 9, mds: mds)
        #expect(try MDSFiles.store(other).reload().get().number == 9)
        restarted.reload()
        #expect(restarted.current.blob?.number == 7, "the good one in use stays")
        #expect(restarted.current.lastError?.contains("older than the last BLOB accepted (9)") == true)

        // Another root is another list: its numbers are its own.
        let elsewhere = try MDSFiles.folder(number: 2, mds: TestMetadataService())
        #expect(try MDSFiles.store(elsewhere).reload().get().number == 2)
    }

    @Test func withoutTheDatabaseNoBLOBIsAccepted() throws {
        let dir = try MDSFiles.folder(number: 1, mds: TestMetadataService())
        let store = try MDSFiles.store(dir, databaseURL: "postgresql://latchkey@127.0.0.1:1/none?connect_timeout=2")
        guard case .failure(let e) = store.reload() else { Issue.record("loaded without the rollback check"); return }
        #expect(e.description.contains("cannot check BLOB number 1"), "\(e)")
        guard case .unavailable = store.policy().source else { Issue.record("expected fail closed"); return }
    }

    @Test func aConfiguredSignerNameAcceptsAnotherSigner() throws {
        let mds = TestMetadataService(signerCommonName: "FIDO Conformance MDS Signer", signerDNSNames: [])
        let dir = try MDSFiles.folder(number: 1, mds: mds)
        let refused = try MDSFiles.store(dir)
        #expect(throws: MetadataLoadError.self) { try refused.reload().get() }
        #expect(refused.current.lastError?.contains("subject CN is FIDO Conformance MDS Signer, not mds.fidoalliance.org") == true)
        let configured = try MDSFiles.store(dir) { $0.mdsSigner = "fido conformance mds signer" }
        #expect(try configured.reload().get().number == 1)
    }

    @Test func withoutConfigurationMetadataIsOff() throws {
        let store = try MDSFiles.store(nil)
        #expect(!store.isConfigured)
        #expect(!store.policy().isActive)
    }

    @Test func configurationReadsTheMetadataVariables() throws {
        let c = try Configuration.fromEnvironment([
            "LATCHKEY_MDS_BLOB": "/b.jwt", "LATCHKEY_MDS_ROOT": "/r.pem", "LATCHKEY_MDS_CRLS": "/crls", "LATCHKEY_MDS_MAX_STALE": "86400",
            "LATCHKEY_AUTHENTICATORS_ALLOW": "1a7c0042-9e10-4b3d-8f55-60312cd48801, fbfc3007-154e-4ecc-8c0b-6e020557d7bd",
            "LATCHKEY_AUTHENTICATORS_DENY": "ea9b8d66-4d01-1d21-3ce4-b6b48cb575d4", "LATCHKEY_REQUIRE_CERTIFIED": "FIDO_CERTIFIED_L2",
        ])
        #expect(c.mdsBlobPath == "/b.jwt" && c.mdsRootPath == "/r.pem" && c.mdsCRLDirectory == "/crls" && c.mdsMaxStale == 86400)
        #expect(c.mdsSigner == "mds.fidoalliance.org")
        #expect(try Configuration.fromEnvironment(["LATCHKEY_MDS_SIGNER": "mds.conformance.example"]).mdsSigner == "mds.conformance.example")
        for bad in ["*.fidoalliance.org", " mds.fidoalliance.org", "mds\u{7F}", "m\u{00FC}ds.example"] {
            #expect(throws: Configuration.Invalid.self, "\(bad)") { try Configuration.fromEnvironment(["LATCHKEY_MDS_SIGNER": bad]) }
        }
        #expect(c.authenticatorsAllow?.count == 2 && c.authenticatorsDeny.count == 1 && c.requireCertified == .l2)
        #expect(throws: Configuration.Invalid.self) { try Configuration.fromEnvironment(["LATCHKEY_AUTHENTICATORS_DENY": "nope"]) }
        #expect(throws: Configuration.Invalid.self) {
            try Configuration.fromEnvironment(["LATCHKEY_MDS_BLOB": "/b", "LATCHKEY_REQUIRE_CERTIFIED": "L2"])
        }
        #expect(throws: Configuration.Invalid.self) { try Configuration.fromEnvironment(["LATCHKEY_REQUIRE_CERTIFIED": "FIDO_CERTIFIED_L1"]) }
    }
}

@Suite(.serialized) struct MetadataRegistrationTests {
    @Test func packedFullRegistrationIsVouchedForAndNamedByMetadata() throws {
        let dir = try MDSFiles.folder()
        let server = try TestServer(name: "mds-ok", configure: MDSFiles.configure(dir))
        let client = server.client()
        let authenticator = SoftAuthenticator(aaguid: MDSFiles.aaguid)
        let session = try client.signUp(authenticator, username: server.username(), format: .packedFull(MDSFiles.identity))
        #expect(session.passkey["provider"]?.stringValue == "Latchkey Server Test Key")
        let list = try client.get("/v1/passkeys", authorization: session.bearer)
        #expect(list.json?["passkeys"]?.arrayValue?.first?["provider"]?.stringValue == "Latchkey Server Test Key")
    }

    @Test func revokedDenyListedOrUnanchoredRegistrationsAreRefusedAndPassWithMetadataOff() throws {
        let other = TestCertificateAuthority.root("Not The Vendor").packedAttestation(aaguid: MDSFiles.aaguid)
        let revoked = try MDSFiles.folder(entries: [MDSFiles.entry(status: "REVOKED")])
        let good = try MDSFiles.folder()
        let cases: [(String, (inout Configuration) -> Void, AttestationIdentity)] = [
            ("revoked", MDSFiles.configure(revoked), MDSFiles.identity),
            ("deny", { c in MDSFiles.configure(good)(&c); c.authenticatorsDeny = [MDSFiles.aaguid] }, MDSFiles.identity),
            ("unanchored", MDSFiles.configure(good), other),
        ]
        for (name, configure, identity) in cases {
            let server = try TestServer(name: "mds-\(name)", configure: configure)
            let (_, reply) = try server.client().register(SoftAuthenticator(aaguid: MDSFiles.aaguid), format: .packedFull(identity))
            #expect(reply.status == 400 && reply.code == "attestation_invalid", "\(name): \(reply)")
            let off = try TestServer(name: "mds-off-\(name)")
            let (_, passed) = try off.client().register(SoftAuthenticator(aaguid: MDSFiles.aaguid), format: .packedFull(identity))
            #expect(passed.status == 201, "\(name) with metadata off: \(passed)")
        }
    }

    @Test func configuredButNeverLoadedRefusesAttestationButNotNone() throws {
        let dir = try MDSFiles.folder()
        try Data("not a BLOB".utf8).write(to: URL(fileURLWithPath: dir + "/blob.jwt"))
        let server = try TestServer(name: "mds-closed", configure: MDSFiles.configure(dir))
        let client = server.client()
        let (_, refused) = try client.register(SoftAuthenticator(aaguid: MDSFiles.aaguid), format: .packedFull(MDSFiles.identity))
        #expect(refused.status == 400 && refused.code == "attestation_invalid")
        let (_, none) = try client.register(SoftAuthenticator(), format: .none)
        #expect(none.status == 201)
    }
}
