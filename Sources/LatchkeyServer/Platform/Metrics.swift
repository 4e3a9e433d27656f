import Storage
import Synchronization

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

    struct State {
        var requests: [String: UInt64] = [:]            // "route|method|status"
        var latency: [String: Histogram] = [:]          // route
        var ceremonies: [String: UInt64] = [:]          // "ceremony|outcome"
        var deliveries: [String: UInt64] = [:]          // "type|outcome"
        var oauth: [String: UInt64] = [:]               // "client|outcome"
    }

    private let state = Mutex(State())
    public init() {}

    public func observeRequest(route: String, method: String, status: Int, seconds: Double) {
        let method = Self.methodLabel(method)
        state.withLock { s in
            s.requests["\(route)|\(method)|\(status)", default: 0] += 1
            // Mutated in place: copying the histogram out and back re-allocated its counts each time.
            s.latency[route, default: Histogram()].observe(seconds)
        }
    }

    /// `outcome` is "ok" or an error code.
    public func observeCeremony(_ ceremony: String, outcome: String) {
        state.withLock { $0.ceremonies["\(ceremony)|\(outcome)", default: 0] += 1 }
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

    public func render(pool: (open: Int, inUse: Int, waiting: Int), outbox: [OutboxDepth]? = nil) -> String {
        let s = state.withLock { $0 }
        var out = ""
        Self.counter(&out, "latchkey_http_requests_total", help: "HTTP requests by route, method and status.",
                     labels: ["route", "method", "status"], s.requests)
        out += "# HELP latchkey_http_request_duration_seconds Request latency by route.\n# TYPE latchkey_http_request_duration_seconds histogram\n"
        for (route, h) in s.latency.sorted(by: { $0.key < $1.key }) {
            for (i, bound) in Metrics.buckets.enumerated() {
                out += "latchkey_http_request_duration_seconds_bucket{route=\"\(route)\",le=\"\(bound)\"} \(h.counts[i])\n"
            }
            out += "latchkey_http_request_duration_seconds_bucket{route=\"\(route)\",le=\"+Inf\"} \(h.count)\n"
            out += "latchkey_http_request_duration_seconds_sum{route=\"\(route)\"} \(h.sum)\n"
            out += "latchkey_http_request_duration_seconds_count{route=\"\(route)\"} \(h.count)\n"
        }
        Self.counter(&out, "latchkey_ceremonies_total", help: "Ceremony outcomes: ok or the error code.",
                     labels: ["ceremony", "outcome"], s.ceremonies)
        out += "# HELP latchkey_db_pool_connections Database pool connections by state.\n# TYPE latchkey_db_pool_connections gauge\n"
        out += "latchkey_db_pool_connections{state=\"open\"} \(pool.open)\n"
        out += "latchkey_db_pool_connections{state=\"in_use\"} \(pool.inUse)\n"
        out += "latchkey_db_pool_waiting \(pool.waiting)\n"
        Self.counter(&out, "latchkey_webhook_deliveries_total",
                     help: "Webhook delivery attempts by event type and outcome (delivered, retry, failed = given up).",
                     labels: ["type", "outcome"], s.deliveries)
        Self.counter(&out, "latchkey_oauth_total", help: "OpenID Provider outcomes by client: approvals, refusals, tokens, errors.",
                     labels: ["client", "outcome"], s.oauth)
        if let outbox {
            // Every channel this deployment has, even when empty.
            var byChannel = Dictionary(uniqueKeysWithValues: outbox.map { ($0.channel.rawValue, $0) })
            if byChannel[OutboxRepository.webhookChannel.rawValue] == nil {
                byChannel[OutboxRepository.webhookChannel.rawValue] = OutboxDepth(channel: OutboxRepository.webhookChannel, pending: 0,
                                                                                  oldestPendingSeconds: 0)
            }
            out += "# HELP latchkey_outbox_depth Outbox deliveries not yet delivered or given up, by channel.\n# TYPE latchkey_outbox_depth gauge\n"
            for d in byChannel.values.sorted(by: { $0.channel.rawValue < $1.channel.rawValue }) {
                out += "latchkey_outbox_depth{channel=\"\(d.channel.rawValue)\"} \(d.pending)\n"
            }
            out += "# HELP latchkey_outbox_oldest_pending_seconds Age of the oldest pending delivery's event, by channel.\n"
            out += "# TYPE latchkey_outbox_oldest_pending_seconds gauge\n"
            for d in byChannel.values.sorted(by: { $0.channel.rawValue < $1.channel.rawValue }) {
                out += "latchkey_outbox_oldest_pending_seconds{channel=\"\(d.channel.rawValue)\"} \(d.oldestPendingSeconds)\n"
            }
        }
        return out
    }

    /// A counter family: its HELP and TYPE lines, then one sample per `a|b|…` key (label values in
    /// `labels` order), sorted so the text is stable.
    static func counter(_ out: inout String, _ name: String, help: String, labels: [String], _ values: [String: UInt64]) {
        out += "# HELP \(name) \(help)\n# TYPE \(name) counter\n"
        for (key, n) in values.sorted(by: { $0.key < $1.key }) {
            let parts = key.split(separator: "|", omittingEmptySubsequences: false)
            let pairs = zip(labels, parts).map { "\($0.0)=\"\($0.1)\"" }.joined(separator: ",")
            out += "\(name){\(pairs)} \(n)\n"
        }
    }
}
