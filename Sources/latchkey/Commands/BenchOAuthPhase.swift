import EventLoop
import HTTP
import JSON
import LatchkeyServer
import PostgreSQL
import Synchronization
import Tokens
#if canImport(Glibc)
import Glibc
#endif

/// One phase of `bench oauth`: a server of its own, a 1 s warm-up, the timed load at the run's
/// concurrency, then `--count` flows one request at a time, each step counted on the relay and in
/// the WAL; the server stopped (its backends flush `pg_stat_database` as they exit).
enum FlowPhase {
    static func label(_ kind: BenchFlow.Kind) -> String {
        switch kind {
        case .oauth: "oauth"
        case .login: "login"
        case .fapi2: "fapi2"
        }
    }

    /// One step's database work, one request at a time.
    struct Sample {
        /// From sending the request until the relay settled after the answer.
        var wire: PostgresWireCounter.Counts
        /// The part of `wire` after the answer came (work the request set off: an outbox wake-up).
        var afterAnswer: PostgresWireCounter.Counts
        var walBytes: Int64
    }

    struct Result {
        var kind: BenchFlow.Kind
        var flows = 0, errors = 0, seconds = 0.0
        var rate: Double { flows > 0 ? Double(flows) / seconds : 0 }
        var stepLatencies: [[Double]]
        var flowLatencies: [Double] = []
        /// The relay's counts over the timed load, and the flows it completed.
        var loadWire = PostgresWireCounter.Counts()
        var samples: [[Sample]]
        /// pg_stat_database.xact_commit from before the server started to after it stopped, and every
        /// flow it ran (warm-up, load, counted).
        var commits = 0.0, allFlows = 0
        var calls: Int64? = nil
        var serverCPU = 0.0
        var firstFailure: String? = nil

        init(kind: BenchFlow.Kind) {
            self.kind = kind
            let n = BenchFlow.steps(kind).count
            stepLatencies = Array(repeating: [], count: n)
            samples = Array(repeating: [], count: n)
        }

        /// Rounds pooled: counts and latencies added up, the rate over all the time measured.
        static func merged(_ rounds: [Result]) -> Result {
            var m = Result(kind: rounds.first?.kind ?? .login)
            for r in rounds {
                m.flows += r.flows; m.errors += r.errors; m.seconds += r.seconds
                for i in m.stepLatencies.indices { m.stepLatencies[i] += r.stepLatencies[i]; m.samples[i] += r.samples[i] }
                m.flowLatencies += r.flowLatencies
                m.loadWire = m.loadWire + r.loadWire
                m.commits += r.commits; m.allFlows += r.allFlows; m.serverCPU += r.serverCPU
                if let c = r.calls { m.calls = (m.calls ?? 0) + c }
                m.firstFailure = m.firstFailure ?? r.firstFailure
            }
            for i in m.stepLatencies.indices { m.stepLatencies[i].sort() }
            m.flowLatencies.sort()
            return m
        }
    }

    static func measure(_ kind: BenchFlow.Kind, options o: OAuthBenchmark.Options, binary: String, relayedURL: String, relay: PostgresWireCounter,
                        stats: ClusterStats, statements: StatementStatistics, accounts: [BenchAccount],
                        client: (id: String, secret: String), fapi2: (id: String, signer: DPoPKey)? = nil) -> Result? {
        var result = Result(kind: kind)
        guard let before = try? stats.snapshot(OAuthBenchmark.database) else { printError("cannot read pg_stat_database"); return nil }
        let callsBefore = statements.calls()
        // Each flow's browser has its address (`BenchFlow`), which the server reads from X-Forwarded-For.
        guard let server = BenchServer.start(databaseURL: relayedURL, callgrind: false, binary: binary,
                                             extraEnvironment: ["LATCHKEY_TRUST_PROXY=1"]) else { return nil }
        defer { server.stop() }
        var setup = OAuthBenchSetup(host: "127.0.0.1", port: server.port, origin: server.origin, clientId: client.id, clientSecret: client.secret)
        if kind == .fapi2, let fapi2 {
            // The issuer (a client assertion's `aud`, the proofs' `htu` origin) as discovery states it.
            let http = HTTPClient(host: "127.0.0.1", port: server.port)
            let discovery = (try? http.send(method: "GET", path: "/.well-known/openid-configuration")).flatMap { try? JSONParser.parse($0.body) }
            http.close()
            setup.fapi2 = FAPI2BenchClient(id: fapi2.id, issuer: discovery?["issuer"]?.stringValue ?? server.origin, signer: fapi2.signer)
        }
        let warm = load(kind, setup: setup, accounts: accounts, concurrency: o.concurrency, seconds: 1, into: &result)
        guard warm > 0 else {
            printError("no \(label(kind)) completed against the bench's server: \(result.firstFailure ?? "?") (log: \(server.logPath))"); return nil
        }
        // The warm-up's latencies and errors are not the measurement's.
        let warmErrors = result.errors
        result = Result(kind: kind)
        let w0 = relay.snapshot(), cpu0 = server.cpuSeconds()
        let start = monotonicNow()
        result.flows = load(kind, setup: setup, accounts: accounts, concurrency: o.concurrency, seconds: o.duration, into: &result)
        result.seconds = monotonicNow() - start
        result.loadWire = relay.snapshot() - w0
        result.serverCPU = server.cpuSeconds() - cpu0
        result.errors += warmErrors
        let counted = count(kind, setup: setup, accounts: accounts, flows: o.counted, relay: relay, stats: stats, into: &result)
        server.stop()
        usleep(500_000)  // the backends' exit flushes their statistics
        guard let after = try? stats.snapshot(OAuthBenchmark.database) else { return nil }
        result.commits = Double(after.commits - before.commits)
        result.allFlows = warm + result.flows + counted
        result.calls = StatementStatistics.delta(callsBefore, statements.calls())
        if let f = result.firstFailure { printError("\(label(kind)): first failure: \(f)") }
        return result
    }

    /// Flows from `concurrency` threads, each with its own keep-alive connection and user, until
    /// `seconds` have passed; their step and flow latencies and errors go into `result`.
    static func load(_ kind: BenchFlow.Kind, setup: OAuthBenchSetup, accounts: [BenchAccount], concurrency: Int, seconds: Double,
                     into result: inout Result) -> Int {
        let shared = Mutex((ok: 0, errors: 0, steps: Array(repeating: [Double](), count: BenchFlow.steps(kind).count),
                            flows: [Double](), failure: String?.none))
        let deadline = monotonicNow() + seconds
        let threads = (0..<concurrency).map { t in
            spawnThread {
                var http = HTTPClient(host: setup.host, port: setup.port)
                var steps = Array(repeating: [Double](), count: BenchFlow.steps(kind).count), flows: [Double] = []
                var ok = 0, errors = 0, failure: String? = nil
                var i = t
                while monotonicNow() < deadline {
                    var flow = BenchFlow(kind, setup: setup, account: accounts[i % accounts.count])
                    i += concurrency
                    let begin = monotonicNow()
                    do {
                        while !flow.done {
                            let t0 = monotonicNow()
                            try flow.step(http)
                            steps[flow.index - 1].append(monotonicNow() - t0)
                        }
                        ok += 1
                        flows.append(monotonicNow() - begin)
                    } catch {
                        errors += 1
                        failure = failure ?? String(describing: error)
                        http.close()
                        http = HTTPClient(host: setup.host, port: setup.port)
                    }
                }
                http.close()
                shared.withLock {
                    $0.ok += ok; $0.errors += errors; $0.flows += flows; $0.failure = $0.failure ?? failure
                    for s in steps.indices { $0.steps[s] += steps[s] }
                }
            }
        }
        for t in threads { t.join() }
        let done = shared.withLock { $0 }
        result.errors += done.errors
        result.flowLatencies += done.flows
        for s in done.steps.indices { result.stepLatencies[s] += done.steps[s] }
        result.firstFailure = result.firstFailure ?? done.failure
        return done.ok
    }

    /// `flows` flows in sequence on one connection. Around each step the relay is let settle (work a
    /// request sets off after answering belongs to it) and the relay's counts and the WAL insert
    /// position read; the server's background work (pollers) lands in a step now and then, which the
    /// report's medians leave out.
    static func count(_ kind: BenchFlow.Kind, setup: OAuthBenchSetup, accounts: [BenchAccount], flows: Int, relay: PostgresWireCounter,
                      stats: ClusterStats, into result: inout Result) -> Int {
        func lsn() -> Int64 {
            (try? stats.connection.query("SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint AS b").first?.int64("b")) ?? 0
        }
        let http = HTTPClient(host: setup.host, port: setup.port)
        defer { http.close() }
        var done = 0
        for f in 0..<flows {
            var flow = BenchFlow(kind, setup: setup, account: accounts[f % accounts.count])
            relay.settle()
            do {
                while !flow.done {
                    let c0 = relay.snapshot(), l0 = lsn()
                    try flow.step(http)
                    let answered = relay.snapshot()
                    relay.settle()
                    let c1 = relay.snapshot(), l1 = lsn()
                    result.samples[flow.index - 1].append(Sample(wire: c1 - c0, afterAnswer: c1 - answered, walBytes: l1 - l0))
                }
                done += 1
            } catch {
                result.errors += 1
                result.firstFailure = result.firstFailure ?? String(describing: error)
            }
        }
        return done
    }
}
