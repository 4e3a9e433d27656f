import Synchronization

/// Failed client authentications per client id and client address (SPEC "OpenID Provider",
/// "Limits"): after 20 failures in a minute, that pair's further failures are answered 429 for the
/// rest of the minute. The minute is a fixed window that the pair's first failure opens.
///
/// A request whose client authentication succeeds is never refused by this counter, and the API
/// makes that the only way to use it: there is no question to ask before authenticating.
/// `recordFailure` is called with a failure in hand (the caller's `catch` of `invalid_client`) and
/// answers how to refuse it — as it is, or 429 with `Retry-After`. A limited pair whose next
/// request carries the right credentials is served.
///
/// Per instance, like `RateLimiter`. An address is keyed as `RateLimiter` keys it (an IPv6 client
/// by its /64). At most `capacity` pairs are held: past it, windows that have ended go first, then
/// the oldest windows of pairs that are not limited, then the oldest of any, until an eighth of the
/// table is free (so a sweep is amortised over capacity/8 new pairs). Time is `Runtime.uptime`.
final class ClientAuthFailures: Sendable {
    static let limit = 20
    static let window = 60.0

    /// How to answer the failure just recorded.
    enum Verdict: Sendable, Equatable {
        /// As it is (`invalid_client`, 401).
        case counted
        /// 429 with `Retry-After: retryAfter`: the pair's window holds more than `limit` failures.
        case limited(retryAfter: Int)
    }

    private struct Window {
        let start: Double
        var failures: Int
        var isLimited: Bool { failures > ClientAuthFailures.limit }
    }

    private let windows = Mutex<[String: Window]>([:])
    let capacity: Int
    let clock: @Sendable () -> Double

    /// `clock`: monotonic seconds (`runtime.uptime`; a test passes one it moves by hand).
    init(capacity: Int = 100_000, clock: @escaping @Sendable () -> Double) {
        self.capacity = max(8, capacity)
        self.clock = clock
    }

    /// Counts one failed client authentication of `clientId` from `address` (the client id the
    /// request named, known or not, and the address `RateLimiter` is given).
    func recordFailure(clientId: String, address: String) -> Verdict {
        let key = Self.key(clientId: clientId, address: address)
        let now = clock()
        return windows.withLock { table in
            var window = table[key].flatMap { now - $0.start < Self.window ? $0 : nil } ?? Window(start: now, failures: 0)
            window.failures += 1
            let isNew = table.updateValue(window, forKey: key) == nil
            if isNew, table.count > capacity { evict(&table, now: now) }
            guard window.isLimited else { return .counted }
            return .limited(retryAfter: max(1, Int((window.start + Self.window - now).rounded(.up))))
        }
    }

    /// Pairs held right now (tests: the table stays bounded).
    var count: Int { windows.withLock { $0.count } }

    /// A bounded key: the client id's first 128 bytes (an unknown one is whatever the request sent)
    /// and the address as the rate limiter keys it.
    static func key(clientId: String, address: String) -> String {
        String(decoding: clientId.utf8.prefix(128), as: UTF8.self) + "\n" + RateLimiter.clientKey(address)
    }

    private func evict(_ table: inout [String: Window], now: Double) {
        table = table.filter { now - $0.value.start < Self.window }
        let target = capacity - capacity / 8
        guard table.count > target else { return }
        let order = table.map { (limited: $0.value.isLimited, start: $0.value.start, key: $0.key) }
            .sorted { ($0.limited ? 1 : 0, $0.start) < ($1.limited ? 1 : 0, $1.start) }
        for entry in order.prefix(table.count - target) { table[entry.key] = nil }
    }
}
