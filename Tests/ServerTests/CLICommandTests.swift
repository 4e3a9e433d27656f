import Crypto
import Foundation
import JSON
import LatchkeyServer
import PostgreSQL
import PostgreSQLTesting
import Storage
import Testing
import WebAuthn
import WebAuthnTesting
#if canImport(Glibc)
import Glibc
#endif

/// The built `latchkey` binary, run as an operator runs it, against the test database.
enum LatchkeyCLI {
    struct Outcome: CustomStringConvertible {
        let status: Int32
        let stdout: String
        let stderr: String
        var lines: [String] { stdout.split(separator: "\n").map(String.init) }
        var description: String { "exit \(status)\nstdout:\n\(stdout)\nstderr:\n\(stderr)" }
    }

    /// `latchkey <arguments>` with only `environment` among the LATCHKEY_* / DATABASE_URL variables.
    /// posix_spawn + waitpid with output to files (see WebhookCrashTests: Foundation.Process can miss an exit).
    static func run(_ arguments: [String], environment: [String: String]) throws -> Outcome {
        guard let binary = ServeProcess.findBinary() else {
            throw TestSetupError("the latchkey executable was not found; build it with `swift build --build-tests` (or set LATCHKEY_BINARY)")
        }
        let base = NSTemporaryDirectory() + "latchkey-cli-\(uniqueSuffix())"
        defer { unlink(base + ".out"); unlink(base + ".err") }
        let out = open(base + ".out", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        let err = open(base + ".err", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard out >= 0, err >= 0 else { throw TestSetupError("cannot write \(base).out/.err") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, out, 1)
        posix_spawn_file_actions_adddup2(&actions, err, 2)
        let argv: [UnsafeMutablePointer<CChar>?] = ([binary] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("LATCHKEY_") && $0.key != "DATABASE_URL" }
        for (k, v) in environment { env[k] = v }
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, binary, &actions, nil, argv, envp)
        close(out)
        close(err)
        guard spawned == 0 else { throw TestSetupError("cannot run \(binary)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        let read = { (path: String) in String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self) }
        // WEXITSTATUS, or 128 + the signal that ended it.
        let code = status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        return Outcome(status: code, stdout: read(base + ".out"), stderr: read(base + ".err"))
    }
}

/// SPEC "Assurance" (Admins) and "Admin console": `latchkey admins add` only creates; `grant` shows
/// what an existing account holds, then gives it the role. Both audited with actor `cli`.
@Suite("latchkey admins (the built binary)")
struct AdminsCLITests {
    let server: TestServer
    let environment: [String: String]

    init() throws {
        server = try TestServer(name: "cli-admins")
        environment = ["DATABASE_URL": try TestDatabase.url(), "LATCHKEY_RP_ID": server.rpId, "LATCHKEY_ORIGINS": server.origin,
                       "LATCHKEY_KEY_ENCRYPTION_KEY": TestDatabase.keyEncryptionKeyText]
    }

    func admins(_ arguments: String...) throws -> LatchkeyCLI.Outcome { try LatchkeyCLI.run(["admins"] + arguments, environment: environment) }

    func audit(_ action: String, subject: String) throws -> [AuditEntry] {
        try server.database.audit.entries(limit: 100, before: nil, user: subject, action: action)
    }

    @Test func addCreatesANewAdminAndPrintsItsEnrolmentLinkLast() throws {
        let name = server.username("admin")
        let added = try admins("add", name)
        #expect(added.status == 0, "\(added)")
        #expect(added.lines.last?.hasPrefix("\(server.origin)/admin/?ticket=lkt_") == true, "\(added)")
        let user = try #require(try server.database.accounts.user(username: name))
        #expect(try server.database.admins.isAdmin(userId: user.id))
        #expect(try audit("admin.added", subject: user.id).first?.actor == "cli")
    }

    @Test func addRefusesAUsernameThatExists() throws {
        // Someone registered the name first (no admin squatting): add refuses and makes no one admin.
        let name = server.username("squat")
        let session = try server.client().signUp(SoftAuthenticator(), username: name)
        let refused = try admins("add", name)
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.stderr.contains("\(name) exists") && refused.stderr.contains("admins grant") && refused.stderr.contains("admins link"),
                "\(refused)")
        #expect(!refused.stdout.contains("ticket="))
        #expect(try !server.database.admins.isAdmin(userId: session.userId))
        #expect(try audit("admin.added", subject: session.userId).isEmpty)

        // An admin made by add is refused the second time too.
        let admin = server.username("admin")
        #expect(try admins("add", admin).status == 0)
        let again = try admins("add", admin)
        #expect(again.status == 1 && again.stderr.contains("exists"), "\(again)")
    }

    @Test func grantPrintsThePasskeysAndDeviceKeysThenGivesTheRole() throws {
        let name = server.username("grantee")
        let apple: [UInt8] = [0xfb, 0xfc, 0x30, 0x07, 0x15, 0x4e, 0x4e, 0xcc, 0x8c, 0x0b, 0x6e, 0x02, 0x05, 0x57, 0xd7, 0xbd]
        let authenticator = SoftAuthenticator(aaguid: apple)
        let session = try server.client().signUp(authenticator, username: name)
        _ = try server.client().signIn(authenticator, username: name)  // a last use to show
        let other = SoftAuthenticator()
        let (_, second) = try server.client().register(other, authorization: session.bearer, approver: authenticator)
        #expect(second.status == 201, "\(second)")
        // A device key, enrolled through a device-key ticket.
        let hash = Digest.sha256(Array("ticket-\(uniqueSuffix())".utf8))
        _ = try server.database.accounts.createTicket(hash: hash, userId: session.userId, purpose: .deviceKey, ttlSeconds: 600,
                                                      audit: AuditRecord(actor: "test", action: "device_key_ticket.issued", subject: session.userId,
                                                                         detail: .object([])))
        let key = NewDeviceKey(id: "dk_\(uniqueSuffix())", userId: session.userId, deviceId: "phone-1", platform: .android, name: "Pixel",
                               publicKey: PrivateKey.generateEC(.p256).publicKey.spkiDER, attested: false, attestation: nil)
        _ = try #require(try server.database.deviceKeys.enrol(key, gate: .ticket(hash: hash),
                                                              audit: AuditTemplate(actor: session.userId, action: "device_key.enrolled")))

        let granted = try admins("grant", name)
        #expect(granted.status == 0, "\(granted)")
        let lines = granted.lines
        let passkeyId = Base64URL.encode(authenticator.credentialId)
        let passkeyLine = try #require(lines.firstIndex { $0.contains(passkeyId) }, "\(granted)")
        #expect(lines[passkeyLine].contains("provider Apple Passwords") && lines[passkeyLine].contains("created 20")
                && lines[passkeyLine].contains("last used 20"), "\(lines[passkeyLine])")
        let otherLine = try #require(lines.firstIndex { $0.contains(Base64URL.encode(other.credentialId)) }, "\(granted)")
        #expect(lines[otherLine].contains("last used never"), "\(lines[otherLine])")
        let keyLine = try #require(lines.firstIndex { $0.contains(key.id) }, "\(granted)")
        #expect(lines[keyLine].contains("android Pixel") && lines[keyLine].contains("created 20"), "\(lines[keyLine])")
        #expect(lines.contains("passkeys (2):") && lines.contains("device keys (1):"), "\(granted)")
        // Shown first, granted after.
        let grantedLine = try #require(lines.firstIndex { $0.hasPrefix("\(name) is now an admin") }, "\(granted)")
        #expect(grantedLine > max(passkeyLine, otherLine, keyLine))
        #expect(try server.database.admins.isAdmin(userId: session.userId))
        let entry = try #require(try audit("admin.granted", subject: session.userId).first)
        #expect(entry.actor == "cli")
        #expect(entry.detail["passkeys"]?.arrayValue?.count == 2 && entry.detail["deviceKeys"]?.arrayValue?.count == 1)
        #expect(try admins("list").stdout.contains(name))

        let again = try admins("grant", name)
        #expect(again.status == 0 && again.stdout.contains("was already an admin"), "\(again)")
        #expect(try audit("admin.granted", subject: session.userId).count == 1)
    }

    /// The ticket of the link a command printed as its last line.
    func ticket(_ outcome: LatchkeyCLI.Outcome) throws -> String {
        let line = try #require(outcome.lines.last, "\(outcome)")
        #expect(line.hasPrefix("\(server.origin)/admin/?ticket=lkt_"), "\(outcome)")
        return String(try #require(line.split(separator: "=").last))
    }

    @Test func linkPrintsAFreshLinkForAnAdminWithNoPasskeyReplacingTheUnusedOne() throws {
        let name = server.username("admin")
        let added = try admins("add", name)
        #expect(added.status == 0, "\(added)")
        let first = try ticket(added)
        let linked = try admins("link", name)
        #expect(linked.status == 0, "\(linked)")
        // Printed exactly as add prints it: the origin line, then the link.
        let originLine = { (o: LatchkeyCLI.Outcome) in o.lines.dropLast().last?.prefix { $0 != ")" } }
        #expect(originLine(linked) != nil && originLine(linked) == originLine(added), "\(added)\n\(linked)")
        let second = try ticket(linked)
        #expect(second != first)
        let client = server.client()
        // The earlier link no longer works; the new one enrols the admin's first passkey.
        expectProblem(try client.post("/v1/passkeys/registration/options", .object([]), authorization: "Ticket \(first)"), 401, "unauthorized")
        #expect(try client.register(SoftAuthenticator(), authorization: "Ticket \(second)").reply.status == 201)
        let user = try #require(try server.database.accounts.user(username: name))
        #expect(try audit("ticket.issued", subject: user.id).first?.actor == "cli")

        // An admin with a passkey signs in with it: no link.
        let again = try admins("link", name)
        #expect(again.status == 1 && again.stderr.contains("has a passkey") && !again.stdout.contains("ticket="), "\(again)")
        // An account that is no admin, and an unknown username: refused.
        let plain = server.username("plain")
        _ = try client.signUp(SoftAuthenticator(), username: plain)
        let notAdmin = try admins("link", plain)
        #expect(notAdmin.status == 1 && notAdmin.stderr.contains("not an admin") && notAdmin.stderr.contains("admins grant"), "\(notAdmin)")
        let unknown = try admins("link", server.username("nobody"))
        #expect(unknown.status == 1 && unknown.stderr.contains("not found"), "\(unknown)")
        #expect(try admins("link").status == 64)
    }

    @Test func grantRefusesWhileAPasskeyIsHeldOrARecoveryIsPendingUnlessDespitePending() throws {
        let db = try TestDatabase.connect()
        // A held passkey (added without the owner's passkey: it approves nothing for an hour).
        let heldName = server.username("held")
        let held = try server.client().signUp(SoftAuthenticator(), username: heldName)
        _ = try db.execute("UPDATE credentials SET approves_from = now() + interval '1 hour' WHERE user_id = \(held.userId)")
        let refused = try admins("grant", heldName)
        #expect(refused.status == 1 && refused.stderr.contains("--despite-pending"), "\(refused)")
        #expect(refused.stdout.contains("heldUntil 20") && refused.stdout.contains("pending recoveries (0): none"), "\(refused)")
        #expect(try !server.database.admins.isAdmin(userId: held.userId))
        let despite = try admins("grant", heldName, "--despite-pending")
        #expect(despite.status == 0 && despite.stdout.contains("\(heldName) is now an admin"), "\(despite)")
        #expect(try audit("admin.granted", subject: held.userId).first?.detail["despitePending"]?.boolValue == true)

        // A pending recovery.
        let recoveringName = server.username("recovering")
        let recovering = try server.client().signUp(SoftAuthenticator(), username: recoveringName)
        let recoveryId = "rec_\(uniqueSuffix())"
        _ = try db.execute("""
            INSERT INTO recoveries (id, user_id, method, token_hash, not_before, expires_at)
            VALUES (\(recoveryId), \(recovering.userId), 'recovery-code', \(Array(recoveryId.utf8)), now() + interval '1 day', now() + interval '2 days')
            """)
        let pending = try admins("grant", recoveringName)
        #expect(pending.status == 1 && pending.stdout.contains("pending recoveries (1):") && pending.stdout.contains(recoveryId), "\(pending)")
        #expect(try !server.database.admins.isAdmin(userId: recovering.userId))
        #expect(try admins("grant", recoveringName, "--despite-pending").status == 0)
        #expect(try admins("list", "--despite-pending").status == 64)
    }

    @Test func grantRefusesAnUnknownUsername() throws {
        let unknown = try admins("grant", server.username("nobody"))
        #expect(unknown.status == 1 && unknown.stderr.contains("not found"), "\(unknown)")
    }

    @Test func usageAndHelp() throws {
        #expect(try admins("grant").status == 64)
        #expect(try admins("grant", "a", "b").status == 64)
        #expect(try admins("grant", "a", "--origin", "https://x.example").status == 64)
        let help = try admins("--help")
        #expect(help.status == 0 && help.stdout.contains("latchkey admins grant <username>") && help.stdout.contains("refused (exit 1)"),
                "\(help)")
    }
}

/// SPEC "Authenticator metadata": `latchkey mds check` says why a BLOB is refused — the signer's
/// name, and with DATABASE_URL a rollback below the last BLOB accepted (without, that it did not look).
@Suite("latchkey mds check (the built binary)")
struct MDSCheckCLITests {
    @Test func rollbackIsReportedWithADatabaseAndSaidToBeUncheckedWithout() throws {
        let mds = TestMetadataService()
        let dir = try MDSFiles.folder(number: 5, mds: mds)
        func check(database: Bool) throws -> LatchkeyCLI.Outcome {
            try LatchkeyCLI.run(["mds", "check", "--blob", dir + "/blob.jwt", "--root", dir + "/root.pem"],
                                environment: database ? ["DATABASE_URL": try TestDatabase.url()] : [:])
        }
        // The shared test database may not be migrated yet when this runs first (a fresh clone).
        let migrated = try LatchkeyCLI.run(["migrate"], environment: ["DATABASE_URL": try TestDatabase.url()])
        #expect(migrated.status == 0, "\(migrated)")
        let alone = try check(database: false)
        #expect(alone.status == 0 && alone.stdout.contains("ok: BLOB number 5"), "\(alone)")
        #expect(alone.stdout.contains("rollback: not checked (DATABASE_URL is not set: the BLOB is checked alone)"), "\(alone)")
        let first = try check(database: true)
        #expect(first.status == 0 && first.stdout.contains("no BLOB accepted under this root yet"), "\(first)")

        // An instance accepts number 7; the file with 5 is now a rollback.
        let newer = try MDSFiles.folder(number: 7, mds: mds)
        #expect(try MDSFiles.store(newer).reload().get().number == 7)
        let rolledBack = try check(database: true)
        #expect(rolledBack.status == 1, "\(rolledBack)")
        #expect(rolledBack.stdout.contains("BLOB number 5 is older than the last BLOB accepted (7)"), "\(rolledBack)")
        #expect(try check(database: false).status == 0, "without a database the BLOB alone is fine")
        let current = try LatchkeyCLI.run(["mds", "check", "--blob", newer + "/blob.jwt", "--root", newer + "/root.pem"],
                                          environment: ["DATABASE_URL": try TestDatabase.url()])
        #expect(current.status == 0 && current.stdout.contains("last BLOB accepted: number 7"), "\(current)")
        // check only reads: the stored number is still 7.
        #expect(try TestDatabaseState.lastAccepted(mds) == 7)
    }

    @Test func aSignerThatDoesNotNameTheFIDOServiceIsRefused() throws {
        let mds = TestMetadataService(signerCommonName: "Latchkey Test MDS BLOB Signer", signerDNSNames: ["shop.example"])
        let dir = try MDSFiles.folder(number: 1, mds: mds)
        let args = ["mds", "check", "--blob", dir + "/blob.jwt", "--root", dir + "/root.pem"]
        let refused = try LatchkeyCLI.run(args, environment: [:])
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.stdout.contains("refused:") && refused.stdout.contains("shop.example, not mds.fidoalliance.org"), "\(refused)")
        let named = try LatchkeyCLI.run(args + ["--signer", "shop.example"], environment: [:])
        #expect(named.status == 0 && named.stdout.contains("names shop.example"), "\(named)")
        let byEnvironment = try LatchkeyCLI.run(args, environment: ["LATCHKEY_MDS_SIGNER": "SHOP.example"])
        #expect(byEnvironment.status == 0, "\(byEnvironment)")
    }
}

enum TestDatabaseState {
    static func lastAccepted(_ mds: TestMetadataService) throws -> Int? {
        let database = Database(url: try TestDatabase.url(), connections: 1)
        defer { database.shutdown() }
        return try database.metadataState.lastAccepted(root: Digest.sha256(mds.root.certificate.der))?.number
    }
}
