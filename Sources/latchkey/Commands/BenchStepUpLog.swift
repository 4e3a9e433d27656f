import EventLoop
import HTTP
import JSON
import LatchkeyServer
import PostgreSQL
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `latchkey bench step-up --log-compare --database-url D`: device-key step-up approvals with the
/// transparency log's integrating writer off beside on, in the same run. One database is served in
/// alternating rounds (off, on, off, on, …) by a server this bench starts per phase, the same build
/// and settings but `LATCHKEY_LOG_INTERVAL` (0: this instance never integrates, though receipts are
/// still written with their document and commitment; > 0: it is the writer). So the figure is what
/// integrating costs the approvals, with the machine's noise spread over both phases. In the on
/// phases, sampled receipts are polled until `GET /v1/receipts/{id}` shows their tlog-proof: the
/// integration lag a relying party sees.
enum StepUpLogComparison {
    struct Options {
        var databaseURL: String
        var concurrency = 8
        var duration = 10.0
        var rounds = 3
        /// `LATCHKEY_LOG_INTERVAL` of the on phases.
        var interval = 1.0
        var server: String? = nil
    }

    /// Mean seconds between the moments a receipt is sampled (random, exponentially spaced, so the
    /// samples fall anywhere in the writer's cycle), at most this many in flight, each polled this often.
    static let sampleSpacing = 0.2
    static let maxInFlight = 64
    static let pollInterval = 0.05
    /// An unmeasured load before each phase's (connections opened, caches warm).
    static let warmUp = 1.0
    /// How long after its phase's load an on-phase sample may still wait for the log.
    static func drainLimit(_ o: Options) -> Double { max(30, 10 * o.interval) }

    static func parse(_ args: ParsedArguments) throws(UsageError) -> Options {
        guard let url = args.value("database-url") ?? Configuration.processEnvironment()["DATABASE_URL"], !url.isEmpty else {
            throw UsageError(message: "bench step-up --log-compare needs --database-url (or DATABASE_URL): a database on the cluster "
                             + "to create latchkey_bench_stepup in")
        }
        if args.value("url") != nil { throw UsageError(message: "--log-compare starts its own servers: give --database-url, not --url") }
        var o = Options(databaseURL: url)
        if let c = args.value("concurrency") {
            guard let n = Int(c), (1...256).contains(n) else { throw UsageError(message: "--concurrency 1…256") }
            o.concurrency = n
        }
        if let r = args.value("rounds") {
            guard let n = Int(r), (1...20).contains(n) else { throw UsageError(message: "--rounds 1…20") }
            o.rounds = n
        }
        if let d = args.value("duration") {
            guard let v = Double(d), v > 0, v <= 3600 else { throw UsageError(message: "--duration seconds (0…3600)") }
            o.duration = v
        }
        if let i = args.value("log-interval") {
            // LATCHKEY_LOG_INTERVAL's own range, less its 0 (the off phases are that).
            guard let v = Double(i), v >= 0.05, v <= 3600 else { throw UsageError(message: "--log-interval seconds (0.05…3600)") }
            o.interval = v
        }
        o.server = args.value("server")
        return o
    }

    static let database = "latchkey_bench_stepup"

    enum Phase: String {
        case off, on
        /// The name, padded so that both phases' lines line up.
        var label: String { self == .on ? "on " : "off" }
    }

    struct Measured {
        let phase: Phase
        let round: Int
        let load: StepUpBenchmark.LoadResult
        let lag: ReceiptTap.Report
        /// Receipts waiting for the log when the phase's server was ready (on: integrated before the load).
        let waiting: Int
        /// Checkpoints signed, and leaves they appended, during the load.
        let integrations: Int
        let leaves: Int
    }

    static func run(_ o: Options) -> Int32 {
        let url = BenchDatabaseURL.database(database, of: o.databaseURL)
        let binary = o.server ?? executablePath()
        let interval = formatDecimal(o.interval, places: 2)
        print("latchkey bench step-up --log-compare: server \(binary), database \(database), concurrency \(o.concurrency), "
              + "\(o.duration) s per phase after a \(warmUp) s warm-up, \(o.rounds) round\(o.rounds == 1 ? "" : "s") of log off then log on "
              + "(off: LATCHKEY_LOG_INTERVAL=0, on: LATCHKEY_LOG_INTERVAL=\(interval); one KEK for both)")
        print("integration lag: the receipt answered next after random moments of the load (every \(Int(sampleSpacing * 1000)) ms on average) "
              + "is polled with GET /v1/receipts/{id} every \(Int(pollInterval * 1000)) ms until its log is not null; a lag is late by up to one poll. "
              + "The off phases sample and poll alike, each receipt for half the interval (the least an on-phase receipt waits on average), "
              + "so the polling costs the on phases at least as much")
        let stats: ClusterStats
        do {
            stats = try ClusterStats(url: BenchDatabaseURL.database("postgres", of: o.databaseURL))
            try stats.recreate(database)
        } catch {
            printError("cannot create \(database) on the cluster of --database-url: \(error)"); return ExitCode.failure
        }
        defer { stats.drop(database) }

        var measured: [Measured] = []
        for round in 1...o.rounds {
            for phase in [Phase.off, .on] {
                guard let m = measure(phase, round: round, options: o, binary: binary, databaseURL: url) else { return ExitCode.failure }
                measured.append(m)
                var line = "round \(round) log \(phase.label)  approvals \(m.load.ok) in \(formatDecimal(m.load.elapsed, places: 1)) s = "
                    + "\(m.load.rate.formatted)/s  verify p50 \(percentile(m.load.verify, 0.50, places: 1))  p99 \(percentile(m.load.verify, 0.99, places: 1))  "
                    + "errors \(m.load.errors)"
                if phase == .on {
                    line += "  (\(m.waiting) receipts left by the phase before, integrated before the load; during it \(m.integrations) checkpoints, "
                        + "\(m.integrations == 0 ? 0 : m.leaves / m.integrations) leaves each on average)"
                }
                print(line)
                fflush(nil)
            }
        }
        return report(measured, options: o) ? ExitCode.success : ExitCode.failure
    }

    /// One phase: its server started on the bench's database, phones enrolled on it, the queue
    /// integrated first (on), a warm-up, then the measured load with the lag sampler beside it.
    static func measure(_ phase: Phase, round: Int, options o: Options, binary: String, databaseURL url: String) -> Measured? {
        let interval = phase == .on ? o.interval : 0
        let db: PostgresConnection
        do { db = try PostgresConnection(url: url) } catch { printError("cannot connect to \(database): \(error)"); return nil }
        func waiting() -> Int {
            guard let row = try? db.query("SELECT count(*)::bigint AS n FROM step_up_receipts WHERE commitment IS NOT NULL AND log_index IS NULL")
                .first else { return 0 }
            return Int((try? row.int64("n")) ?? 0)
        }
        func checkpoints() -> (count: Int, size: Int) {
            guard let row = try? db.query("SELECT count(*)::bigint AS n, coalesce(max(size), 0)::bigint AS s FROM transparency_log_checkpoints").first
            else { return (0, 0) }
            return (Int((try? row.int64("n")) ?? 0), Int((try? row.int64("s")) ?? 0))
        }
        // Counted before the server starts: a writer integrates what waits as soon as it is up.
        let queued = waiting()
        guard let server = BenchServer.start(databaseURL: url, callgrind: false, binary: binary,
                                             extraEnvironment: ["LATCHKEY_LOG_INTERVAL=\(interval)"]) else { return nil }
        defer { server.stop() }
        let phones: [StepUpBenchmark.Phone]
        switch StepUpBenchmark.enrolPhones(host: "127.0.0.1", port: server.port, origin: server.origin, count: o.concurrency) {
        case .success(let p): phones = p
        case .failure(let e): printError("setup failed: \(e.message) (server log: \(server.logPath))"); return nil
        }
        if phase == .on {
            // What the off phases and the enrolments left waiting is integrated first: the on phase
            // measures the writer keeping up with its own load, not catching up.
            let deadline = monotonicNow() + drainLimit(o)
            while waiting() > 0 {
                guard monotonicNow() < deadline else {
                    printError("the log did not integrate the \(queued) waiting receipts in \(Int(drainLimit(o))) s (server log: \(server.logPath))")
                    return nil
                }
                usleep(50_000)
            }
        }
        _ = StepUpBenchmark.load(host: "127.0.0.1", port: server.port, phones: phones, duration: warmUp)
        let before = checkpoints()
        let tap = ReceiptTap(host: "127.0.0.1", port: server.port, spacing: sampleSpacing, maxInFlight: maxInFlight, pollInterval: pollInterval,
                             giveUpAfter: phase == .off ? o.interval / 2 : nil, drainLimit: phase == .on ? drainLimit(o) : 0)
        let poller = tap.start()
        let load = StepUpBenchmark.load(host: "127.0.0.1", port: server.port, phones: phones, duration: o.duration, tap: tap)
        let after = checkpoints()
        let lag = tap.finish(poller)
        return Measured(phase: phase, round: round, load: load, lag: lag, waiting: queued,
                        integrations: after.count - before.count, leaves: after.size - before.size)
    }

    /// The totals, the ratio and the lag; false when a phase failed (no approvals, or mostly errors).
    static func report(_ measured: [Measured], options o: Options) -> Bool {
        func total(_ phase: Phase) -> (ok: Int, errors: Int, seconds: Double, rates: [Double]) {
            let ms = measured.filter { $0.phase == phase }
            return (ms.reduce(0) { $0 + $1.load.ok }, ms.reduce(0) { $0 + $1.load.errors }, ms.reduce(0) { $0 + $1.load.elapsed }, ms.map(\.load.rate))
        }
        let off = total(.off), on = total(.on)
        let offRate = off.seconds > 0 ? Double(off.ok) / off.seconds : 0
        let onRate = on.seconds > 0 ? Double(on.ok) / on.seconds : 0
        for (phase, t, rate) in [(Phase.off, off, offRate), (.on, on, onRate)] {
            print("log \(phase.label): \(t.ok) approvals in \(formatDecimal(t.seconds, places: 1)) s = \(rate.formatted)/s  "
                  + "(rounds \(t.rates.map(\.formatted).joined(separator: ", ")))  errors \(t.errors)")
        }
        // Each round's phases ran back to back, so their ratio shares the machine's state; the median
        // of those ratios is what one noisy phase does not move.
        let perRound = zip(off.rates, on.rates).map { $1 / max($0, 1e-9) }
        let median = FlowReport.median(perRound)
        print("ratio on/off = \(offRate > 0 ? formatDecimal(onRate / offRate, places: 3) : "-") over all rounds, "
              + "\(formatDecimal(median, places: 3)) the median of the rounds' (target ≥ 0.9; per round "
              + "\(perRound.map { formatDecimal($0, places: 3) }.joined(separator: ", ")))")
        let lags = measured.filter { $0.phase == .on }.flatMap(\.lag.lags).sorted()
        let unresolved = measured.filter { $0.phase == .on }.reduce(0) { $0 + $1.lag.unresolved }
        let pollErrors = measured.reduce(0) { $0 + $1.lag.pollErrors }
        let bound = 2 * o.interval
        print("integration lag (verify answered → GET /v1/receipts/{id} shows its log): \(lags.count) receipts sampled in the on phases, "
              + "p50 \(percentile(lags, 0.50, places: 0))  p99 \(percentile(lags, 0.99, places: 0))  max \(percentile(lags, 1.0, places: 0)); "
              + "2 × LATCHKEY_LOG_INTERVAL = \(Int(bound * 1000)) ms (target p99 ≤ \(Int(bound * 1000)) ms)")
        print("not integrated within \(Int(drainLimit(o))) s of their phase's end: \(unresolved); receipt polls that failed: \(pollErrors)")
        let failed = [off, on].contains { $0.ok == 0 || $0.errors > $0.ok }
        if failed { printError("a phase had no approvals or mostly errors: the servers' logs are /tmp/latchkey-bench-server-*/serve-*.log") }
        return !failed && unresolved == 0
    }
}

/// Receipts answered under load, polled until the log holds them. At random moments (exponentially
/// spaced, `spacing` s apart on average: independent of the writer's cycle, so the lags are a fair
/// sample of it) the next receipt a load thread is answered is taken, at most `maxInFlight` at a
/// time, and polled with `GET /v1/receipts/{id}` every `pollInterval` s until its `log` is no longer
/// null (its lag recorded) or, with `giveUpAfter`, that long after the answer (the phases without a
/// writer: the same sampling and polling, nothing to wait for). After the load, what is still
/// pending is polled for up to `drainLimit` s more.
final class ReceiptTap: Sendable {
    struct Sample: Sendable {
        let id: String
        let bearer: String
        /// `monotonicNow()` when the verify's answer arrived.
        let answeredAt: Double
    }

    struct Report: Sendable {
        /// Seconds from each sample's answer to the poll that saw its proof, in the order seen.
        var lags: [Double] = []
        /// Samples still without a proof when the poller stopped.
        var unresolved = 0
        var polls = 0
        var pollErrors = 0
    }

    let host: String
    let port: Int
    let spacing: Double
    let maxInFlight: Int
    let pollInterval: Double
    let giveUpAfter: Double?
    let drainLimit: Double
    private let wanted: Atomic<Int>
    private let arrived = Mutex<[Sample]>([])
    private let loadOver = Atomic<Bool>(false)
    private let result = Mutex(Report())

    init(host: String, port: Int, spacing: Double, maxInFlight: Int, pollInterval: Double, giveUpAfter: Double?, drainLimit: Double) {
        self.host = host
        self.port = port
        self.spacing = spacing
        self.maxInFlight = maxInFlight
        self.pollInterval = pollInterval
        self.giveUpAfter = giveUpAfter
        self.drainLimit = drainLimit
        wanted = Atomic(0)
    }

    /// A load thread's turn to hand over the receipt it was just answered: true when a sample is due,
    /// which `hand` fills (or `release` leaves to the next answer).
    func claim() -> Bool {
        var current = wanted.load(ordering: .relaxed)
        while current > 0 {
            let (exchanged, original) = wanted.compareExchange(expected: current, desired: current - 1, ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
        return false
    }

    func release() { wanted.add(1, ordering: .relaxed) }

    func hand(_ sample: Sample) { arrived.withLock { $0.append(sample) } }

    func start() -> StartedThread {
        spawnThread { [self] in poll() }
    }

    /// Ends sampling (the load is over), waits for the poller, and returns what it saw.
    func finish(_ thread: StartedThread) -> Report {
        loadOver.store(true, ordering: .releasing)
        thread.join()
        return result.withLock { $0 }
    }

    private func poll() {
        var client = HTTPClient(host: host, port: port, timeoutSeconds: 5)
        var report = Report()
        var pending: [Sample] = []
        var stopAt: Double? = nil
        var nextSample = monotonicNow()
        while true {
            let tick = monotonicNow()
            pending += arrived.withLock { taken in defer { taken.removeAll() }; return taken }
            if loadOver.load(ordering: .acquiring) {
                if stopAt == nil { stopAt = tick + drainLimit }
                if pending.isEmpty || tick >= stopAt! { break }
            } else {
                while nextSample <= tick {
                    if pending.count + wanted.load(ordering: .relaxed) < maxInFlight { wanted.add(1, ordering: .relaxed) }
                    nextSample += -log(Double.random(in: Double.leastNonzeroMagnitude..<1)) * spacing
                }
            }
            var still: [Sample] = []
            for sample in pending {
                let answer = try? client.send(method: "GET", path: "/v1/receipts/\(sample.id)", headers: [("Authorization", sample.bearer)])
                let now = monotonicNow()
                report.polls += 1
                guard let answer, answer.status == 200, let json = try? JSONParser.parse(answer.body), let log = json["log"] else {
                    report.pollErrors += 1
                    if answer == nil { client.close(); client = HTTPClient(host: host, port: port, timeoutSeconds: 5) }
                    still.append(sample)
                    continue
                }
                if !log.isNull {
                    report.lags.append(now - sample.answeredAt)
                } else if let limit = giveUpAfter, now - sample.answeredAt >= limit {
                    continue
                } else {
                    still.append(sample)
                }
            }
            pending = still
            let rest = tick + pollInterval - monotonicNow()
            if rest > 0 { usleep(useconds_t(rest * 1e6)) }
        }
        client.close()
        report.unresolved = giveUpAfter == nil ? pending.count : 0
        result.withLock { $0 = report }
    }
}
