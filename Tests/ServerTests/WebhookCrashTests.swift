import Foundation
import Glibc
import JSON
import LatchkeyServer
import PostgreSQL
import PostgreSQLTesting
import Synchronization
import Testing
import WebAuthnTesting

/// SPEC "Rules that must hold": every event reaches every subscribed webhook at least once, even
/// across a `kill -9` of an instance or a PostgreSQL restart. Real `latchkey serve` processes on a
/// database of their own (so no other test's senders take part), a real receiver in this process.
@Suite("Webhooks across kill -9 and a PostgreSQL restart", .serialized)
struct WebhookCrashTests {
    /// A database of its own on the test server, dropped afterwards.
    final class OwnDatabase {
        let name = "lk_hooks_\(uniqueSuffix())"
        let url: String
        let server: String
        init(server: String) throws {
            self.server = server
            try PostgresConnection(url: server).execute(SQL(unsafeRaw: "CREATE DATABASE \(name)"))
            let slash = server.lastIndex(of: "/")!
            url = String(server[...slash]) + name
        }
        deinit { _ = try? PostgresConnection(url: server).execute(SQL(unsafeRaw: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")) }
    }

    static func environment(databaseURL: String, rpId: String, adminKey: String) -> [String: String] {
        ["DATABASE_URL": databaseURL, "LATCHKEY_LISTEN": "127.0.0.1:0", "LATCHKEY_RP_ID": rpId, "LATCHKEY_ORIGINS": "https://\(rpId)",
         "LATCHKEY_ADMIN_KEY": adminKey, "LATCHKEY_THREADS": "2", "LATCHKEY_DEV": "1", "LATCHKEY_WORKERS": "1", "LATCHKEY_MAIL_SENDERS": "0",
         "LATCHKEY_KEY_ENCRYPTION_KEY": TestServer.keyEncryptionKeyBase64, "LATCHKEY_OUTBOX_LEASE": "12",
         "LATCHKEY_WEBHOOK_RETRY_BASE": "0.2"]
    }

    @Test("kill -9 of the instance in the middle of a delivery: another instance sends it again with the same webhook-id")
    func killMidDelivery() throws {
        let binary = try #require(ServeProcess.findBinary(), "build the latchkey executable (swift build --build-tests)")
        let database = try OwnDatabase(server: try TestDatabase.url())
        let rpId = "crash-\(uniqueSuffix()).latchkey.test"
        let adminKey = "admin-\(uniqueSuffix())"
        let environment = Self.environment(databaseURL: database.url, rpId: rpId, adminKey: adminKey)
        let gate = DispatchSemaphore(value: 0)
        // The first attempt hangs in the receiver until the sender is dead; later ones succeed.
        let receiver = try TestReceiver { attempt in
            if attempt == 1 { _ = gate.wait(timeout: .now() + 30) }
            return 200
        }
        defer { receiver.stop() }

        let a = try ServeProcess(binary: binary, environment: environment)
        defer { a.stop() }
        let portA = try a.waitUntilServing()
        let onA = Client(Endpoint(port: portA, rpId: rpId, origin: "https://\(rpId)", adminKey: adminKey))
        let (hookId, _) = try onA.subscribe(receiver.url, ["user.created"])
        let user = try onA.signUp(SoftAuthenticator(), username: "crash-\(uniqueSuffix())")
        #expect(waitFor { receiver.started >= 1 }, "A began the delivery")
        a.kill9()
        gate.signal()

        let b = try ServeProcess(binary: binary, environment: environment)
        defer { b.stop() }
        let onB = Client(Endpoint(port: try b.waitUntilServing(), rpId: rpId, origin: "https://\(rpId)", adminKey: adminKey))
        // A's lease (12 s) runs out; B claims the delivery and sends it.
        let got = receiver.wait(seconds: 40) { d in d.filter { $0.data?["userId"]?.stringValue == user.userId }.count >= 2 }
            .filter { $0.data?["userId"]?.stringValue == user.userId }
        #expect(got.count == 2, "\(got.count) attempts arrived")
        #expect(Set(got.map(\.id)).count == 1, "the same webhook-id after the crash")
        #expect(try waitFor(seconds: 10) { try onB.deliveries(hookId).first?["status"] == "delivered" })
        #expect(try onB.deliveries(hookId).first?["attempts"] == 2)
    }

    @Test("PostgreSQL restarts while a delivery is pending: nothing is lost, the event arrives afterwards")
    func postgresRestart() throws {
        let binary = try #require(ServeProcess.findBinary(), "build the latchkey executable (swift build --build-tests)")
        let cluster = try PrivateCluster()
        defer { cluster.stop() }
        let rpId = "restart-\(uniqueSuffix()).latchkey.test"
        let adminKey = "admin-\(uniqueSuffix())"
        let up = Mutex(false)
        let receiver = try TestReceiver { _ in up.withLock { $0 } ? 200 : 503 }
        defer { receiver.stop() }
        let a = try ServeProcess(binary: binary, environment: Self.environment(databaseURL: cluster.url, rpId: rpId, adminKey: adminKey))
        defer { a.stop() }
        let onA = Client(Endpoint(port: try a.waitUntilServing(), rpId: rpId, origin: "https://\(rpId)", adminKey: adminKey))
        let (hookId, _) = try onA.subscribe(receiver.url, ["user.created"])
        let user = try onA.signUp(SoftAuthenticator(), username: "restart-\(uniqueSuffix())")
        #expect(waitFor { receiver.started >= 1 }, "attempted before the restart (and refused)")

        try cluster.restart()
        up.withLock { $0 = true }
        let got = receiver.wait(seconds: 40) { d in d.contains { $0.data?["userId"]?.stringValue == user.userId && $0.type == "user.created" } }
        #expect(got.contains { $0.data?["userId"]?.stringValue == user.userId })
        #expect(waitFor(seconds: 15) { (try? onA.deliveries(hookId).first?["status"]) == "delivered" })
    }
}

/// A durable PostgreSQL cluster of its own (scripts/dev-postgres.sh with its own folder and port),
/// so restarting it touches no other test.
final class PrivateCluster {
    let directory = "/tmp/lk-restart-pg-\(uniqueSuffix())"
    let port: Int
    private(set) var url = ""

    init() throws {
        port = try ClusterPort.reserve()
        url = try run([])
    }

    func restart() throws {
        _ = try run(["--stop"])
        Thread.sleep(forTimeInterval: 1)
        url = try run([])
    }

    func stop() {
        _ = try? run(["--stop"])
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// posix_spawn + waitpid, not Foundation.Process: its waitUntilExit can miss the exit of a script
    /// that leaves a daemon (the postmaster) running; stdout goes to a file the daemon may keep open.
    @discardableResult
    private func run(_ arguments: [String]) throws -> String {
        let script = TestDatabase.repositoryRoot.appendingPathComponent("scripts/dev-postgres.sh").path
        let outputPath = directory + ".out"
        defer { unlink(outputPath) }
        let fd = open(outputPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw TestSetupError("cannot write \(outputPath)") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fd, 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv: [UnsafeMutablePointer<CChar>?] = (["/bin/bash", script] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var env = ProcessInfo.processInfo.environment
        env["LATCHKEY_DATA_DIR"] = directory
        env["LATCHKEY_PG_PORT"] = String(port)
        env["LATCHKEY_PG_FAST"] = "0"
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/bin/bash", &actions, nil, argv, envp)
        close(fd)
        guard spawned == 0 else { throw TestSetupError("cannot run \(script)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        guard status == 0 else { throw TestSetupError("dev-postgres.sh \(arguments) failed (status \(status))") }
        let data = FileManager.default.contents(atPath: outputPath) ?? Data()
        return String(String(decoding: data, as: UTF8.self).split(separator: "\n").last ?? "")
    }
}
