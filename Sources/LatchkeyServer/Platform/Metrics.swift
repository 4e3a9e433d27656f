import Crypto
import Storage
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Prometheus text-format metrics (exposition format 0.0.4): requests by route and status with a
/// latency histogram, ceremony outcomes by code, and connection-pool usage.
///
/// Every label value comes from a closed set, never from raw input, so no request can add series
/// (memory, /metrics size) or text of its own to the exposition: `route` is a router pattern or
/// "unmatched"/"preflight", `method` one of `knownMethods` or "other", `status` a status the server
/// set, `outcome` "ok" or one of SPEC's codes.
public final class Metrics: Sendable {
    /// RFC 9110 §9.3 methods (and PATCH, RFC 5789); any other method is counted as "other".
    static let knownMethods: Set<String> = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"]

    /// The `method` label for a request method (already upper-cased by `Request`).
    static func methodLabel(_ method: String) -> String { knownMethods.contains(method) ? method : "other" }

    static let buckets: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]

    struct Histogram {
        var counts = [UInt64](repeating: 0, count: Metrics.buckets.count)
        var sum = 0.0
        var count: UInt64 = 0

        mutating func observe(_ seconds: Double) {
            for (i, bound) in Metrics.buckets.enumerated() where seconds <= bound { counts[i] += 1 }
            sum += seconds
            count += 1
        }
    }

    /// One `latchkey_http_requests_total` series: kept as its parts (every request counts one, so
    /// no label text is formatted until /metrics is read).
    struct RequestSeries: Hashable {
        let route: String
        let method: String
        let status: Int
    }

    /// What every request counts: kept per thread shard (`RequestCounts.shard`), summed when read.
    struct RequestCounts {
        var requests: [RequestSeries: UInt64] = [:]
        var latency: [String: Histogram] = [:]          // route
        var ceremonies: [String: UInt64] = [:]          // "ceremony|outcome"
        var roundTrips: [RouteMethod: UInt64] = [:]

        mutating func add(_ other: RequestCounts) {
            requests.merge(other.requests, uniquingKeysWith: +)
            ceremonies.merge(other.ceremonies, uniquingKeysWith: +)
            roundTrips.merge(other.roundTrips, uniquingKeysWith: +)
            latency.merge(other.latency) { a, b in
                Histogram(counts: zip(a.counts, b.counts).map(+), sum: a.sum + b.sum, count: a.count + b.count)
            }
        }
    }

    struct RouteMethod: Hashable {
        let route: String
        let method: String
    }

    struct State {
        var deliveries: [String: UInt64] = [:]          // "type|outcome"
        var databaseFailures: [String: UInt64] = [:]    // DatabaseFailure.kind, or not_ready / other
        var oauth: [String: UInt64] = [:]               // "client|outcome"
        var logSize: Int64?
        var logLag = Histogram()
        var witnesses: [String: UInt64] = [:]           // "witness|outcome"
    }

    private final class Shard: Sendable {
        let counts = Mutex(RequestCounts())
    }

    /// Every request thread counts into one of these, picked by its thread id: with one lock for
    /// all, a holder preempted on a small machine made every other request thread spin and sleep.
    private let shards = (0..<16).map { _ in Shard() }
    private let state = Mutex(State())
    public init() {}

    private var shard: Shard { shards[ThreadSlot.current(of: shards.count)] }

    public func observeRequest(route: String, method: String, status: Int, seconds: Double, roundTrips: Int = 0) {
        let method = Self.methodLabel(method)
        shard.counts.withLock { s in
            s.requests[RequestSeries(route: route, method: method, status: status), default: 0] += 1
            if roundTrips > 0 { s.roundTrips[RouteMethod(route: route, method: method), default: 0] += UInt64(roundTrips) }
            // Mutated in place: copying the histogram out and back re-allocated its counts each time.
            s.latency[route, default: Histogram()].observe(seconds)
        }
    }

    /// A 503: the class of the database failure behind it (a closed set, see `DatabaseFailure`).
    public func observeDatabaseFailure(_ kind: String) {
        let known = ["connection_lost", "timeout", "pool_timeout", "serialization", "read_only", "query", "not_ready"]
        let label = known.contains(kind) ? kind : "other"
        state.withLock { $0.databaseFailures[label, default: 0] += 1 }
    }

    /// `outcome` is "ok" or an error code.
    public func observeCeremony(_ ceremony: String, outcome: String) {
        shard.counts.withLock { $0.ceremonies["\(ceremony)|\(outcome)", default: 0] += 1 }
    }

    /// One webhook attempt's outcome: `delivered`, `retry` or `failed` (given up). `type` is an event
    /// type; anything else is counted as `other`, so the label set stays bounded.
    public func observeDelivery(type: String, outcome: String) {
        let t = EventType(rawValue: type)?.isWebhookType == true ? type : "other"
        let o = ["delivered", "retry", "failed"].contains(outcome) ? outcome : "other"
        state.withLock { $0.deliveries["\(t)|\(o)", default: 0] += 1 }
    }

    /// One OpenID Provider outcome for a registered client (its id: a closed set, the registered
    /// clients): `authorized`, `denied`, `token`, `refresh`, `logout`, `revoked`, `code_replayed` or an OAuth error code.
    func oauth(client: String, outcome: String) {
        state.withLock { $0.oauth["\(client)|\(outcome)", default: 0] += 1 }
    }

    /// The transparency log's size after this instance's last read or integration.
    func observeLogSize(_ size: Int64) { state.withLock { $0.logSize = size } }

    /// Seconds from a receipt's commit to the checkpoint that holds it.
    func observeLogLag(_ seconds: Double) { state.withLock { $0.logLag.observe(seconds) } }

    /// One witness submission's outcome. `witness` is a configured witness's key name (a closed set).
    func observeWitness(_ witness: String, outcome: String) {
        let o = ["cosigned", "conflict", "refused", "unreachable", "bad_cosignature", "failed"].contains(outcome) ? outcome : "other"
        state.withLock { $0.witnesses["\(witness)|\(o)", default: 0] += 1 }
    }

    /// Every family this process exposes, declared once with its type and help: the exposition
    /// writes a family's `# HELP` / `# TYPE` lines before its first sample, so a metric added here
    /// (or by any caller of `Exposition.sample`) cannot go out without them.
    public enum Family {
        public static let buildInfo = MetricFamily("latchkey_build_info", .gauge, "Always 1; the version of this build in the version label.")
        public static let requests = MetricFamily("latchkey_http_requests_total", .counter, "HTTP requests by route, method and status.")
        public static let latency = MetricFamily("latchkey_http_request_duration_seconds", .histogram, "Request latency by route.")
        public static let ceremonies = MetricFamily("latchkey_ceremonies_total", .counter, "Ceremony outcomes: ok or the error code.")
        public static let poolConnections = MetricFamily("latchkey_db_pool_connections", .gauge, "Database pool connections by state (open, in_use).")
        public static let poolWaiting = MetricFamily("latchkey_db_pool_waiting", .gauge, "Requests waiting for a database pool connection.")
        public static let databaseFailures = MetricFamily("latchkey_db_unavailable_total", .counter,
                                                          "503 answers by the database failure behind them (connection_lost, timeout, pool_timeout, serialization, read_only, query, not_ready, other).")
        public static let deliveries = MetricFamily("latchkey_webhook_deliveries_total", .counter,
                                                    "Outbox delivery attempts (webhooks and mail) by event type and outcome (delivered, retry, failed = given up).")
        public static let outboxDepth = MetricFamily("latchkey_outbox_depth", .gauge, "Outbox deliveries not yet delivered or given up, by channel.")
        public static let outboxOldest = MetricFamily("latchkey_outbox_oldest_pending_seconds", .gauge,
                                                      "Age of the oldest pending delivery's event, by channel (0 when none).")
        public static let oauth = MetricFamily("latchkey_oauth_total", .counter, "OpenID Provider outcomes by client: approvals, refusals, tokens, errors.")
        public static let revocationFeedStale = MetricFamily("latchkey_revocation_feed_stale", .gauge,
                                                             "1 while the revocation feed has not been heard from within LATCHKEY_REVOCATION_MAX_LAG or its LISTEN is down (each token's session is then read from the database), else 0.")
        public static let roundTrips = MetricFamily("latchkey_db_round_trips_total", .counter,
                                                    "Round trips to PostgreSQL (statements, BEGIN, COMMIT) made by requests, by route and method.")
        public static let logSize = MetricFamily("latchkey_log_size", .gauge, "Leaves in the transparency log at its newest checkpoint (as this instance last saw it).")
        public static let logLag = MetricFamily("latchkey_log_integration_lag_seconds", .histogram,
                                                "Seconds from a receipt's commit to the signed checkpoint that holds its commitment (integrations by this instance).")
        public static let witnesses = MetricFamily("latchkey_log_witness_total", .counter,
                                                   "Checkpoint submissions to witnesses by witness and outcome (cosigned, conflict, refused, unreachable, bad_cosignature, failed).")
        public static let all = [buildInfo, requests, latency, ceremonies, poolConnections, poolWaiting, databaseFailures, deliveries, outboxDepth, outboxOldest, oauth,
                                 revocationFeedStale, roundTrips, logSize, logLag, witnesses]
    }

    public func render(pool: (open: Int, inUse: Int, waiting: Int), outbox: [OutboxDepth]? = nil, revocationFeedStale: Bool? = nil) -> String {
        let s = state.withLock { $0 }
        var counts = RequestCounts()
        for shard in shards { counts.add(shard.counts.withLock { $0 }) }
        var out = Exposition()
        out.sample(Family.buildInfo, [("version", LatchkeyBuild.version)], "1")
        out.counter(Family.requests, labels: ["route", "method", "status"],
                    Dictionary(counts.requests.map { ("\($0.key.route)|\($0.key.method)|\($0.key.status)", $0.value) }, uniquingKeysWith: +))
        out.declare(Family.latency)
        for (route, h) in counts.latency.sorted(by: { $0.key < $1.key }) { out.histogram(Family.latency, [("route", route)], h) }
        out.counter(Family.ceremonies, labels: ["ceremony", "outcome"], counts.ceremonies)
        out.sample(Family.poolConnections, [("state", "open")], "\(pool.open)")
        out.sample(Family.poolConnections, [("state", "in_use")], "\(pool.inUse)")
        out.sample(Family.poolWaiting, [], "\(pool.waiting)")
        out.counter(Family.databaseFailures, labels: ["class"], s.databaseFailures)
        out.counter(Family.deliveries, labels: ["type", "outcome"], s.deliveries)
        out.counter(Family.oauth, labels: ["client", "outcome"], s.oauth)
        out.counter(Family.roundTrips, labels: ["route", "method"],
                    Dictionary(counts.roundTrips.map { ("\($0.key.route)|\($0.key.method)", $0.value) }, uniquingKeysWith: +))
        if let size = s.logSize { out.sample(Family.logSize, [], "\(size)") }
        if s.logLag.count > 0 { out.histogram(Family.logLag, [], s.logLag) }
        out.counter(Family.witnesses, labels: ["witness", "outcome"], s.witnesses)
        if let revocationFeedStale { out.sample(Family.revocationFeedStale, [], revocationFeedStale ? "1" : "0") }
        if let outbox {
            // Every channel (webhook, mail, …), even when empty.
            let byChannel = Dictionary(outbox.map { ($0.channel, $0) }, uniquingKeysWith: { a, _ in a })
            let channels = OutboxChannel.allCases.sorted { $0.rawValue < $1.rawValue }
            for c in channels { out.sample(Family.outboxDepth, [("channel", c.rawValue)], "\(byChannel[c]?.pending ?? 0)") }
            for c in channels {
                out.sample(Family.outboxOldest, [("channel", c.rawValue)], "\(byChannel[c]?.oldestPendingSeconds ?? 0)")
            }
        }
        return out.text
    }
}

/// One metric family: name, Prometheus type and help text.
public struct MetricFamily: Sendable, Hashable {
    public enum Kind: String, Sendable { case counter, gauge, histogram }
    public let name: String
    public let kind: Kind
    public let help: String
    public init(_ name: String, _ kind: Kind, _ help: String) {
        self.name = name
        self.kind = kind
        self.help = help
    }
}

/// Prometheus text exposition (format 0.0.4) written family by family: the first sample of a
/// family (or `declare`) writes its HELP and TYPE lines, so no sample goes out without them.
public struct Exposition: Sendable {
    public private(set) var text = ""
    private var declared: Set<String> = []
    public init() {}

    public mutating func declare(_ family: MetricFamily) {
        guard declared.insert(family.name).inserted else { return }
        text += "# HELP \(family.name) \(family.help)\n# TYPE \(family.name) \(family.kind.rawValue)\n"
    }

    /// One sample; `suffix` is a histogram's `_bucket`, `_sum` or `_count`. Label values come from
    /// closed sets (see `Metrics`); quotes and backslashes are escaped anyway.
    public mutating func sample(_ family: MetricFamily, suffix: String = "", _ labels: [(String, String)], _ value: String) {
        declare(family)
        let pairs = labels.map { "\($0.0)=\"\(Self.escape($0.1))\"" }.joined(separator: ",")
        text += family.name + suffix + (pairs.isEmpty ? "" : "{\(pairs)}") + " " + value + "\n"
    }

    /// One histogram series: its cumulative `_bucket`s (`+Inf` last), `_sum` and `_count`.
    mutating func histogram(_ family: MetricFamily, _ labels: [(String, String)], _ h: Metrics.Histogram) {
        for (i, bound) in Metrics.buckets.enumerated() { sample(family, suffix: "_bucket", labels + [("le", "\(bound)")], "\(h.counts[i])") }
        sample(family, suffix: "_bucket", labels + [("le", "+Inf")], "\(h.count)")
        sample(family, suffix: "_sum", labels, "\(h.sum)")
        sample(family, suffix: "_count", labels, "\(h.count)")
    }

    /// A counter family from `a|b|…` keys (label values in `labels` order), sorted so the text is stable.
    mutating func counter(_ family: MetricFamily, labels: [String], _ values: [String: UInt64]) {
        declare(family)
        for (key, n) in values.sorted(by: { $0.key < $1.key }) {
            let parts = key.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            sample(family, Array(zip(labels, parts)), "\(n)")
        }
    }

    static func escape(_ value: String) -> String {
        var out = ""
        for c in value {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out
    }
}
