/// What `bench oauth` prints: the two phases side by side, per step and per flow, and every figure
/// of the flow as a ratio to the login's (the baseline of the same run). One figure a line, each
/// line starting with a fixed word, so Tests/CLI/bench-oauth.py and people can find it.
enum FlowReport {
    typealias Result = FlowPhase.Result

    static func print(login: Result, oauth: Result, counted: Int, statementsNote available: Bool) {
        for r in [login, oauth] {
            let what = r.kind == .oauth ? "flows" : "logins"
            Swift.print("\(FlowPhase.label(r.kind)) \(r.kind == .login ? "(baseline)" : "          ") \(what) \(r.flows) in \(formatDecimal(r.seconds, places: 1)) s "
                        + "= \(r.rate.formatted)/s  p50 \(percentile(r.flowLatencies, 0.50, places: 2))  p99 \(percentile(r.flowLatencies, 0.99, places: 2))  "
                        + "errors \(r.errors)  server CPU \(Int(r.serverCPU * 1e6 / Double(max(r.flows, 1)))) µs/\(what.dropLast())")
        }
        Swift.print("latency per step under load (p50 / p99):")
        for r in [login, oauth] {
            for (i, name) in BenchFlow.steps(r.kind).enumerated() {
                Swift.print("step \(FlowPhase.label(r.kind)) \(name.padding(10)) p50 \(percentile(r.stepLatencies[i], 0.50, places: 2))  "
                            + "p99 \(percentile(r.stepLatencies[i], 0.99, places: 2))")
            }
        }
        let samples = min(login.samples.map(\.count).min() ?? 0, oauth.samples.map(\.count).min() ?? 0)
        Swift.print("database work per request, one request at a time (median, mean in brackets; \(samples)+ samples a step; "
                    + "commits = transactions ended, read-only ones included; WAL = bytes the cluster's WAL grew by):")
        for r in [login, oauth] {
            for (i, name) in BenchFlow.steps(r.kind).enumerated() {
                let s = r.samples[i]
                Swift.print("db \(FlowPhase.label(r.kind)) \(name.padding(10)) round trips \(stat(s) { $0.wire.roundTrips })  "
                            + "of which after the answer \(stat(s) { $0.afterAnswer.roundTrips })  "
                            + "statements \(stat(s) { $0.wire.statements })  commits \(stat(s) { $0.wire.commits })  "
                            + "WAL \(Int(median(s.map { Double($0.walBytes) }))) B  by tag \(tags(s))")
            }
        }
        let l = Totals(login), o = Totals(oauth)
        for (what, t) in [("login", l), ("flow ", o)] {
            Swift.print("per \(what) (sum of the step medians, of the means in brackets): round trips \(num(t.median.roundTrips)) (\(formatDecimal(t.mean.roundTrips, places: 2)))  "
                        + "statements \(num(t.median.statements)) (\(formatDecimal(t.mean.statements, places: 2)))  "
                        + "commits \(num(t.median.commits)) (\(formatDecimal(t.mean.commits, places: 2)))  WAL \(Int(t.median.wal)) B")
        }
        for r in [login, oauth] {
            let n = Double(max(r.flows, 1)), w = r.loadWire
            Swift.print("under load \(FlowPhase.label(r.kind)) (the relay's counts over the timed load / completed, background included): "
                        + "round trips \(formatDecimal(Double(w.roundTrips) / n, places: 2))  statements \(formatDecimal(Double(w.statements) / n, places: 2))  "
                        + "commits \(formatDecimal(Double(w.commits) / n, places: 2))  connections opened \(w.connections)")
        }
        let xl = login.commits / Double(max(login.allFlows, 1)), xo = oauth.commits / Double(max(oauth.allFlows, 1))
        Swift.print("xact_commit per login \(formatDecimal(xl, places: 2)), per flow \(formatDecimal(xo, places: 2)) "
                    + "(pg_stat_database, server start to stop over \(login.allFlows) / \(oauth.allFlows) with warm-up and counted)")
        if available, let cl = login.calls, let co = oauth.calls {
            Swift.print("pg_stat_statements calls per login \(formatDecimal(Double(cl) / Double(max(login.allFlows, 1)), places: 2)), "
                        + "per flow \(formatDecimal(Double(co) / Double(max(oauth.allFlows, 1)), places: 2)) (server start to stop)")
        }
        Swift.print("ratio=\(formatDecimal(oauth.rate / max(login.rate, 1e-9), places: 3)) (flows/s / logins/s, same run)")
        let cpuL = login.serverCPU / Double(max(login.flows, 1)), cpuO = oauth.serverCPU / Double(max(oauth.flows, 1))
        Swift.print("flow / login: p50 x\(ratio(at(oauth.flowLatencies, 0.5), at(login.flowLatencies, 0.5)))  "
                    + "round trips x\(ratio(o.median.roundTrips, l.median.roundTrips))  statements x\(ratio(o.median.statements, l.median.statements))  "
                    + "commits x\(ratio(o.median.commits, l.median.commits))  xact_commit x\(ratio(xo, xl))  WAL x\(ratio(o.median.wal, l.median.wal))  "
                    + "server CPU x\(ratio(cpuO, cpuL))")
    }

    /// The per-flow sums of the steps' medians and of their means.
    struct Totals {
        struct Sums { var roundTrips = 0.0, statements = 0.0, commits = 0.0, wal = 0.0 }
        var median = Sums(), mean = Sums()
        init(_ r: Result) {
            for s in r.samples where !s.isEmpty {
                let fields: [(WritableKeyPath<Sums, Double>, (FlowPhase.Sample) -> Double)] = [
                    (\.roundTrips, { Double($0.wire.roundTrips) }), (\.statements, { Double($0.wire.statements) }),
                    (\.commits, { Double($0.wire.commits) }), (\.wal, { Double($0.walBytes) })]
                for (key, value) in fields {
                    let values = s.map(value)
                    median[keyPath: key] += FlowReport.median(values)
                    mean[keyPath: key] += values.reduce(0, +) / Double(values.count)
                }
            }
        }
    }

    /// Mean statements a request by CommandComplete tag, "SELECT 2.0, INSERT 1.0, …" (BEGIN … COMMIT order).
    static func tags(_ s: [FlowPhase.Sample]) -> String {
        guard !s.isEmpty else { return "-" }
        var sums: [String: Int] = [:]
        for sample in s { sums.merge(sample.wire.tags, uniquingKeysWith: +) }
        let order = ["BEGIN", "SELECT", "INSERT", "UPDATE", "DELETE", "COMMIT", "ROLLBACK"]
        let keys = sums.keys.sorted { (order.firstIndex(of: $0) ?? order.count, $0) < (order.firstIndex(of: $1) ?? order.count, $1) }
        // A tag in fewer than one request in twenty (a poller's) is left out.
        let shown = keys.filter { Double(sums[$0]!) / Double(s.count) >= 0.05 }.map { "\($0) \(formatDecimal(Double(sums[$0]!) / Double(s.count), places: 1))" }
        return shown.isEmpty ? "none" : shown.joined(separator: ", ")
    }

    /// "3 (3.05)": the median and, in brackets, the mean; "-" with no samples.
    static func stat(_ s: [FlowPhase.Sample], _ f: (FlowPhase.Sample) -> Int) -> String {
        guard !s.isEmpty else { return "-" }
        let values = s.map { Double(f($0)) }
        return "\(num(median(values))) (\(formatDecimal(values.reduce(0, +) / Double(values.count), places: 2)))"
    }

    /// A whole number as one ("3"), else with a decimal ("2.5": the median of an even count).
    static func num(_ x: Double) -> String { x == x.rounded() ? "\(Int(x))" : formatDecimal(x, places: 1) }

    static func median(_ values: [Double]) -> Double {
        let v = values.sorted()
        guard !v.isEmpty else { return 0 }
        return v.count % 2 == 1 ? v[v.count / 2] : (v[v.count / 2 - 1] + v[v.count / 2]) / 2
    }

    static func at(_ sorted: [Double], _ q: Double) -> Double {
        sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * q))]
    }

    static func ratio(_ a: Double, _ b: Double) -> String { b > 0 ? formatDecimal(a / b, places: 2) : "n/a" }
}
