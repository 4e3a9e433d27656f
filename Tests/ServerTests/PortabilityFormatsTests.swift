import Crypto
import Foundation
import JSON
import LatchkeyServer
import PostgreSQL
import Storage
import Testing
import WebAuthn
import WebAuthnTesting

/// SPEC "Portability" → Import, the other formats: Keycloak's realm export and CSV. The fixtures
/// under Tests/Portability hold passkeys registered through py_webauthn (its own test payloads,
/// verified by `webauthn.verify_registration_response`; see make-py-webauthn-csv.py) in the CSV
/// format and in Keycloak's export shape; accounts built here from a software authenticator are
/// imported and then sign in. Bad input is refused per account with the reason, nothing half-imported.
@Suite(.serialized) struct PortabilityFormatsTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Portability")

    static func fixture(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: fixtures.appendingPathComponent(name)))
    }

    static func context(_ rpId: String, stated: String? = nil) -> PortableFormat.Context {
        PortableFormat.Context(rpId: rpId, statedRpId: stated, now: Date(timeIntervalSince1970: 1_800_000_000), random: { SecureRandom.bytes($0) })
    }

    static func entries(_ read: PortableFormat.Read) throws -> [PortableEntry] {
        guard case .accounts(_, let entries) = read else { throw FileRefused(read: "\(read)") }
        return entries
    }

    static func reason(_ entry: PortableEntry) -> String? {
        if case .failure(let r) = entry.account { return r.reason } else { return nil }
    }

    /// Imports `bytes` as `latchkey accounts import --format F` does: the file read, then each
    /// account, the credential ids seen kept as the command keeps them (digests).
    static func importFile(_ format: PortableFormat, _ bytes: [UInt8], into server: TestServer, rpId: String? = nil,
                           statedRpId: String? = nil) throws -> (refused: String?, outcomes: [ImportOutcome]) {
        var policy = PortabilityPolicy(server.configuration)
        if let rpId { policy.rpId = rpId }
        let service = PortabilityService(store: server.database.portability, policy: policy)
        switch format.read(bytes, service.readContext(statedRpId: statedRpId)) {
        case .refused(let reason): return (reason, [])
        case .accounts(let sha, let entries):
            let run = PortabilityService.ImportRun(sha256: sha, actor: "cli", dryRun: false, trustVerifiedEmails: false)
            var seen = CredentialIdDigests()
            return (nil, try entries.map { try service.importEntry($0, run: run, seen: &seen) })
        }
    }

    static func count(_ scratch: TestDatabase.Scratch, _ sql: SQL) throws -> Int {
        try scratch.connect().query(sql).first?.int("n") ?? -1
    }

    // MARK: Keycloak

    @Test func keycloakFixtureReadsAsKeycloakWroteIt() throws {
        let entries = try Self.entries(PortableFormat.keycloak.read(try Self.fixture("keycloak-realm.json"), Self.context("localhost")))
        #expect(entries.map(\.line) == [1, 2])
        let alice = try entries[0].account.get()
        #expect(alice.username == "kc-alice" && alice.displayName == "Alice Keycloak")
        // The user handle is the UTF-8 of Keycloak's user id.
        #expect(alice.userHandle == Array("5f0c3a8e-2b71-4c1d-9e6a-7d2f4b8c1e90".utf8))
        #expect(alice.email == PortableEmail(address: "alice@example.com", verifiedAt: "2026-01-05T09:17:53.211000Z"))
        // The same passkeys as the CSV's rows for py-alice: the id was standard base64 there, base64url here.
        let csv = try Self.entries(PortableFormat.csv.read(try Self.fixture("py-webauthn.csv"), Self.context("localhost")))
        let rows = try csv[0].account.get().passkeys
        #expect(alice.passkeys.map(\.credentialId) == rows.map(\.credentialId))
        #expect(alice.passkeys.map(\.publicKey) == rows.map(\.publicKey))
        #expect(alice.passkeys.map(\.signCount) == [23, 2])
        #expect(alice.passkeys.map(\.alg) == [-7, -8])
        #expect(alice.passkeys[0].transports == ["internal", "hybrid"] && alice.passkeys[0].name == "Passkey (laptop)")
        #expect(Hex.encode(alice.passkeys[1].aaguid) == "cb69481e8ff7403993ec0a2729a154a8")
        // A password-only user has nothing to sign in with here.
        #expect(Self.reason(entries[1]) == "no_passkeys" && entries[1].username == "kc-bob")
        // The realm's passwordless rpId is the file's: another deployment refuses each account.
        let elsewhere = try Self.entries(PortableFormat.keycloak.read(try Self.fixture("keycloak-realm.json"), Self.context("example.com")))
        #expect(elsewhere.map(Self.reason) == ["rp_id_mismatch", "rp_id_mismatch"])
    }

    /// A realm export of one user with `authenticator`'s passkey, in Keycloak's shape.
    static func realm(_ kcId: String, _ username: String, rpId: String?, credentials: [JSONValue]) -> [UInt8] {
        let user: JSONValue = .object([("id", .string(kcId)), ("username", .string(username)), ("enabled", .bool(true)),
                                       ("createdTimestamp", .number(1_767_604_673_211)), ("credentials", .array(credentials))])
        return JSONValue.object([("realm", .string("r")), ("webAuthnPolicyRpId", .string(rpId ?? "")),
                                 ("webAuthnPolicyPasswordlessRpId", .string("")), ("users", .array([user]))]).serialized()
    }

    static func credential(_ a: SoftAuthenticator, type: String = "webauthn-passwordless", key: String? = nil, counter: Int) -> JSONValue {
        let data: JSONValue = .object([("credentialId", .string(Base64.encodeStandard(a.credentialId))),
                                       ("credentialPublicKey", .string(key ?? Base64URL.encode(a.publicKeyCOSE))), ("counter", .number(Double(counter))),
                                       ("aaguid", .string("00000000-0000-0000-0000-000000000000")), ("transports", .array([.string("internal")]))])
        return .object([("id", .string(UUID().uuidString.lowercased())), ("type", .string(type)), ("userLabel", .string("Phone")),
                        ("createdDate", .number(1_767_604_700_000)), ("secretData", .string("{}")),
                        ("credentialData", .string(String(decoding: data.serialized(), as: UTF8.self)))])
    }

    @Test func keycloakAccountSignsInWithItsKeycloakUserHandleAndReRunsSkip() throws {
        let scratch = try TestDatabase.Scratch()
        let server = try TestServer(name: "kcmove") { $0.databaseURL = scratch.url }
        let kcId = UUID().uuidString.lowercased()
        let authenticator = SoftAuthenticator(signCount: 40)
        authenticator.userHandle = Array(kcId.utf8)
        let username = "kc-\(uniqueSuffix())"
        // The two-factor policy names the rpId (the passwordless one is empty).
        let file = Self.realm(kcId, username, rpId: server.rpId, credentials: [Self.credential(authenticator, type: "webauthn", counter: 40)])
        let result = try Self.importFile(.keycloak, file, into: server)
        #expect(result.refused == nil)
        #expect(result.outcomes == [ImportOutcome(line: 1, username: username, outcome: .created, reason: nil)])
        #expect(try Self.count(scratch, "SELECT sign_count::int AS n FROM credentials WHERE id = \(authenticator.credentialId)") == 40)
        let session = try server.client().signIn(authenticator)
        #expect(session.userId == PortableFormatsTestsSupport.userId(Array(kcId.utf8), scratch))
        #expect(try Self.importFile(.keycloak, file, into: server).outcomes.map(\.outcome) == [.skipped])
        // A realm naming no rpId takes the operator's --rp-id; without one it cannot be told.
        let other = SoftAuthenticator()
        let unnamed = Self.realm(UUID().uuidString, "kc-unnamed-\(uniqueSuffix())", rpId: nil, credentials: [Self.credential(other, counter: 0)])
        #expect(try Self.importFile(.keycloak, unnamed, into: server).outcomes.map(\.reason) == ["rp_id_unknown"])
        #expect(try Self.importFile(.keycloak, unnamed, into: server, statedRpId: "elsewhere.test").outcomes.map(\.reason) == ["rp_id_mismatch"])
        #expect(try Self.importFile(.keycloak, unnamed, into: server, statedRpId: server.rpId).outcomes.map(\.outcome) == [.created])
    }

    // MARK: CSV

    @Test func pyWebAuthnCSVImportsWithSPKIConverted() throws {
        let bytes = try Self.fixture("py-webauthn.csv")
        let entries = try Self.entries(PortableFormat.csv.read(bytes, Self.context("localhost")))
        // Two rows of py-alice are one account; the quoted "Smith, Carol" is one field.
        #expect(entries.map(\.line) == [2, 4])
        let alice = try entries[0].account.get(), carol = try entries[1].account.get()
        #expect(alice.username == "py-alice" && alice.passkeys.count == 2)
        #expect(carol.username == "Smith, Carol" && carol.passkeys.count == 1)
        // Carol's key was SPKI with alg -7: stored as the COSE key of the same public key.
        let cose = try COSEKey(bytes: carol.passkeys[0].publicKey)
        #expect(cose.algorithm == .es256 && carol.passkeys[0].alg == -7)
        let row = String(decoding: bytes, as: UTF8.self).split(separator: "\r\n")[3].split(separator: ",")
        #expect(cose.publicKey.spkiDER == Base64URL.decode(String(row[4])))
        // Into a deployment for localhost (the rpId py_webauthn's payloads were made for).
        let scratch = try TestDatabase.Scratch()
        let server = try TestServer(name: "csvpy") { $0.databaseURL = scratch.url }
        let result = try Self.importFile(.csv, bytes, into: server, rpId: "localhost")
        #expect(result.outcomes.map(\.outcome) == [.created, .created])
        #expect(try Self.count(scratch, "SELECT count(*)::int AS n FROM credentials WHERE user_id = \(alice.id)") == 2)
        #expect(try Self.importFile(.csv, bytes, into: server, rpId: "localhost").outcomes.map(\.outcome) == [.skipped, .skipped])
    }

    @Test func csvAccountWithAnSPKIKeySignsIn() throws {
        let scratch = try TestDatabase.Scratch()
        let server = try TestServer(name: "csvspki") { $0.databaseURL = scratch.url }
        let authenticator = SoftAuthenticator(signCount: 9)
        authenticator.userHandle = SecureRandom.bytes(32)
        let username = "csv-\(uniqueSuffix())"
        let csv = "username,userHandle,credentialId,publicKey,signCount,alg\n"
            + "\(username),\(Base64URL.encode(authenticator.userHandle!)),\(Base64URL.encode(authenticator.credentialId)),"
            + "\(Base64URL.encode(authenticator.privateKey.publicKey.spkiDER)),9,-7\n"
        let result = try Self.importFile(.csv, Array(csv.utf8), into: server, statedRpId: server.rpId)
        #expect(result.outcomes == [ImportOutcome(line: 2, username: username, outcome: .created, reason: nil)])
        let session = try server.client().signIn(authenticator)
        #expect(session.userId == PortableFormatsTestsSupport.userId(authenticator.userHandle!, scratch))
    }

    // MARK: Bad input

    @Test func badCSVIsRefusedPerAccountAndNothingHalfImported() throws {
        let scratch = try TestDatabase.Scratch()
        let server = try TestServer(name: "csvbad") { $0.databaseURL = scratch.url }
        let a = SoftAuthenticator(), b = SoftAuthenticator(), c = SoftAuthenticator()
        func row(_ user: String, _ handle: [UInt8], _ id: [UInt8], _ key: String, _ alg: String = "") -> String {
            "\(user),\(Base64URL.encode(handle)),\(Base64URL.encode(id)),\(key),0,\(alg)\n"
        }
        let h1 = SecureRandom.bytes(16), h2 = SecureRandom.bytes(16), h3 = SecureRandom.bytes(16)
        let cose = { (x: SoftAuthenticator) in Base64URL.encode(x.publicKeyCOSE) }
        let spki = { (x: SoftAuthenticator) in Base64URL.encode(x.privateKey.publicKey.spkiDER) }
        let s = uniqueSuffix()
        let file = "username,userHandle,credentialId,publicKey,signCount,alg\n"
            + row("half-\(s)", h1, a.credentialId, cose(a))                          // good row …
            + row("half-\(s)", h1, b.credentialId, "AAAA")                           // … and a key that is neither COSE nor SPKI
            + row("twohandles-\(s)", h2, c.credentialId, cose(c))
            + row("twohandles-\(s)", h3, SecureRandom.bytes(16), cose(c))
            + row("noalg-\(s)", h3, SecureRandom.bytes(16), spki(c))                  // SPKI needs alg
            + row("wrongalg-\(s)", SecureRandom.bytes(16), SecureRandom.bytes(16), cose(c), "-8")
            + "short-\(s),\(Base64URL.encode(h1)),x,y\n"                                // a wrong column count
            + row("first-\(s)", SecureRandom.bytes(16), b.credentialId, cose(b))
            + row("again-\(s)", SecureRandom.bytes(16), b.credentialId, cose(b))      // the credential id twice in the file
        let result = try Self.importFile(.csv, Array(file.utf8), into: server, statedRpId: server.rpId)
        #expect(result.outcomes.map(\.line) == [2, 4, 6, 7, 8, 9, 10])
        #expect(result.outcomes.map(\.reason) == ["invalid_public_key", "two_user_handles", "alg_required", "alg_mismatch",
                                                  "wrong_column_count", nil, "duplicate_credential_id"])
        // The refused account's good passkey was not imported without it.
        #expect(try Self.count(scratch, "SELECT count(*)::int AS n FROM credentials WHERE id = \(a.credentialId)") == 0)
        #expect(try Self.count(scratch, "SELECT count(*)::int AS n FROM users WHERE username = \("half-\(s)")") == 0)
        // A header that is not the six columns, or a quote left open: the whole file, nothing imported.
        let renamed = file.replacingOccurrences(of: "publicKey,", with: "pubkey,")
        #expect(try Self.importFile(.csv, Array(renamed.utf8), into: server).refused == "wrong_columns")
        #expect(try Self.importFile(.csv, Array((file + "\"open,").utf8), into: server).refused == "malformed_csv")
        // Another rpId stated for the file.
        let other = "username,userHandle,credentialId,publicKey,signCount,alg\n" + row("other-\(s)", h1, c.credentialId, cose(c))
        #expect(try Self.importFile(.csv, Array(other.utf8), into: server, statedRpId: "elsewhere.test").outcomes.map(\.reason) == ["rp_id_mismatch"])
    }

    @Test func badKeycloakExportsAreRefused() throws {
        let context = Self.context("kc.test")
        let a = SoftAuthenticator()
        let good = Self.realm("u-1", "kc-a", rpId: "kc.test", credentials: [Self.credential(a, counter: 1)])
        // Cut short: not JSON, so nothing of it is read.
        guard case .refused(let reason) = PortableFormat.keycloak.read(Array(good.dropLast(9)), context) else { Issue.record("read"); return }
        #expect(reason == "malformed_file")
        // A key that is not COSE; the same credential twice in one user; a credentialData that is not JSON.
        let bad = [Self.realm("u-2", "kc-b", rpId: "kc.test", credentials: [Self.credential(a, key: "AAAA", counter: 0)]),
                   Self.realm("u-3", "kc-c", rpId: "kc.test", credentials: [Self.credential(a, counter: 0), Self.credential(a, counter: 0)]),
                   Self.realm("u-4", "kc-d", rpId: "kc.test", credentials: [.object([("type", .string("webauthn")), ("credentialData", .string("{"))])])]
        let reasons = try bad.map { try Self.entries(PortableFormat.keycloak.read($0, context)).map(Self.reason) }
        #expect(reasons == [["invalid_public_key"], ["duplicate_credential_id"], ["invalid_passkey"]])
        // Both base64 alphabets for the id and the key.
        let data: JSONValue = .object([("credentialId", .string(Base64URL.encode(a.credentialId))),
                                       ("credentialPublicKey", .string(Base64.encodeStandard(a.publicKeyCOSE)))])
        let swapped = Self.realm("u-5", "kc-e", rpId: "kc.test", credentials: [.object([("type", .string("webauthn")),
                                                                                      ("credentialData", .string(String(decoding: data.serialized(), as: UTF8.self)))])])
        let e = try Self.entries(PortableFormat.keycloak.read(swapped, context))[0].account.get()
        #expect(e.passkeys[0].credentialId == a.credentialId && e.passkeys[0].publicKey == a.publicKeyCOSE)
    }

    @Test func credentialIdDigestsTellIdsApart() {
        var seen = CredentialIdDigests()
        let ids = (0..<1000).map { _ in SecureRandom.bytes(16) }
        for id in ids { seen.insert(id) }
        #expect(ids.allSatisfy(seen.contains))
        #expect(!(0..<1000).contains { _ in seen.contains(SecureRandom.bytes(16)) })
        // An id and the same id one byte longer are two ids.
        #expect(!seen.contains(ids[0] + [0]))
    }

    @Test func mediaTypesNameTheFormats() {
        #expect(PortableFormat(mediaType: "application/jsonl") == .latchkey)
        #expect(PortableFormat(mediaType: "application/json; charset=utf-8") == .keycloak)
        #expect(PortableFormat(mediaType: "text/csv") == .csv)
        #expect(PortableFormat(mediaType: "text/plain") == nil)
    }
}

struct FileRefused: Error {
    let read: String
}

enum PortableFormatsTestsSupport {
    /// The Latchkey user id the account with `handle` has in `scratch`.
    static func userId(_ handle: [UInt8], _ scratch: TestDatabase.Scratch) -> String? {
        try? scratch.connect().query("SELECT id FROM users WHERE user_handle = \(handle)").first?.string("id")
    }
}
