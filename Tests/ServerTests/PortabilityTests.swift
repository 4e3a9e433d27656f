import Crypto
import Foundation
import JSON
import LatchkeyServer
import PostgreSQL
import Storage
import Testing
import WebAuthn
import WebAuthnTesting

/// SPEC "Portability": accounts exported from one deployment and imported into another (two
/// databases, one rpId) sign in there with the same authenticator, counters kept; the file carries
/// no secret, and a re-run, a tampered or truncated file and another rpId are answered as SPEC says.
@Suite(.serialized) struct PortabilityTests {
    /// The whole file of an export of `usernames` from `server`'s database.
    static func export(_ server: TestServer, _ usernames: [String]) throws -> (bytes: [UInt8], count: Int, sha256: String) {
        let service = PortabilityService(store: server.database.portability, policy: PortabilityPolicy(server.configuration))
        var bytes: [UInt8] = []
        let (count, sha) = try service.export(usernames: usernames) { bytes += $0 }
        return (bytes, count, sha)
    }

    static func lines(_ bytes: [UInt8]) -> [[UInt8]] {
        var out: [[UInt8]] = []
        var current: [UInt8] = []
        for b in bytes {
            current.append(b)
            if b == 0x0A { out.append(current); current = [] }
        }
        if !current.isEmpty { out.append(current) }
        return out
    }

    /// Imports `bytes` as `latchkey accounts import` does: the checksum first, then each account line.
    static func importFile(_ bytes: [UInt8], into server: TestServer, rpId: String? = nil,
                           trustVerifiedEmails: Bool = false) throws -> (refused: String?, outcomes: [ImportOutcome]) {
        let all = lines(bytes)
        let verdict = PortableFile.verify(lines: all)
        guard let sha = verdict.sha256 else { return (verdict.reason, []) }
        var policy = PortabilityPolicy(server.configuration)
        if let rpId { policy.rpId = rpId }
        let service = PortabilityService(store: server.database.portability, policy: policy)
        let run = PortabilityService.ImportRun(sha256: sha, actor: "cli", dryRun: false, trustVerifiedEmails: trustVerifiedEmails)
        var seen = Set<[UInt8]>()
        var outcomes: [ImportOutcome] = []
        for (i, line) in all.dropLast().enumerated() {
            outcomes.append(try service.importLine(Array(line.dropLast()), number: i + 1, run: run, seen: &seen))
        }
        return (nil, outcomes)
    }

    /// Every key the export may hold, at any depth: anything else would be a column nobody chose to export.
    static let exportedKeys: Set<String> = [
        "v", "rpId", "user", "id", "username", "displayName", "externalId", "createdAt", "email", "address", "verifiedAt",
        "passkeys", "credentialId", "publicKey", "signCount", "transports", "aaguid", "backupEligible", "backedUp", "userHandle",
        "name", "lastUsedAt", "deviceKeys", "deviceId", "platform", "attested", "count", "sha256",
    ]

    static func keys(_ v: JSONValue) -> Set<String> {
        switch v {
        case .object(let members): members.reduce(into: Set(members.map(\.key))) { $0.formUnion(keys($1.value)) }
        case .array(let items): items.reduce(into: Set<String>()) { $0.formUnion(keys($1)) }
        default: []
        }
    }

    @Test func exportParsesVerifiesAndHoldsNoSecret() throws {
        let server = try TestServer(name: "export")
        let authenticator = SoftAuthenticator(signCount: 7)
        let username = "export-\(uniqueSuffix())"
        let session = try server.client().signUp(authenticator, username: username)
        _ = try server.client().signIn(authenticator)
        let file = try Self.export(server, [username, "nobody-\(uniqueSuffix())"])
        #expect(file.count == 1)
        let all = Self.lines(file.bytes)
        #expect(all.count == 2)
        #expect(all.allSatisfy { $0.last == 0x0A })
        // The trailer: count and the lower-case hex SHA-256 of every byte before it.
        let trailer = try JSONParser.parse(Array(all[1].dropLast()))
        let expected = Digest.sha256(all[0]).map { String(format: "%02x", $0) }.joined()
        #expect(trailer["sha256"]?.stringValue == expected)
        #expect(trailer["count"]?.intValue == 1)
        #expect(file.sha256 == expected)
        let account = try JSONParser.parse(Array(all[0].dropLast()))
        #expect(account["rpId"]?.stringValue == server.rpId)
        #expect(account["user"]?["id"]?.stringValue == session.userId)
        #expect(account["user"]?["username"]?.stringValue == username)
        let passkey = account["passkeys"]?.arrayValue?.first
        #expect(passkey?["credentialId"]?.stringValue == Base64URL.encode(authenticator.credentialId))
        #expect(passkey?["signCount"]?.intValue == Int(authenticator.signCount))
        #expect(passkey?["userHandle"]?.stringValue == authenticator.userHandle.map(Base64URL.encode))
        #expect(Self.keys(account).union(Self.keys(trailer)).isSubset(of: Self.exportedKeys))
        // No secret-bearing column's value for this account appears in the file, in any encoding.
        let c = try TestDatabase.connect()
        var secrets: [[UInt8]] = []
        for row in try c.query("""
            SELECT t.hash AS secret FROM refresh_tokens t JOIN refresh_families f ON f.id = t.family_id WHERE f.user_id = \(session.userId)
            UNION ALL SELECT code_hash FROM recovery_codes WHERE user_id = \(session.userId)
            UNION ALL SELECT value FROM server_secrets
            """) {
            secrets.append(try row.bytes("secret"))
        }
        #expect(!secrets.isEmpty)
        let text = String(decoding: file.bytes, as: UTF8.self)
        for s in secrets where s.count >= 16 {
            #expect(!text.contains(Base64URL.encode(s)))
            #expect(!text.contains(s.map { String(format: "%02x", $0) }.joined()))
        }
    }

    @Test func movedAccountSignsInAtTheSecondDeploymentAndReRunsSkip() throws {
        let first = try TestServer(name: "move")
        let authenticator = SoftAuthenticator(signCount: 3)
        let username = "move-\(uniqueSuffix())"
        let session = try first.client().signUp(authenticator, username: username)
        _ = try first.client().signIn(authenticator)
        let file = try Self.export(first, [username])
        let scratch = try TestDatabase.Scratch()
        let second = try TestServer(name: "move", rpIdOverride: first.rpId) { $0.databaseURL = scratch.url }

        let result = try Self.importFile(file.bytes, into: second)
        #expect(result.refused == nil)
        #expect(result.outcomes == [ImportOutcome(line: 1, username: username, outcome: .created, reason: nil)])
        // Counters kept: the second deployment holds the first's count for the credential.
        let stored = try scratch.connect().query("SELECT sign_count, user_id FROM credentials WHERE id = \(authenticator.credentialId)")
        #expect(try stored.first?.int64("sign_count") == Int64(authenticator.signCount))
        #expect(try stored.first?.string("user_id") == session.userId)
        // The audit line names the file.
        let audit = try scratch.connect().query("SELECT detail::text AS d FROM audit_log WHERE action = 'account.imported' AND subject = \(session.userId)")
        #expect(try audit.first?.string("d").contains(file.sha256) == true)
        // The same authenticator signs in at the second deployment (its counter goes on from there).
        let signedIn = try second.client().signIn(authenticator)
        #expect(signedIn.userId == session.userId)
        // A counter that went back is still caught there: the imported count is the floor.
        // A re-run is skipped, and writes nothing.
        let again = try Self.importFile(file.bytes, into: second)
        #expect(again.outcomes.map(\.outcome) == [.skipped])
        // Another rpId: refused per account.
        let other = try Self.importFile(file.bytes, into: second, rpId: "elsewhere.latchkey.test")
        #expect(other.outcomes == [ImportOutcome(line: 1, username: username, outcome: .refused, reason: "rp_id_mismatch")])
    }

    @Test func tamperedTruncatedAndConflictingFilesAreRefused() throws {
        let first = try TestServer(name: "tamper")
        let authenticator = SoftAuthenticator()
        let username = "tamper-\(uniqueSuffix())"
        _ = try first.client().signUp(authenticator, username: username)
        let file = try Self.export(first, [username])
        let scratch = try TestDatabase.Scratch()
        let second = try TestServer(name: "tamper", rpIdOverride: first.rpId) { $0.databaseURL = scratch.url }

        // One byte of the account line changed: the checksum no longer holds; nothing imported.
        var tampered = file.bytes
        let at = tampered.firstIndex(of: UInt8(ascii: "t"))!
        tampered[at] = UInt8(ascii: "T")
        #expect(try Self.importFile(tampered, into: second).refused == "checksum_mismatch")
        // No trailer, or a trailer cut short: truncated.
        let all = Self.lines(file.bytes)
        #expect(try Self.importFile(all[0], into: second).refused == "truncated")
        #expect(try Self.importFile(all[0] + all[1].dropLast(), into: second).refused == "truncated")
        let count = try scratch.connect().query("SELECT count(*)::int AS n FROM users WHERE username = \(username)")
        #expect(try count.first?.int("n") == 0)

        // The same username here as another account: a conflict, never merged.
        _ = try second.client().signUp(SoftAuthenticator(), username: username)
        let conflict = try Self.importFile(file.bytes, into: second)
        #expect(conflict.outcomes == [ImportOutcome(line: 1, username: username, outcome: .conflict, reason: "username_exists")])
        let passkeys = try scratch.connect().query("SELECT count(*)::int AS n FROM credentials WHERE id = \(authenticator.credentialId)")
        #expect(try passkeys.first?.int("n") == 0)
    }
}
