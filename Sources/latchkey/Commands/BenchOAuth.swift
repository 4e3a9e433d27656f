import Crypto
import HTTP
import LatchkeyServer
import PostgreSQL
import Synchronization
import Tokens
#if canImport(Glibc)
import Glibc
#endif

/// `latchkey bench oauth --database-url D`: the whole OpenID code flow (PAR → authorize → the
/// page's request view → passkey sign-in → approve with the OP cookie → code exchange → userinfo →
/// refresh) against a server this bench starts, beside its baseline measured in the same run: a
/// plain passkey login (options + verify) on the same database, server build and settings. Each
/// is served by its own server (started on the bench's database, stopped after its phase, so
/// `pg_stat_database` is flushed), through a `PostgresWireCounter` that counts round trips,
/// statements and transactions per step.
enum OAuthBenchmark {
    static let usage = "latchkey bench oauth --database-url D [--concurrency 8] [--duration 10] [--count 40] [--accounts 8] [--rounds 1] [--server BIN]"
    static let help = """
        oauth    the OpenID code flow over HTTP with PostgreSQL, beside a passkey login in the same run: a database
                 latchkey_bench_oauth on D's cluster (created anew), --accounts users signed up with software passkeys, one
                 confidential client (`clients add`, client_secret_basic); per phase a server of its own (LATCHKEY_DEV=1,
                 LATCHKEY_RATE_LIMIT=0, LATCHKEY_TRUST_PROXY=1: each flow's browser sends its own X-Forwarded-For address, as
                 one address may start 30 authorizations a minute) whose PostgreSQL connections pass through a counting relay.
                 Prints flows/s and logins/s,
                 p50/p99 per step and per flow (--concurrency threads for --duration s after a 1 s warm-up), then, from --count
                 flows run one request at a time, each step's database round trips, statements, transactions and WAL bytes
                 (medians, means in brackets), the per-flow sums, commits per flow from pg_stat_database.xact_commit, and every
                 figure as a ratio to the login's. --rounds alternates the phases; medians over rounds. A third phase runs the
                 same flow for a `--profile fapi2` client (FAPI 2.0: private_key_jwt with an ES256 key whose JWKS the bench
                 serves, DPoP proofs with the server's nonce, a refresh that does not rotate) and prints its figures the same
                 way (`fapi2`), each also as a ratio to the plain flow's.
        """

    struct Options {
        var databaseURL: String
        var concurrency = 8
        var duration = 10.0
        var counted = 40
        var users = 8
        var rounds = 1
        var server: String? = nil
    }

    static func parse(_ args: ParsedArguments) throws(UsageError) -> Options {
        guard let url = args.value("database-url") ?? Configuration.processEnvironment()["DATABASE_URL"], !url.isEmpty else {
            throw UsageError(message: "bench oauth needs --database-url (or DATABASE_URL): a database on the cluster to create latchkey_bench_oauth in")
        }
        var o = Options(databaseURL: url)
        func number(_ name: String, _ range: ClosedRange<Int>) throws(UsageError) -> Int? {
            guard let text = args.value(name) else { return nil }
            guard let n = Int(text), range.contains(n) else { throw UsageError(message: "--\(name) \(range.lowerBound)…\(range.upperBound)") }
            return n
        }
        o.concurrency = try number("concurrency", 1...256) ?? o.concurrency
        o.counted = try number("count", 1...10_000) ?? o.counted
        o.users = try number("accounts", 1...10_000) ?? o.users
        o.rounds = try number("rounds", 1...20) ?? o.rounds
        if let d = args.value("duration") {
            guard let v = Double(d), v > 0, v <= 3600 else { throw UsageError(message: "--duration seconds (0…3600)") }
            o.duration = v
        }
        o.server = args.value("server")
        return o
    }

    static let database = "latchkey_bench_oauth"

    static func run(_ o: Options) -> Int32 {
        let url = BenchDatabaseURL.database(database, of: o.databaseURL)
        guard let upstream = PostgresWireCounter.parse(url) else {
            printError("bench oauth: --database-url must be a postgresql://host:port/… URL (the relay connects over TCP)"); return ExitCode.usage
        }
        let binary = o.server ?? executablePath()
        print("latchkey bench oauth: server \(binary), database \(database), concurrency \(o.concurrency), \(o.duration) s per load after 1 s warm-up, "
              + "\(o.counted) flows counted one request at a time, \(o.rounds) round\(o.rounds == 1 ? "" : "s") alternating login and oauth")
        let stats: ClusterStats
        do {
            stats = try ClusterStats(url: BenchDatabaseURL.database("postgres", of: o.databaseURL))
            try stats.recreate(database)
        } catch {
            printError("cannot create \(database) on the cluster of --database-url: \(error)"); return ExitCode.failure
        }
        defer { stats.drop(database) }
        guard let relay = PostgresWireCounter(upstreamHost: upstream.host, upstreamPort: upstream.port) else { return ExitCode.failure }
        defer { relay.stop() }
        let relayedURL = upstream.relayed(relay.port)
        print("counting on the wire: the servers reach PostgreSQL through a relay on 127.0.0.1:\(relay.port) that counts ReadyForQuery "
              + "(round trips), CommandComplete (statements) and transactions ending (commits); it adds a loopback hop to every round trip "
              + "of both phases alike")
        let statements = StatementStatistics(stats: stats, databaseURL: url)
        print(statements.note)

        // Users and the client, through a first server (which also migrates the database).
        guard let setupServer = BenchServer.start(databaseURL: relayedURL, callgrind: false, binary: binary) else { return ExitCode.failure }
        var accounts: [BenchAccount] = []
        let http = HTTPClient(host: "127.0.0.1", port: setupServer.port)
        let runId = Base64URL.encode(SecureRandom.bytes(6))
        for i in 0..<max(o.users, 1) {
            guard case .success(let a) = BenchAccount.signUp(http, username: "oauth-bench-\(runId)-\(i)", displayName: "OAuth Bench \(i)",
                                                             origin: setupServer.origin) else {
                printError("sign-up through the API failed (log: \(setupServer.logPath))"); setupServer.stop(); return ExitCode.failure
            }
            accounts.append(a)
        }
        http.close()
        setupServer.stop()
        guard let client = addClient(binary: binary, databaseURL: url) else { return ExitCode.failure }
        print("setup: \(accounts.count) users with software passkeys (ES256, signed up through the API), client \(client.id) "
              + "(confidential, client_secret_basic, PKCE S256, scope openid profile offline_access)")
        // The FAPI 2.0 client: its ES256 key's JWKS served here, registered `--profile fapi2`.
        let signer = DPoPKey.generate()
        guard let jwks = BenchJWKS.start(signer) else { printError("cannot serve the fapi2 client's JWKS"); return ExitCode.failure }
        defer { jwks.stop() }
        guard let fapi2 = addClient(binary: binary, databaseURL: url, extra: ["--jwks-uri", "http://127.0.0.1:\(jwks.port)/jwks.json",
                                                                             "--profile", "fapi2"]) else { return ExitCode.failure }
        print("setup: fapi2 client \(fapi2.id) (--profile fapi2: private_key_jwt ES256, PAR, DPoP ES256 with the server's nonce, "
              + "refresh without rotation)")

        var phases: [BenchFlow.Kind: [FlowPhase.Result]] = [:]
        for round in 1...o.rounds {
            for kind in [BenchFlow.Kind.login, .oauth, .fapi2] {
                guard let r = FlowPhase.measure(kind, options: o, binary: binary, relayedURL: relayedURL, relay: relay, stats: stats,
                                                statements: statements, accounts: accounts, client: (client.id, client.secret ?? ""),
                                                fapi2: (fapi2.id, signer)) else { return ExitCode.failure }
                phases[kind, default: []].append(r)
                if o.rounds > 1 { print("round \(round) \(FlowPhase.label(kind)) \(r.rate.formatted)/s  errors \(r.errors)") }
                fflush(nil)
            }
        }
        let login = FlowPhase.Result.merged(phases[.login] ?? []), oauth = FlowPhase.Result.merged(phases[.oauth] ?? [])
        let fapi = FlowPhase.Result.merged(phases[.fapi2] ?? [])
        FlowReport.print(login: login, oauth: oauth, counted: o.counted, statementsNote: statements.available)
        FlowReport.printFAPI2(fapi, oauth: oauth)
        return login.errors == 0 && oauth.errors == 0 && fapi.errors == 0 && oauth.flows > 0 && fapi.flows > 0 ? ExitCode.success : ExitCode.failure
    }

    /// `latchkey clients add` (the CLI an operator uses), run on the bench's database directly.
    /// `extra`: more arguments (a `--profile fapi2` client's; it gets no secret). LATCHKEY_DEV=1, as the
    /// bench's servers: a loopback `--jwks-uri` is then allowed.
    static func addClient(binary: String, databaseURL: String, extra: [String] = []) -> (id: String, secret: String?)? {
        guard let child = spawn([binary, "clients", "add", extra.isEmpty ? "OAuth bench" : "FAPI bench", "--redirect-uri", OAuthBenchSetup.redirectURI] + extra,
                                extraEnvironment: ["DATABASE_URL=\(databaseURL)", "LATCHKEY_DEV=1"], capture: .standardOutputAndError) else {
            printError("cannot run \(binary) clients add"); return nil
        }
        let out = String(decoding: child.finish() ?? [], as: UTF8.self)
        var fields: [String: String] = [:]
        for line in out.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2 { fields[String(parts[0])] = parts[1].trimmingPrefix(" ").description }
        }
        guard let id = fields["client_id"], extra.contains("--profile") || fields["client_secret"] != nil else {
            printError("clients add failed:\n\(out)"); return nil
        }
        return (id, fields["client_secret"])
    }
}

extension Double {
    /// A rate as the bench prints it: whole numbers from 100 up, one decimal below.
    var formatted: String { self >= 100 ? "\(Int(self))" : formatDecimal(self, places: 1) }
}

/// pg_stat_statements' `calls` for the bench's database, when the cluster loads it: the second
/// counter of statements, beside the relay's. It needs `shared_preload_libraries` (a restart), which
/// a benchmark must not change on someone's cluster, so without it the relay's count stands alone.
struct StatementStatistics {
    let available: Bool
    let note: String
    private let connection: PostgresConnection?

    init(stats: ClusterStats, databaseURL: String) {
        let preload = (try? stats.connection.query("SELECT current_setting('shared_preload_libraries') AS l").first?.string("l")) ?? ""
        guard preload.contains("pg_stat_statements"), let c = try? PostgresConnection(url: databaseURL),
              (try? c.executeScript("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")) != nil else {
            available = false
            connection = nil
            note = "pg_stat_statements: not loaded (it needs shared_preload_libraries = 'pg_stat_statements' and a restart, "
                + "which the bench does not do to a cluster); statements are counted by the relay alone"
            return
        }
        available = true
        connection = c
        note = "pg_stat_statements: loaded; its calls per flow are printed beside the relay's statements"
    }

    /// Sum of `calls` in this database. Each reading is itself counted by the next one, which
    /// `delta` takes off.
    func calls() -> Int64? {
        try? connection?.query("SELECT coalesce(sum(calls), 0)::bigint AS n FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())")
            .first?.int64("n")
    }

    static func delta(_ before: Int64?, _ after: Int64?) -> Int64? {
        guard let before, let after else { return nil }
        return after - before - 1
    }
}
