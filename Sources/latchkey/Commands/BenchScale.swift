import Crypto
import EventLoop
import HTTP
import JSON
import LatchkeyServer
import PostgreSQL
import Storage
import Synchronization
import WebAuthnTesting
#if canImport(Glibc)
import Glibc
#endif

/// `latchkey bench login --accounts N --database-url D`: the login path at a database size. Two
/// databases on D's cluster — one with a handful of seeded accounts ("empty"), one with N, both
/// COPY-seeded the same way — each served in turn by a server this bench starts (this executable,
/// `serve`, LATCHKEY_DEV=1, default threads), rounds alternating so drift on the machine hits both
/// alike. Per phase: logins/s, p50/p95/p99, server and PostgreSQL CPU µs per login (/proc), WAL bytes
/// and full-page images per login (pg_stat_wal), commits per login (pg_stat_database); then the
/// ratio of the medians, the database sizes, and with `--instructions` the server's instructions
/// per login under valgrind's callgrind.
enum ScaleBenchmark {
    struct Options {
        var accounts: Int
        var databaseURL: String
        var concurrency = 32
        var duration = 10.0
        var rounds = 2
        var instructions = false
        var reuse = false
        /// `--checkpoint-once`: CHECKPOINT before the first phase only, not before every phase.
        var checkpointOnce = false
        /// `--server BIN`: the latchkey binary the bench's servers run (default: this one), e.g. an
        /// older build to compare against; its databases carry the binary's name.
        var server: String? = nil
    }

    static let smallAccounts = 64

    static func parse(_ args: ParsedArguments, accounts: String) throws(UsageError) -> Options {
        guard let n = Int(accounts), n >= 1, n <= 50_000_000 else { throw UsageError(message: "--accounts 1…50000000") }
        guard let url = args.value("database-url") ?? Configuration.processEnvironment()["DATABASE_URL"], !url.isEmpty else {
            throw UsageError(message: "--accounts needs --database-url (or DATABASE_URL): a database on the cluster to create the bench's databases in")
        }
        var o = Options(accounts: n, databaseURL: url)
        if let c = args.value("concurrency") {
            guard let v = Int(c), (1...1024).contains(v) else { throw UsageError(message: "--concurrency 1…1024") }
            o.concurrency = v
        }
        if let d = args.value("duration") {
            guard let v = Double(d), v > 0, v <= 3600 else { throw UsageError(message: "--duration seconds (0…3600)") }
            o.duration = v
        }
        if let r = args.value("rounds") {
            guard let v = Int(r), (1...20).contains(v) else { throw UsageError(message: "--rounds 1…20") }
            o.rounds = v
        }
        o.instructions = args.has("instructions")
        o.reuse = args.has("reuse")
        o.checkpointOnce = args.has("checkpoint-once")
        o.server = args.value("server")
        return o
    }

    struct Phase {
        var logins = 0, errors = 0, rate = 0.0
        var latencies: [Double] = []
        var serverCPU = 0.0, databaseCPU = 0.0       // seconds over the measured load
        var allLogins = 0                            // with the warm-up: what the WAL and commits are divided by
        var walBytes = 0.0, walFPI = 0.0, commits = 0.0
        var peakRSSKiB = 0
        var instructions = 0.0
    }

    static func run(_ o: Options) -> Int32 {
        // Every database of the bench is on D's cluster, reached with D's own parameters.
        func url(_ database: String) -> String { BenchDatabaseURL.database(database, of: o.databaseURL) }
        let small = min(smallAccounts, o.accounts)
        // Database names: digits and [a-z_] only, made here.
        let suffix = o.server.map { "_" + String(($0.split(separator: "/").last ?? "").lowercased().map { $0.isLetter || $0.isNumber ? $0 : "_" }) } ?? ""
        let databases = [(label: "empty", name: "latchkey_bench_accounts_\(small)\(suffix)", accounts: small),
                         (label: "\(o.accounts)", name: "latchkey_bench_accounts_\(o.accounts)\(suffix)", accounts: o.accounts)]
        let server = o.server ?? executablePath()
        print("server binary: \(server)")
        print("latchkey bench login --accounts \(o.accounts): \(small) accounts (\"empty\") beside \(o.accounts), concurrency \(o.concurrency), "
              + "\(o.duration) s × \(o.rounds) rounds each, alternating (even rounds large first); "
              + (o.checkpointOnce ? "one CHECKPOINT before the first round" : "a CHECKPOINT before every phase"))
        let stats: ClusterStats
        do { stats = try ClusterStats(url: url("postgres")) } catch {
            printError("cannot reach the cluster of --database-url (database postgres): \(error)"); return ExitCode.failure
        }
        for db in databases where !(small == o.accounts && db.label != "empty") {
            guard prepare(url: url(db.name), name: db.name, accounts: db.accounts, reuse: o.reuse, stats: stats, server: server) else { return ExitCode.failure }
        }
        let sized = small == o.accounts ? [databases[0]] : databases
        for db in sized { SeededAccounts.prewarm(databaseURL: url(db.name), name: db.name) }
        var phases: [String: [Phase]] = [:]
        for round in 1...o.rounds {
            // Even rounds run the large database first (A B, B A, …): a machine whose speed drifts
            // within a round then favours each side in every other round, and the round-by-round
            // median below is not tilted towards whichever phase always ran first.
            let order = round % 2 == 0 ? Array(sized.reversed()) : sized
            for (index, db) in order.enumerated() {
                let checkpoint = !o.checkpointOnce || (round == 1 && index == 0)
                guard let p = measure(url: url(db.name), database: db.name, accounts: db.accounts, concurrency: o.concurrency,
                                      seconds: o.duration, stats: stats, callgrind: false, checkpoint: checkpoint,
                                      server: server) else { return ExitCode.failure }
                phases[db.label, default: []].append(p)
                print("round \(round) \(db.label.padding(8)) \(describe(p))")
                fflush(nil)  // a long run shows its phases as they end, also into a file
            }
        }
        func median(_ label: String, _ f: (Phase) -> Double) -> Double { FlowReport.median((phases[label] ?? []).map(f)) }
        let sizes = sized.map { (label: $0.label, bytes: (try? stats.databaseSize($0.name)) ?? 0) }
        for db in sized {
            let all = (phases[db.label] ?? []).flatMap(\.latencies).sorted()
            print("median \(db.label.padding(8)) \(Int(median(db.label, \.rate)))/s  p50 \(percentile(all, 0.50, places: 1))  "
                  + "p99 \(percentile(all, 0.99, places: 1))  server CPU \(Int(median(db.label) { $0.serverCPU * 1e6 / Double(max($0.logins, 1)) })) µs/login  "
                  + "PostgreSQL CPU \(Int(median(db.label) { $0.databaseCPU * 1e6 / Double(max($0.logins, 1)) })) µs/login  "
                  + "WAL \(Int(median(db.label) { $0.walBytes / Double(max($0.allLogins, 1)) })) B/login  "
                  + "commits \(formatDecimal(median(db.label) { $0.commits / Double(max($0.allLogins, 1)) }, places: 2))/login")
        }
        if sized.count == 2 {
            let ratio = median(sized[1].label, \.rate) / max(median("empty", \.rate), 1)
            print("ratio=\(formatDecimal(ratio, places: 2)) (median logins/s at \(o.accounts) accounts / at \(small))")
            // Each round's two phases run back to back, so their ratio is less moved by the
            // machine's drift than the ratio of medians taken across rounds.
            let paired = zip(phases["empty"] ?? [], phases[sized[1].label] ?? []).map { $1.rate / max($0.rate, 1) }
            if paired.count > 1 {
                print("round by round \(paired.map { formatDecimal($0, places: 2) }.joined(separator: ", ")): "
                      + "median \(formatDecimal(FlowReport.median(paired), places: 2))")
                // A round run small-first and the next run large-first see a steady drift with
                // opposite signs: the geometric mean of the two cancels it (an ABBA design).
                let pairs = stride(from: 0, to: paired.count - 1, by: 2).map { (paired[$0] * paired[$0 + 1]).squareRoot() }
                print("AB/BA pairs \(pairs.map { formatDecimal($0, places: 2) }.joined(separator: ", ")): "
                      + "median \(formatDecimal(FlowReport.median(pairs), places: 2)) (a steady drift cancels within a pair)")
            }
        }
        let sizeText = sizes.map { "\($0.label) \(megabytes($0.bytes))" }.joined(separator: ", ")
        if sizes.count == 2, o.accounts - small >= 10_000 {
            let perAccount = Double(sizes[1].bytes - sizes[0].bytes) / Double(max(o.accounts - small, 1))
            print("database size: \(sizeText); \(Int(perAccount)) B per seeded account (user, passkey, 2 audit lines, their indexes)")
        } else {
            print("database size: \(sizeText)")
        }
        print("credential key cache: on in the server (\(SeededAccounts.cacheNote))")
        if o.instructions {
            guard findValgrind() != nil else { printError("--instructions needs valgrind (apt-get install valgrind)"); return ExitCode.failure }
            for db in sized {
                guard let p = measure(url: url(db.name), database: db.name, accounts: db.accounts, concurrency: 2,
                                      seconds: max(10, o.duration), stats: stats, callgrind: true, checkpoint: true,
                                      server: server) else { return ExitCode.failure }
                print("instructions \(db.label.padding(8)) \(Int(p.instructions / Double(max(p.logins, 1)))) per login "
                      + "(server under callgrind, \(p.logins) logins at concurrency 2, its idle background subtracted)")
            }
        }
        return ExitCode.success
    }

    static func describe(_ p: Phase) -> String {
        let n = Double(max(p.logins, 1)), all = Double(max(p.allLogins, 1))
        return "logins \(p.logins)  \(Int(p.rate))/s  p50 \(percentile(p.latencies, 0.50, places: 1))  p95 \(percentile(p.latencies, 0.95, places: 1))  "
            + "p99 \(percentile(p.latencies, 0.99, places: 1))  errors \(p.errors)  server CPU \(Int(p.serverCPU * 1e6 / n)) µs/login  "
            + "PostgreSQL CPU \(Int(p.databaseCPU * 1e6 / n)) µs/login  WAL \(Int(p.walBytes / all)) B/login (FPI \(formatDecimal(p.walFPI / all, places: 2)))  "
            + "commits \(formatDecimal(p.commits / all, places: 2))/login  RSS \(p.peakRSSKiB / 1024) MB"
    }

    static func megabytes(_ bytes: Int64) -> String { "\(formatDecimal(Double(bytes) / 1_048_576, places: 1)) MB" }

    /// Creates, migrates and seeds `name` unless `reuse` and it already holds `accounts` seeded accounts.
    static func prepare(url: String, name: String, accounts: Int, reuse: Bool, stats: ClusterStats, server: String) -> Bool {
        if reuse, let n = try? PostgresConnection(url: url).query("SELECT count(*)::bigint AS n FROM users WHERE username LIKE 'seed-%'").first?.int64("n"),
           n == accounts {
            // What earlier runs' logins wrote goes, so a reused database is measured as seeded and
            // the "empty" one stays empty; kept, it grew 60 → 275 MB over a day of runs and its
            // full-page images per login rose from 0.07 to 0.9, flattering the ratio.
            if SeededAccounts.reset(databaseURL: url) {
                print("reusing \(name) (\(accounts) seeded accounts; earlier runs' sessions, challenges and audit lines removed)")
                return true
            }
            print("cannot reset \(name): seeding it again")
        }
        do {
            try stats.recreate(name)
        } catch {
            printError("cannot create \(name): \(error)"); return false
        }
        // The server binary migrates its database, so an older binary gets its own schema.
        guard let migrating = BenchServer.start(databaseURL: url, callgrind: false, binary: server) else { return false }
        migrating.stop()
        return SeededAccounts(count: accounts).seed(databaseURL: url)
    }

    /// One phase: a server started on `url`, a one-second warm-up, the measured load, the server stopped.
    /// With `checkpoint`, a CHECKPOINT first, so every page the phase dirties is imaged once in the WAL.
    static func measure(url: String, database: String, accounts: Int, concurrency: Int, seconds: Double, stats: ClusterStats,
                        callgrind: Bool, checkpoint: Bool, server binary: String) -> Phase? {
        let seeded = SeededAccounts(count: accounts)
        if checkpoint { _ = try? stats.connection.executeScript("CHECKPOINT") }
        guard let before = try? stats.snapshot(database) else { printError("cannot read pg_stat_wal / pg_stat_database"); return nil }
        guard let server = BenchServer.start(databaseURL: url, callgrind: callgrind, binary: binary) else { return nil }
        defer { server.stop() }
        var phase = Phase()
        let target = (host: "127.0.0.1", port: server.port, origin: server.origin)
        let warm = LoginLoad.run(target: target, accounts: seeded, concurrency: concurrency, seconds: callgrind ? 2 : 1)
        guard warm.ok > 0 else { printError("no login succeeded against the bench's server (log: \(server.logPath))"); return nil }
        var idlePerSecond = 0.0
        if callgrind {
            // What the server runs with no request (pollers, the purge, metrics), subtracted below
            // so that a slower run (fewer logins under the same background) is not charged more.
            server.callgrind("-i", "on")
            usleep(5_000_000)
            server.callgrind("-d")
            idlePerSecond = server.callgrindTotal(keepDirectory: true) / 5
        }
        let cpu0 = server.cpuSeconds(), db0 = stats.backendCPU(database)
        let load = LoginLoad.run(target: target, accounts: seeded, concurrency: concurrency, seconds: seconds)
        let cpu1 = server.cpuSeconds(), db1 = stats.backendCPU(database)
        if callgrind { server.callgrind("-i", "off"); server.callgrind("-d") }
        phase.logins = load.ok
        phase.errors = load.errors + warm.errors
        phase.rate = Double(load.ok) / seconds
        phase.latencies = load.latencies
        phase.serverCPU = cpu1 - cpu0
        phase.databaseCPU = db1.reduce(0) { $0 + $1.value - (db0[$1.key] ?? 0) }
        phase.allLogins = warm.ok + load.ok
        phase.peakRSSKiB = server.peakRSSKiB()
        server.stop()
        usleep(500_000)  // the backends' exit flushes their statistics
        guard let after = try? stats.snapshot(database) else { return nil }
        phase.walBytes = Double(after.walBytes - before.walBytes)
        phase.walFPI = Double(after.walFPI - before.walFPI)
        phase.commits = Double(after.commits - before.commits)
        if callgrind { phase.instructions = max(0, server.callgrindTotal() - idlePerSecond * seconds) }
        return phase
    }
}

/// Complete logins (options + verify) from `concurrency` keep-alive connections, each picking a
/// random seeded account.
enum LoginLoad {
    struct Result { var ok = 0, errors = 0; var latencies: [Double] = [] }

    static func run(target: (host: String, port: Int, origin: String), accounts: SeededAccounts, concurrency: Int, seconds: Double) -> Result {
        let results = Mutex(Result())
        let deadline = monotonicNow() + seconds
        // A fresh seed every run: seeded from the thread number and the pid alone, every phase of one
        // bench replayed the same accounts, so later rounds found their pages cached and already
        // imaged in the WAL since the checkpoint.
        let runSeed = UInt64.random(in: .min ... .max)
        let threads = (0..<concurrency).map { t in
            spawnThread {
                let c = HTTPClient(host: target.host, port: target.port)
                var mine = Result()
                var rng = SplitMix64(seed: UInt64(t) &* 0x9E37_79B9 &+ runSeed)
                while monotonicNow() < deadline {
                    let authenticator = accounts.authenticator(Int(rng.next() % UInt64(accounts.count)))
                    let start = monotonicNow()
                    guard let options = c.postJSON("/v1/passkeys/authentication/options", Array("{}".utf8)), options.status == 200,
                          let json = try? JSONParser.parse(options.body),
                          let challenge = json["challenge"]?.stringValue.flatMap(Base64URL.decode), let rpId = json["rpId"]?.stringValue else {
                        mine.errors += 1; continue
                    }
                    let body = authenticator.assertion(challenge: challenge, rpId: rpId, origin: target.origin).bytes()
                    guard let verify = c.postJSON("/v1/passkeys/authentication/verify", body), verify.status == 200 else { mine.errors += 1; continue }
                    mine.ok += 1
                    mine.latencies.append(monotonicNow() - start)
                }
                c.close()
                results.withLock { $0.ok += mine.ok; $0.errors += mine.errors; $0.latencies += mine.latencies }
            }
        }
        for t in threads { t.join() }
        var r = results.withLock { $0 }
        r.latencies.sort()
        return r
    }
}
