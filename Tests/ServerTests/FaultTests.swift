import Foundation
import HTTP
import JSON
import LatchkeyServer
import PostgreSQL
import PostgreSQLTesting
import Storage
import Synchronization
import Testing
import WebAuthn
import WebAuthnTesting

/// Faults, with real components: a PostgreSQL cluster of this suite's own (which it stops, starts
/// and locks; the shared test cluster the other suites use is never touched), real HTTP on
/// loopback, and the real `latchkey serve` binary where a process has to die.
/// Serialized: the tests take turns with the one fault cluster, which is stopped once the suite is
/// done (`.stopsFaultCluster`): the test run leaves no server of its own running.
@Suite("Faults: database restart, kill -9, slow database, idle connections", .serialized, .stopsFaultCluster)
struct FaultTests {
    // MARK: PostgreSQL restarted under login load

    @Test("PostgreSQL restarted under login load: errors (503) only during the outage, /readyz 503 then 200, logins resume once it is back")
    func databaseRestartUnderLoad() throws {
        let url = try FaultCluster.start()
        let server = try FaultServer(name: "restart", databaseURL: url)
        let authenticator = SoftAuthenticator(algorithm: .es256)
        let username = server.username()
        _ = try server.client().signUp(authenticator, username: username)

        let load = LoginLoad(server: server, authenticator: authenticator, threads: 3)
        load.start()
        defer { load.stop() }
        Thread.sleep(forTimeInterval: 1.0)
        #expect(load.attempts.contains { $0.status == 200 }, "logins work before the outage")

        let stopping = Date()
        try FaultCluster.stop()
        let monitor = server.client()
        // The outage is seen: /readyz turns 503 (bounded poll).
        let notReady = waitFor(seconds: 10) { (try? monitor.get("/readyz").status) == 503 }
        #expect(notReady, "/readyz did not turn 503 while PostgreSQL was down")
        #expect(try monitor.get("/healthz").status == 200, "the process stays up and answers /healthz during the outage")
        Thread.sleep(forTimeInterval: 0.5)

        _ = try FaultCluster.start()
        let started = Date()
        // Resume: a login every 100 ms until one succeeds. Its delay is printed (0.01 s here on an idle
        // machine), not asserted on; the limit only keeps a broken pool from hanging the test.
        let probe = server.client()
        let resumedAfter = propagation("a login after PostgreSQL is back", limit: 15) {
            if (try? probe.login(authenticator, username: username).reply.status) == 200 { return true }
            Thread.sleep(forTimeInterval: 0.08)
            return false
        }
        #expect(resumedAfter != nil, "no login succeeded after PostgreSQL accepted connections again")
        let ready = propagation("/readyz 200 after PostgreSQL is back", limit: 15) { (try? monitor.get("/readyz").status) == 200 }
        #expect(ready != nil, "/readyz did not return to 200 after PostgreSQL accepted connections again")
        // The outage ends two seconds after the first login that worked again (time for every pooled
        // connection the restart broke to be found and replaced); the load goes on for a second
        // more, and every login then must succeed.
        let resumed = started.addingTimeInterval(resumedAfter ?? 0)
        Thread.sleep(forTimeInterval: max(0, resumed.addingTimeInterval(3.0).timeIntervalSinceNow))
        load.stop()

        let attempts = load.attempts
        let window = (from: stopping, to: resumed.addingTimeInterval(2.0))
        let failures = attempts.filter { $0.status != 200 }
        let late = attempts.filter { $0.started > window.to }
        #expect(!late.isEmpty && late.allSatisfy { $0.status == 200 }, "logins after the outage: \(late.map(\.status))")
        #expect(attempts.filter { $0.finished < window.from }.allSatisfy { $0.status == 200 })
        for failure in failures {
            // An error belongs to the outage: it overlaps [stop, resumed + 2 s] and is a 503 problem
            // (never a dropped connection, a 500, or a 4xx that blames the client).
            #expect(failure.finished >= window.from && failure.started <= window.to,
                    "a login failed outside the outage: \(failure)")
            #expect(failure.status == 503 && failure.isProblem, "a login failed with \(failure) instead of a 503 problem")
        }
        #expect(!failures.isEmpty, "the load saw no error at all: the outage did not happen under load")
        print("fault: restart — \(attempts.count) logins, \(failures.count) failed during the outage (all 503); "
              + "resumed \(String(format: "%.2f", resumedAfter ?? -1)) s after PostgreSQL was back")
    }

    // MARK: kill -9 mid-registration

    @Test("kill -9 of `latchkey serve` mid-registration: the user and the credential both exist or neither")
    func killDuringRegistration() throws {
        guard let binary = ServeProcess.findBinary() else {
            Issue.record("the latchkey executable was not found; build it with `swift build --build-tests` (or set LATCHKEY_BINARY)")
            return
        }
        let url = try FaultCluster.start()
        let rpId = "kill-\(uniqueSuffix()).latchkey.test"
        let origin = "https://\(rpId)"
        let environment = [
            "DATABASE_URL": url, "LATCHKEY_LISTEN": "127.0.0.1:0", "LATCHKEY_RP_ID": rpId, "LATCHKEY_ORIGINS": origin,
            "LATCHKEY_ADMIN_KEY": "admin-\(uniqueSuffix())-\(uniqueSuffix())-\(uniqueSuffix())", "LATCHKEY_THREADS": "4", "LATCHKEY_DEV": "0", "LATCHKEY_KEY_ENCRYPTION_KEY": TestDatabase.keyEncryptionKeyText,
            "LATCHKEY_WORKERS": "1", "LATCHKEY_RATE_LIMIT": "0",
        ]
        let database = try PostgresConnection(url: url)
        var attempted: [String] = []

        // 1. Deterministic: the registration's write waits on a lock another session holds (so it
        //    is provably in flight inside PostgreSQL) when the process is killed.
        do {
            let serve = try ServeProcess(binary: binary, environment: environment)
            defer { serve.stop() }
            let endpoint = Endpoint(port: try serve.waitUntilServing(), rpId: rpId, origin: origin, adminKey: nil)
            let client = Client(endpoint)
            let username = "kill-\(uniqueSuffix())"
            attempted.append(username)
            let options = try #require(try client.registrationOptions(username: username).json)
            let body = SoftAuthenticator(algorithm: .es256)
                .registration(challenge: try challengeBytes(options), rpId: rpId, origin: origin).bytes()
            let locker = try PostgresConnection(url: url)
            _ = try locker.execute("BEGIN")
            _ = try locker.execute("LOCK TABLE credentials IN ACCESS EXCLUSIVE MODE")
            let inFlight = Thread { _ = try? Client(endpoint).send("POST", "/v1/passkeys/registration/verify", body: body) }
            inFlight.start()
            let waiting = waitFor(seconds: 10) {
                (try? database.query("""
                    SELECT count(*)::int AS n FROM pg_stat_activity
                    WHERE wait_event_type = 'Lock' AND query ILIKE '%credentials%' AND pid <> pg_backend_pid()
                    """).first?.int("n")) ?? 0 > 0
            }
            #expect(waiting, "the registration never reached the credentials insert")
            kill(serve.processIdentifier, SIGKILL)
            serve.stop()
            _ = try locker.execute("ROLLBACK")
            // The orphaned statement finishes (or is cancelled) once the lock is gone.
            #expect(waitFor(seconds: 10) {
                (try? database.query("""
                    SELECT count(*)::int AS n FROM pg_stat_activity
                    WHERE state = 'active' AND query ILIKE '%INSERT INTO credentials%' AND pid <> pg_backend_pid()
                    """).first?.int("n")) == 0
            })
        }

        // 2. Under load: four threads register new accounts; the process dies at a random moment.
        var inFlightAtKill = 0
        for round in 0..<2 {
            let serve = try ServeProcess(binary: binary, environment: environment)
            defer { serve.stop() }
            let endpoint = Endpoint(port: try serve.waitUntilServing(), rpId: rpId, origin: origin, adminKey: nil)
            let names = Mutex<[String]>([])
            let broken = Mutex(0)
            let stop = Atomic<Bool>(false)
            let workers = (0..<4).map { i in
                Thread {
                    let client = Client(endpoint)
                    while !stop.load(ordering: .relaxed) {
                        let username = "kill-\(round)-\(i)-\(uniqueSuffix())"
                        names.withLock { $0.append(username) }
                        do { _ = try client.register(SoftAuthenticator(algorithm: .es256), username: username) } catch {
                            broken.withLock { $0 += 1 }
                            return
                        }
                    }
                }
            }
            workers.forEach { $0.start() }
            Thread.sleep(forTimeInterval: Double.random(in: 0.4...1.0))
            kill(serve.processIdentifier, SIGKILL)
            serve.stop()
            stop.store(true, ordering: .relaxed)
            _ = waitFor(seconds: 35) { workers.allSatisfy { $0.isFinished } }
            attempted += names.withLock { $0 }
            inFlightAtKill += broken.withLock { $0 }
        }
        #expect(inFlightAtKill > 0, "no request was in flight when the process was killed")

        // Nothing half-written: for every username tried, the account and its passkey both exist or neither.
        var complete = 0
        for username in attempted {
            let row = try #require(try database.query("""
                SELECT (SELECT count(*)::int FROM users WHERE username = \(username)) AS users,
                       (SELECT count(*)::int FROM credentials c JOIN users u ON u.id = c.user_id WHERE u.username = \(username)) AS credentials
                """).first)
            let users = try row.int("users"), credentials = try row.int("credentials")
            #expect((users == 0 && credentials == 0) || (users == 1 && credentials == 1),
                    "\(username): \(users) user rows, \(credentials) credentials")
            if users == 1 { complete += 1 }
        }
        print("fault: kill -9 — \(attempted.count) registrations tried, \(complete) complete, "
              + "\(attempted.count - complete) absent, \(inFlightAtKill) cut off by a kill under load, none half-written")
    }

    // MARK: the database answering slowly

    @Test("a slow database: statement_timeout gives a 503 problem while the lock still holds, /healthz answers meanwhile, no thread stays stuck")
    func slowDatabase() throws {
        let url = try FaultCluster.start()
        let admin = try PostgresConnection(url: url)
        // A DBA's setting on the database, picked up by every new connection of the server below.
        _ = try admin.execute("ALTER DATABASE latchkey_test SET statement_timeout = '1500ms'")
        defer { _ = try? admin.execute("ALTER DATABASE latchkey_test RESET statement_timeout") }
        let server = try FaultServer(name: "slow", databaseURL: url, threads: 4)
        let client = server.client()
        #expect(try client.authenticationOptions().status == 200)

        let locker = try PostgresConnection(url: url)
        _ = try locker.execute("BEGIN")
        // Username-first sign-in options read the account (discoverable ones need no database at all).
        _ = try locker.execute("LOCK TABLE users IN ACCESS EXCLUSIVE MODE")
        let endpoint = server.endpoint
        let outcomes = Mutex<[(status: Int, problem: Bool, seconds: Double)]>([])
        let blocked = (0..<2).map { _ in
            Thread {
                let start = Date()
                let reply = try? Client(endpoint).authenticationOptions(username: "slow-\(uniqueSuffix())")
                outcomes.withLock { $0.append((reply?.status ?? -1, reply?.isProblem ?? false, Date().timeIntervalSince(start))) }
            }
        }
        blocked.forEach { $0.start() }
        Thread.sleep(forTimeInterval: 0.3)
        // Meanwhile — the lock is held until the ROLLBACK below — the server answers what needs no
        // database. (Timings are printed, not asserted: tests never assert on wall-clock time.)
        let health = Date()
        #expect(try server.client().get("/healthz").status == 200)
        let healthSeconds = Date().timeIntervalSince(health)
        // Both blocked requests come back while the lock is still held: statement_timeout, not the
        // ROLLBACK, ended them (one timeout each, on two of the server's workers: about 1.5 s each).
        #expect(waitFor(seconds: 30) { outcomes.withLock { $0.count } == 2 }, "a request blocked on the database did not return")
        _ = try locker.execute("ROLLBACK")
        for outcome in outcomes.withLock({ $0 }) {
            #expect(outcome.status == 503 && outcome.problem, "blocked request answered \(outcome.status)")
        }
        // No thread or connection stays stuck: more concurrent requests than threads all succeed.
        let after = onThreads(8) { _, start in
            start()
            return (try? Client(endpoint).authenticationOptions(username: "after-\(uniqueSuffix())").status) ?? -1
        }
        #expect(after.allSatisfy { $0 == 200 }, "after the lock: \(after)")
        #expect(waitFor(seconds: 5) {
            (try? admin.query("""
                SELECT count(*)::int AS n FROM pg_stat_activity
                WHERE datname = 'latchkey_test' AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()
                """).first?.int("n")) == 0
        }, "a server session is still waiting on a lock")
        print("fault: slow database — blocked requests: \(outcomes.withLock { $0.map { "\($0.status) in \(String(format: "%.2f", $0.seconds)) s" } }), "
              + "/healthz in \(String(format: "%.3f", healthSeconds)) s")
    }

    // MARK: 1,000 idle connections

    @Test("1,000 idle TCP connections held open to `latchkey serve`: it still answers other clients")
    func idleConnections() throws {
        guard let binary = ServeProcess.findBinary() else {
            Issue.record("the latchkey executable was not found; build it with `swift build --build-tests` (or set LATCHKEY_BINARY)")
            return
        }
        let url = try FaultCluster.start()
        let rpId = "idle-\(uniqueSuffix()).latchkey.test"
        let serve = try ServeProcess(binary: binary, environment: [
            "DATABASE_URL": url, "LATCHKEY_LISTEN": "127.0.0.1:0", "LATCHKEY_RP_ID": rpId, "LATCHKEY_ORIGINS": "https://\(rpId)",
            "LATCHKEY_ADMIN_KEY": "admin-\(uniqueSuffix())-\(uniqueSuffix())-\(uniqueSuffix())", "LATCHKEY_THREADS": "2", "LATCHKEY_DEV": "0", "LATCHKEY_WORKERS": "1", "LATCHKEY_KEY_ENCRYPTION_KEY": TestDatabase.keyEncryptionKeyText,
            // The per-address cap (default 64 outside dev mode) would refuse the 1,000 from one address:
            // this test is about idle connections not starving others, so the cap is lifted here.
            "LATCHKEY_RATE_LIMIT": "0", "LATCHKEY_CONNECTIONS_PER_ADDRESS": "0",
        ])
        defer { serve.stop() }
        let port = try serve.waitUntilServing()
        var idle: [Int32] = []
        defer { idle.forEach { close($0) } }
        for _ in 0..<1000 {
            let fd = try connectLoopback(port: port)
            idle.append(fd)
            // Some send half a request line and stop, as a slow client would.
            if idle.count % 4 == 0 { _ = "GET /healthz HTT".withCString { write(fd, $0, 16) } }
        }
        let endpoint = Endpoint(port: port, rpId: rpId, origin: "https://\(rpId)", adminKey: nil)
        var slowest = 0.0
        for _ in 0..<20 {
            let start = Date()
            let client = Client(endpoint)
            #expect(try client.get("/healthz").status == 200)
            #expect(try client.authenticationOptions().status == 200)
            slowest = max(slowest, Date().timeIntervalSince(start))
        }
        // Answered at all is the property (the client gives up after its own timeout); how fast is
        // printed below, not asserted (0.0x s here).
        // The idle connections were held, not refused: the server has not closed them.
        var stillOpen = 0
        for fd in idle {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if Glibc.poll(&pfd, 1, 0) == 0 { stillOpen += 1 }
        }
        #expect(stillOpen >= 990, "only \(stillOpen) of 1,000 idle connections are still open")
        #expect(serve.isRunning)
        print("fault: idle connections — \(stillOpen) of 1,000 held open; slowest request pair \(String(format: "%.3f", slowest)) s")
    }
}

// MARK: - Support

/// The fault tests' own PostgreSQL: scripts/dev-postgres.sh with its own data folder
/// (`<repo>/data/fault-postgres`, or LATCHKEY_FAULT_DATA_DIR) and a port chosen once per run, so
/// stopping it never disturbs the shared test cluster.
enum FaultCluster {
    static let dataDirectory = ProcessInfo.processInfo.environment["LATCHKEY_FAULT_DATA_DIR"]
        ?? TestDatabase.repositoryRoot.appendingPathComponent("data/fault-postgres").path
    private static let port = Mutex<Int?>(nil)

    /// Starts the cluster (initialising it on first use) and returns its `latchkey_test` URL.
    @discardableResult
    static func start() throws -> String {
        let chosen = try port.withLock { p throws -> Int in
            if let p { return p }
            let free = try ClusterPort.reserve()
            p = free
            return free
        }
        let output = try script([], port: chosen)
        guard let last = output.split(separator: "\n").last, let slash = last.lastIndex(of: "/") else {
            throw TestSetupError("dev-postgres.sh printed no URL: \(output)")
        }
        return String(last[..<slash]) + "/latchkey_test"
    }

    static func stop() throws {
        guard let chosen = port.withLock({ $0 }) else { return }
        _ = try script(["--stop"], port: chosen)
    }

    private static func script(_ arguments: [String], port: Int) throws -> String {
        var environment = ProcessInfo.processInfo.environment
        environment["LATCHKEY_DATA_DIR"] = dataDirectory
        environment["LATCHKEY_PG_PORT"] = String(port)
        environment["LATCHKEY_PG_FAST"] = "1"
        // stdout goes to a file, not a pipe: a PostgreSQL the script starts inherits descriptors and
        // would hold a pipe open (no EOF) for as long as it runs. posix_spawn + waitpid rather than
        // Foundation.Process, whose waitUntilExit did not return here once the script had exited.
        let outputPath = NSTemporaryDirectory() + "latchkey-fault-pg-\(getpid())-\(uniqueSuffix()).out"
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        let script = TestDatabase.repositoryRoot.appendingPathComponent("scripts/dev-postgres.sh").path
        let status = try spawnAndWait(["/bin/bash", script] + arguments, environment: environment, stdoutPath: outputPath)
        guard status == 0 else { throw TestSetupError("dev-postgres.sh \(arguments) failed (status \(status))") }
        return (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
    }
}

/// Stops the fault cluster after the suite it marks, however its tests ended (the tests start it on
/// first use).
struct StopsFaultCluster: SuiteTrait, TestScoping {
    func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        defer {
            do { try FaultCluster.stop() } catch { Issue.record("the fault cluster did not stop: \(error)") }
        }
        try await function()
    }
}

extension Trait where Self == StopsFaultCluster {
    static var stopsFaultCluster: Self { Self() }
}

/// Runs `argv` with stdout to `stdoutPath` (stderr inherited) and returns its exit status.
func spawnAndWait(_ argv: [String], environment: [String: String], stdoutPath: String) throws -> Int32 {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    let cArgs = argv.map { strdup($0) } + [nil]
    let cEnv = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { cArgs.forEach { free($0) }; cEnv.forEach { free($0) } }
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, argv[0], &actions, nil, cArgs, cEnv)
    guard spawned == 0 else { throw TestSetupError("posix_spawn \(argv[0]) failed: \(spawned)") }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 {
        guard errno == EINTR else { throw TestSetupError("waitpid failed: errno \(errno)") }
    }
    // WIFEXITED / WEXITSTATUS by hand (macros Swift does not import).
    return (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
}

/// A server in this process over the fault cluster (TestServer's shape, with its own URL and threads).
final class FaultServer: Sendable {
    let rpId: String
    let origin: String
    let services: Services
    let http: HTTPServer

    /// `queryTimeout`: LATCHKEY_DB_QUERY_TIMEOUT. `background`: start as `serve` does (listening
    /// before the database is reachable, `Services.startInBackground`) instead of `start()` first.
    init(name: String, databaseURL: String, threads: Int = 2, queryTimeout: Double = Database.defaultQueryTimeout,
         background: Bool = false) throws {
        rpId = "\(name)-\(uniqueSuffix()).latchkey.test"
        origin = "https://\(rpId)"
        var c = Configuration()
        c.rpId = rpId
        c.origins = [origin]
        c.issuer = origin
        c.databaseURL = databaseURL
        c.keyEncryptionKey = TestDatabase.keyEncryptionKey
        c.databaseQueryTimeout = queryTimeout
        let database = Database(url: databaseURL, connections: threads + 2, queryTimeout: queryTimeout)
        services = Services(configuration: c, database: database, log: RequestLog(enabled: false))
        if background {
            try services.startInBackground(onReady: {}, onFatal: { error in Issue.record("start-up gave up: \(error)") })
        } else {
            try services.start()
        }
        http = try HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threadPoolSize: threads, connectionTimeoutSeconds: 30,
                                                   connectionLimit: 1024, maxBodyBytes: c.maxBody),
                              responder: Application(services: services))
    }

    deinit {
        http.stop()
        services.stop()
    }

    var endpoint: Endpoint { Endpoint(port: http.port, rpId: rpId, origin: origin, adminKey: nil) }
    func client() -> Client { Client(endpoint) }
    func username() -> String { "fault-\(uniqueSuffix())" }
}

/// Threads logging in back to back, each attempt recorded with its status and timing.
final class LoginLoad: Sendable {
    struct Attempt: CustomStringConvertible {
        let started: Date
        let finished: Date
        /// HTTP status of the first step that did not answer 200 (options, then verify); -1: no answer.
        let status: Int
        let isProblem: Bool
        var description: String { "\(status) at \(started.timeIntervalSince1970)…\(finished.timeIntervalSince1970)" }
    }

    private let endpoint: Endpoint
    private let authenticator: SoftAuthenticator
    private let threads: Int
    private let running = Atomic<Bool>(false)
    private let active = Atomic<Int>(0)
    private let recorded = Mutex<[Attempt]>([])

    init(server: FaultServer, authenticator: SoftAuthenticator, threads: Int) {
        endpoint = server.endpoint
        self.authenticator = authenticator
        self.threads = threads
    }

    var attempts: [Attempt] { recorded.withLock { $0 } }

    func start() {
        running.store(true, ordering: .sequentiallyConsistent)
        for _ in 0..<threads {
            active.add(1, ordering: .sequentiallyConsistent)
            Thread { [self] in
                defer { active.subtract(1, ordering: .sequentiallyConsistent) }
                var client = Client(endpoint)
                while running.load(ordering: .sequentiallyConsistent) {
                    let started = Date()
                    var status = -1, problem = false
                    do {
                        let options = try client.authenticationOptions()
                        if options.status == 200, let json = options.json {
                            let reply = try client.send("POST", "/v1/passkeys/authentication/verify",
                                                        body: client.assertion(authenticator, options: json).bytes())
                            status = reply.status
                            problem = reply.isProblem
                        } else {
                            status = options.status
                            problem = options.isProblem
                        }
                    } catch {
                        client = Client(endpoint)  // a new connection after a transport error
                    }
                    recorded.withLock { $0.append(Attempt(started: started, finished: Date(), status: status, isProblem: problem)) }
                    if status != 200 { Thread.sleep(forTimeInterval: 0.05) }
                }
            }.start()
        }
    }

    /// Stops the threads and waits (bounded) until they have.
    func stop() {
        running.store(false, ordering: .sequentiallyConsistent)
        _ = waitFor(seconds: 35) { active.load(ordering: .sequentiallyConsistent) == 0 }
    }
}


func connectLoopback(port: Int) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestSetupError("socket() failed: errno \(errno)") }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { close(fd); throw TestSetupError("connect() failed: errno \(errno)") }
    return fd
}
