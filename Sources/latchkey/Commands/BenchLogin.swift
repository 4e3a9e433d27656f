import Crypto
import EventLoop
import HTTP
import JSON
import LatchkeyServer
import PostgreSQL
import Storage
import Synchronization
import Tokens
import WebAuthn
import WebAuthnTesting
#if canImport(Glibc)
import Glibc
#endif

/// `latchkey bench login`: complete passkey logins (options + verify, two HTTP requests each)
/// against a running server, beside a pgbench run of exactly the SQL one login costs and the
/// pgbench rate of the cheapest durable write (the commit floor), at the same concurrency.
enum LoginBenchmark {
    struct Options {
        var target: BenchTarget
        var pid: Int32? = nil
        var databaseURL: String? = nil
        var credentials = 64
        /// `--webhook URL`: one endpoint subscribed to every passkey.* and session.* type for the run
        /// (created and deleted through the admin API with `--admin-key` / LATCHKEY_ADMIN_KEY).
        var webhook: String? = nil
        var adminKey: String? = nil
        /// `--no-dpop`: skip the DPoP-on phase (a before/after that reads one phase's CPU or instructions).
        var dpopPhase = true
        /// `--rounds N`: the login load, its pgbench baseline and the DPoP-on load, in turn, N times.
        var rounds = 1
    }

    static func parse(_ args: ParsedArguments) throws(UsageError) -> Options {
        var o = Options(target: try BenchTarget(args, defaultConcurrency: 32))
        if let p = args.value("pid") { guard let n = Int32(p) else { throw UsageError(message: "--pid takes a process id") }; o.pid = n }
        o.databaseURL = args.value("database-url") ?? Configuration.processEnvironment()["DATABASE_URL"]
        o.webhook = args.value("webhook")
        o.adminKey = args.value("admin-key") ?? Configuration.processEnvironment()["LATCHKEY_ADMIN_KEY"]
        o.dpopPhase = !args.has("no-dpop")
        if let r = args.value("rounds") {
            guard let v = Int(r), (1...20).contains(v) else { throw UsageError(message: "--rounds 1…20") }
            o.rounds = v
        }
        if o.webhook != nil, o.adminKey == nil { throw UsageError(message: "--webhook needs --admin-key (or LATCHKEY_ADMIN_KEY)") }
        return o
    }

    static func run(_ o: Options) -> Int32 {
        let target = o.target
        print("latchkey bench login: \(target.host):\(target.port), origin \(target.origin), concurrency \(target.concurrency), \(target.duration) s")
        // 1. Enrol soft authenticators (ES256, none attestation) through the real API.
        var enrolled: [BenchAccount] = []
        let client = HTTPClient(host: target.host, port: target.port)
        var webhookId: String? = nil
        // `--webhook local`: a verifying receiver in this process on a loopback port (the server must run with LATCHKEY_DEV=1).
        var localReceiver: (WebhookReceiverBox, HTTPServer)? = nil
        if let url = o.webhook, let key = o.adminKey {
            var url = url
            let box = WebhookReceiverBox()
            if url == "local" {
                guard let server = try? HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threadPoolSize: 2, maxBodyBytes: 1 << 20),
                                                   responder: box) else { printError("cannot start the local receiver"); return ExitCode.failure }
                url = "http://127.0.0.1:\(server.port)/bench"
                localReceiver = (box, server)
            }
            let types = EventType.webhookTypes.map(\.rawValue).filter { $0.hasPrefix("passkey.") || $0.hasPrefix("session.") }
            let body = JSONValue.object([("url", .string(url)), ("events", .array(types.map { .string($0) }))]).serialized()
            guard let r = client.postJSON("/admin/v1/webhooks", body, authorization: "Bearer \(key)"), r.status == 201,
                  let id = (try? JSONParser.parse(r.body))?["id"]?.stringValue else {
                printError("could not create the webhook (admin key? LATCHKEY_DEV=1 for an http:// loopback URL?)"); return ExitCode.failure
            }
            webhookId = id
            if let secret = (try? JSONParser.parse(r.body))?["secret"]?.stringValue, let k = WebhookSignature.key(fromSecret: secret) {
                box.receiver.withLock { $0 = WebhookReceiver(key: k, status: 204, printing: false) }
            }
            print("webhook \(id) → \(url) subscribed to \(types.joined(separator: ","))")
        }
        let runId = Base64URL.encode(SecureRandom.bytes(6))
        for i in 0..<o.credentials {
            switch BenchAccount.signUp(client, username: "bench-\(runId)-\(i)", displayName: "Bench \(i)", origin: target.origin) {
            case .success(let account):
                enrolled.append(account)
            case .failure(.options):
                printError("enrolment options failed; is the server running at \(target.host):\(target.port)?"); return ExitCode.failure
            case .failure(.verify(let verify)):
                // The first answer is the one that matters: the challenge is spent, so a resend would fail differently.
                let answer = verify.map { "\($0.status) \($0.text)" } ?? "no answer"
                printError("enrolment verify failed: \(answer)\nis \(target.origin) allowlisted (LATCHKEY_ORIGINS), and is LATCHKEY_RATE_LIMIT=0?")
                return ExitCode.failure
            }
        }
        client.close()
        print("enrolled \(enrolled.count) passkeys")

        // 2–4, `--rounds` times in alternation (the login load, its pgbench baseline, the load with
        //    DPoP), so the machine's drift over the run hits each phase alike; then the medians.
        let credentials = enrolled
        var offRates: [Double] = [], baselineRates: [Double] = [], onRates: [Double] = []
        var errors = 0, dpopErrors = 0
        let label = { (round: Int) in o.rounds > 1 ? "round \(round) " : "" }
        for round in 1...o.rounds {
            // 2. Logins from `concurrency` threads, each with its own keep-alive connection. CPU
            //    spent by this load generator and by the server over the load: on a machine they
            //    share with PostgreSQL, what the client burns is not there for the server (pgbench's
            //    client is measured the same way below).
            let generator0 = processCPUSeconds(getpid()), server0 = o.pid.flatMap(processCPUSeconds)
            let off = timedLoad(target: target, credentials: credentials, dpop: false)
            let generator1 = processCPUSeconds(getpid()), server1 = o.pid.flatMap(processCPUSeconds)
            errors += off.errors
            let rate = off.rate
            offRates.append(rate)
            print("\(label(round))logins \(off.ok)  \(Int(rate))/s  p50 \(off.p(0.50))  p95 \(off.p(0.95))  p99 \(off.p(0.99))  errors \(off.errors)")
            func perLogin(_ from: Double?, _ to: Double?) -> String {
                guard let from, let to, off.ok > 0 else { return "unknown" }
                return "\(Int((to - from) * 1e6 / Double(off.ok))) µs"
            }
            print("\(label(round))CPU per login: this load generator \(perLogin(generator0, generator1))"
                  + (o.pid == nil ? "" : ", server \(perLogin(server0, server1))"))
            if round == 1, let pid = o.pid { print("server peak RSS \(peakRSS(pid: pid).map { "\($0 / 1024) MB" } ?? "unknown") (VmHWM of pid \(pid))") }
            if round == 1, let id = webhookId, let key = o.adminKey {
                reportDrain(target: target, webhookId: id, adminKey: key)
                if let (box, server) = localReceiver {
                    let counts = box.receiver.withLock { $0?.counts } ?? (verified: 0, refused: 0)
                    print("local receiver: \(counts.verified) verified deliveries, \(counts.refused) refused")
                    server.stop()
                }
            }

            // 3. Baseline: pgbench running the same SQL per login, same concurrency, same database.
            if let url = o.databaseURL, !url.isEmpty {
                if let baseline = PgbenchBaseline.run(databaseURL: url, credentialIds: enrolled.map(\.authenticator.credentialId),
                                                      concurrency: target.concurrency, seconds: target.duration) {
                    baselineRates.append(baseline.tps)
                    print("\(label(round))pgbench baseline (same SQL per login) \(Int(baseline.tps))/s  ratio=\(formatDecimal(rate / baseline.tps, places: 2))  "
                          + "pgbench's client CPU \(Int(baseline.clientCPU * 1e6 / max(1, baseline.tps * target.duration))) µs/login")
                }
            } else if round == 1 {
                print("pgbench baseline skipped: give --database-url or DATABASE_URL")
            }

            // 4. The same logins with DPoP on (SPEC "Sender-constrained tokens"): each verify
            //    carries a proof by the thread's ES256 key, so the session is bound and the proof's
            //    jti rides in the login's statement. The ratio is DPoP on over off, the same server.
            guard o.dpopPhase else { continue }
            let on = timedLoad(target: target, credentials: credentials, dpop: true)
            dpopErrors += on.errors
            onRates.append(on.rate)
            print("\(label(round))DPoP on: logins \(on.ok)  \(Int(on.rate))/s  p50 \(on.p(0.50))  p99 \(on.p(0.99))  errors \(on.errors)")
        }

        // The commit floor: one-row INSERTs, each its own durable commit. A login needs one durable
        // commit, so no login rate can pass this on the same server and disk.
        let rate = FlowReport.median(offRates)
        if o.rounds > 1 {
            print("median of \(o.rounds) rounds: logins \(Int(rate))/s"
                  + (baselineRates.isEmpty ? "" : ", pgbench baseline \(Int(FlowReport.median(baselineRates)))/s")
                  + (onRates.isEmpty ? "" : ", DPoP on \(Int(FlowReport.median(onRates)))/s"))
        }
        let baselineRatio = baselineRates.isEmpty ? nil : FlowReport.median(zip(offRates, baselineRates).map { $0 / $1 })
        if let url = o.databaseURL, !url.isEmpty, let floor = CommitFloor.run(databaseURL: url, concurrency: target.concurrency, seconds: target.duration) {
            print("pgbench commit floor (one-row INSERT + COMMIT, synchronous_commit=\(floor.synchronousCommit)) \(Int(floor.tps))/s")
            // No "ratio=" here: tooling reads the first one, above.
            print("login rate / pgbench baseline \(baselineRatio.map { formatDecimal($0, places: 2) } ?? "n/a")"
                  + (o.rounds > 1 ? " (median of the rounds' ratios)" : "") + ", "
                  + "login rate / commit floor \(formatDecimal(rate / floor.tps, places: 2))")
        }
        if !onRates.isEmpty {
            let dpopRatio = FlowReport.median(zip(onRates, offRates).map { $1 > 0 ? $0 / $1 : 0 })
            print("DPoP on / off: \(rate > 0 ? formatDecimal(dpopRatio, places: 2) : "n/a") (target 0.85)"
                  + (o.rounds > 1 ? " (median of the rounds' ratios)" : ""))
        }
        return errors == 0 && dpopErrors == 0 ? ExitCode.success : ExitCode.failure
    }

    /// One timed load's outcome: its rate over the duration and its latencies sorted for percentiles.
    struct TimedLoad {
        let ok: Int, errors: Int, rate: Double
        let sorted: [Double]
        func p(_ q: Double) -> String { percentile(sorted, q, places: 1) }
    }

    /// `loginLoad` for `target.duration` from now.
    static func timedLoad(target: BenchTarget, credentials: [BenchAccount], dpop: Bool) -> TimedLoad {
        let r = loginLoad(target: target, credentials: credentials, dpop: dpop, until: monotonicNow() + target.duration)
        return TimedLoad(ok: r.ok, errors: r.errors, rate: Double(r.ok) / target.duration, sorted: r.latencies.sorted())
    }

    /// Complete logins (options, then verify) from `target.concurrency` threads, each with its own
    /// keep-alive connection, until `deadline`; with `dpop`, each verify carries a DPoP proof by the
    /// thread's own ES256 key (the answer must then be `token_type` `DPoP`).
    static func loginLoad(target: BenchTarget, credentials: [BenchAccount], dpop: Bool,
                          until deadline: Double) -> (ok: Int, errors: Int, latencies: [Double]) {
        let latencies = Mutex<[Double]>([])
        let counts = Mutex<(ok: Int, errors: Int)>((0, 0))
        let verifyURL = target.origin + "/v1/passkeys/authentication/verify"
        let threads = (0..<target.concurrency).map { t in
            spawnThread {
                let c = HTTPClient(host: target.host, port: target.port)
                let key = dpop ? DPoPKey.generate() : nil
                var mine: [Double] = []
                var ok = 0, errors = 0
                var i = t
                while monotonicNow() < deadline {
                    let e = credentials[i % credentials.count]
                    i += target.concurrency
                    let start = monotonicNow()
                    guard let options = c.postJSON("/v1/passkeys/authentication/options", Array("{}".utf8)), options.status == 200,
                          let challenge = (try? JSONParser.parse(options.body))?["challenge"]?.stringValue.flatMap(Base64URL.decode) else {
                        errors += 1; continue
                    }
                    let body = e.authenticator.assertion(challenge: challenge, rpId: e.rpId, origin: target.origin).bytes()
                    let proof = key.map { [("DPoP", $0.proof(method: "POST", url: verifyURL, iat: Int64(time(nil))))] } ?? []
                    guard let verify = c.postJSON("/v1/passkeys/authentication/verify", body, headers: proof), verify.status == 200 else {
                        errors += 1; continue
                    }
                    if dpop, !verify.text.contains(#""token_type":"DPoP""#) { errors += 1; continue }
                    ok += 1
                    mine.append(monotonicNow() - start)
                }
                c.close()
                latencies.withLock { $0 += mine }
                counts.withLock { $0.ok += ok; $0.errors += errors }
            }
        }
        for t in threads { t.join() }
        let (ok, errors) = counts.withLock { $0 }
        return (ok, errors, latencies.withLock { $0 })
    }

    /// After the load: how long until the outbox's webhook depth (from /metrics) is 0, and what the
    /// endpoint's deliveries came to; then the endpoint is deleted.
    static func reportDrain(target: BenchTarget, webhookId: String, adminKey: String) {
        let c = HTTPClient(host: target.host, port: target.port)
        defer { c.close() }
        func depth() -> Int? {
            guard let r = try? c.send(method: "GET", path: "/metrics", headers: [], body: []) else { return nil }
            for line in r.text.split(separator: "\n") where line.hasPrefix("latchkey_outbox_depth{channel=\"webhook\"}") {
                return Int(line.split(separator: " ").last ?? "")
            }
            return nil
        }
        let start = monotonicNow()
        let atEnd = depth() ?? -1
        var now = atEnd
        while now != 0, monotonicNow() - start < 120 {
            usleep(100_000)
            now = depth() ?? -1
        }
        let auth = [("Authorization", "Bearer \(adminKey)")]
        let listed = (try? c.send(method: "GET", path: "/admin/v1/webhooks/\(webhookId)/deliveries?limit=1000", headers: auth, body: []))
            .flatMap { try? JSONParser.parse($0.body) }?["deliveries"]?.arrayValue ?? []
        let delivered = listed.filter { $0["status"] == "delivered" }.count
        print("outbox: \(atEnd) pending when the load stopped, \(now == 0 ? "drained" : "NOT drained (\(now) pending)") after "
              + "\(formatDecimal(monotonicNow() - start, places: 1)) s; endpoint deliveries \(delivered) delivered of \(listed.count)")
        _ = try? c.send(method: "DELETE", path: "/admin/v1/webhooks/\(webhookId)", headers: auth, body: [])
    }

    /// Peak resident set size in KiB (VmHWM), Linux only.
    static func peakRSS(pid: Int32) -> Int? {
        guard let bytes = readFile("/proc/\(pid)/status") else { return nil }
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") where line.hasPrefix("VmHWM:") {
            return Int(line.split(separator: " ").dropFirst().first ?? "")
        }
        return nil
    }
}

/// Runs a program, returns its standard output and error together.
func runProcess(_ argv: [String]) -> String? {
    guard let child = spawn(argv, capture: .standardOutputAndError) else { return nil }
    return String(decoding: child.finish() ?? [], as: UTF8.self)
}

/// The local receiver, keyed once the endpoint's secret is known (it is created after the server starts).
final class WebhookReceiverBox: Responder, Sendable {
    let receiver = Mutex<WebhookReceiver?>(nil)
    func respond(to request: Request) -> Response {
        guard let r = receiver.withLock({ $0 }) else { return .empty(status: 503) }
        return r.respond(to: request)
    }
}
