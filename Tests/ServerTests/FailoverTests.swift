import Crypto
import Foundation
import JSON
import LatchkeyServer
import PostgreSQL
import PostgreSQLTesting
import Storage
import Synchronization
import Testing
import WebAuthn
import WebAuthnTesting

/// Issue 23 on the fault cluster (the tests take turns with FaultTests' others: same suite):
/// a hung primary, a COMMIT whose answer is lost, and a server started before its database.
extension FaultTests {
    @Test("a hung database (every PostgreSQL process SIGSTOPped): requests come back 503 naming a timeout, /healthz answers, and all is well after SIGCONT")
    func hungDatabase() throws {
        let url = try FaultCluster.start()
        let server = try FaultServer(name: "hung", databaseURL: url, threads: 2, queryTimeout: 1)
        let authenticator = SoftAuthenticator(algorithm: .es256)
        let username = server.username()
        _ = try server.client().signUp(authenticator, username: username)

        let stopped = try FaultCluster.signal(SIGSTOP)
        defer { _ = try? FaultCluster.signal(SIGCONT) }
        #expect(!stopped.isEmpty)
        let endpoint = server.endpoint
        // More requests than worker threads, each of which needs the database (username-first
        // options read the account; discoverable ones touch no database).
        let replies = onThreads(4) { _, start in
            start()
            return (try? Client(endpoint).authenticationOptions(username: username)).map { ($0.status, $0.isProblem) } ?? (-1, false)
        }
        #expect(replies.allSatisfy { $0.0 == 503 && $0.1 }, "while hung: \(replies)")
        #expect(try server.client().get("/healthz").status == 200, "/healthz answers while the database is hung")
        let ready = try server.client().get("/readyz")
        #expect(ready.status == 503, "/readyz while hung: \(ready)")
        let metrics = try server.client().get("/metrics").text
        #expect(metrics.contains("latchkey_db_unavailable_total{class=\"timeout\"}")
                || metrics.contains("latchkey_db_unavailable_total{class=\"connection_lost\"}"), "the 503s are counted by class")
        #expect(metrics.contains("latchkey_db_unavailable_total{class=\"timeout\"}"), "a query that got no answer is a timeout")

        _ = try FaultCluster.signal(SIGCONT)
        // Dropped connections are replaced: sign-ins work again (bounded retry, not a timing assertion).
        let back = waitFor(seconds: 20) { (try? server.client().login(authenticator, username: username).reply.status) == 200 }
        #expect(back, "no sign-in succeeded after SIGCONT")
        #expect(waitFor(seconds: 10) { (try? server.client().get("/readyz").status) == 200 })
    }

    @Test("a registration whose COMMIT happened but whose answer was lost: 503 first, then the same response is 409 credential_exists naming the passkey, no tokens; it signs in")
    func ambiguousCommit() throws {
        let url = try FaultCluster.start()
        let server = try FaultServer(name: "ambiguous", databaseURL: url, threads: 2, queryTimeout: 1)
        let admin = try PostgresConnection(url: url)
        func synchronousReplication(_ on: Bool) throws {
            // A standby that never comes: every durable COMMIT waits for it. The challenge pool's
            // sessions run with synchronous_commit=off and never wait.
            if on {
                try admin.execute("ALTER SYSTEM SET synchronous_standby_names = 'latchkey_absent_standby'")
                try admin.execute("ALTER SYSTEM SET synchronous_commit = 'on'")
            } else {
                try admin.execute("ALTER SYSTEM RESET synchronous_standby_names")
                try admin.execute("ALTER SYSTEM RESET synchronous_commit")
            }
            try admin.query("SELECT pg_reload_conf() AS ok")
        }
        defer { try? synchronousReplication(false) }

        let client = server.client()
        let authenticator = SoftAuthenticator(algorithm: .es256)
        let username = server.username()
        let options = try client.registrationOptions(username: username)
        guard options.status == 200, let json = options.json else { throw TestSetupError("options: \(options)") }
        authenticator.userHandle = userHandle(json)
        let body = try authenticator.registration(challenge: try challengeBytes(json), rpId: server.rpId, origin: server.origin).bytes()

        try synchronousReplication(true)
        // Committed locally; the wait for the standby runs past the request's budget, the client
        // cancels it and drops the connection: the answer is lost.
        let first = try client.send("POST", "/v1/passkeys/registration/verify", body: body)
        try synchronousReplication(false)
        #expect(first.status == 503 && first.isProblem, "first try: \(first)")

        let retry = try client.send("POST", "/v1/passkeys/registration/verify", body: body)
        #expect(retry.status == 409, "the retry: \(retry)")
        #expect(retry.json?["code"]?.stringValue == "credential_exists")
        #expect(retry.json?["passkey"]?["id"]?.stringValue == Base64URL.encode(authenticator.credentialId))
        #expect(retry.json?["tokens"] == nil && !retry.text.contains("refresh_token"), "a retry never mints tokens")
        // It was saved: the passkey signs in.
        #expect(try client.login(authenticator, username: username).reply.status == 200)
    }

    @Test("started while PostgreSQL is down: listens at once, /readyz 503 with the reason, /healthz 200; ready once the database is up")
    func startWithoutDatabase() throws {
        let url = try FaultCluster.start()
        try FaultCluster.stop()
        let server = try FaultServer(name: "early", databaseURL: url, threads: 2, queryTimeout: 1, background: true)
        let client = server.client()
        #expect(try client.get("/healthz").status == 200)
        let ready = try client.get("/readyz")
        #expect(ready.status == 503 && ready.text.contains("not ready"), "\(ready)")
        let early = try client.authenticationOptions()
        #expect(early.status == 503 && early.isProblem, "an API call before start-up is done: \(early)")

        _ = try FaultCluster.start()
        #expect(waitFor(seconds: 30) { (try? client.get("/readyz").status) == 200 }, "/readyz never turned 200 after PostgreSQL started")
        let authenticator = SoftAuthenticator(algorithm: .es256)
        let username = server.username()
        _ = try client.signUp(authenticator, username: username)
        #expect(try client.login(authenticator, username: username).reply.status == 200)
    }
}

extension FaultCluster {
    /// Sends `signal` to the fault cluster's postmaster and every child of it; returns their pids.
    @discardableResult
    static func signal(_ signal: Int32) throws -> [pid_t] {
        let pidFile = dataDirectory + "/cluster/postmaster.pid"
        guard let text = try? String(contentsOfFile: pidFile, encoding: .utf8),
              let first = text.split(separator: "\n").first, let postmaster = pid_t(first) else {
            throw TestSetupError("no postmaster.pid in \(pidFile)")
        }
        var pids = [postmaster]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = pid_t(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            // "pid (comm) state ppid …"
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, pid_t(fields[1]) == postmaster { pids.append(pid) }
        }
        for pid in pids { kill(pid, signal) }
        return pids
    }
}
