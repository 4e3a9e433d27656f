import Glibc
import Synchronization

/// Token buckets per client for the API, admin and readiness endpoints: brute force, challenge
/// flooding and database-bound reads get 429 `rate_limited` with `Retry-After`. Per instance (each
/// instance enforces its own share); 0 turns it off.
///
/// A client is an IPv4 address or an IPv6 /64 (one subscriber's prefix: rotating through it buys
/// no new buckets). The table holds at most `capacity` buckets; past that the least recently used
/// are evicted, so spraying addresses costs the sprayer memory it cannot grow and never hands a
/// limited client a fresh bucket the way wiping the table did.
public final class RateLimiter: Sendable {
    let ratePerSecond: Double
    let burst: Double
    let capacity: Int
    let clock: @Sendable () -> Double
    private let table = Mutex<Table>(Table())

    private struct Bucket {
        var tokens: Double
        var last: Double
        /// Order of the last use (ties on the clock are common in tests and under load).
        var touched: UInt64
    }

    private struct Table {
        var buckets: [String: Bucket] = [:]
        var uses: UInt64 = 0
    }

    /// `clock`: monotonic seconds (`Runtime.uptime`; a test passes one it moves by hand).
    public init(ratePerSecond: Int, capacity: Int = 100_000, clock: @escaping @Sendable () -> Double = Runtime.system.uptime) {
        self.ratePerSecond = Double(ratePerSecond)
        self.burst = Double(ratePerSecond * 2)
        self.capacity = max(8, capacity)
        self.clock = clock
    }

    /// Buckets held right now.
    var count: Int { table.withLock { $0.buckets.count } }

    /// Nil when allowed; otherwise the seconds to wait. `address`: the peer (or forwarded) address.
    public func admit(_ address: String) -> Int? {
        guard ratePerSecond > 0 else { return nil }
        let key = Self.clientKey(address)
        let now = clock()
        return table.withLock { t in
            t.uses &+= 1
            var entry = t.buckets[key] ?? Bucket(tokens: burst, last: now, touched: 0)
            entry.tokens = min(burst, entry.tokens + max(0, now - entry.last) * ratePerSecond)
            entry.last = now
            entry.touched = t.uses
            let wait: Int?
            if entry.tokens >= 1 {
                entry.tokens -= 1
                wait = nil
            } else {
                wait = max(1, Int(((1 - entry.tokens) / ratePerSecond).rounded(.up)))
            }
            t.buckets[key] = entry
            if t.buckets.count > capacity { evictOldest(&t) }
            return wait
        }
    }

    /// Drops the least recently used eighth of the table: O(n log n) once per capacity/8 new
    /// clients, so O(log n) per request amortised.
    private func evictOldest(_ t: inout Table) {
        let excess = t.buckets.count - capacity + capacity / 8
        let oldest = t.buckets.map { ($0.value.touched, $0.key) }.sorted { $0.0 < $1.0 }.prefix(excess)
        for (_, key) in oldest { t.buckets[key] = nil }
    }

    /// The bucket an address belongs to: an IPv4 address as is (also when IPv4-mapped), an IPv6
    /// address as its /64 (`2001:db8:1:2::/64`); anything else, bounded in length, as given.
    static func clientKey(_ address: String) -> String {
        var v6 = in6_addr()
        if inet_pton(AF_INET6, address, &v6) == 1 {
            let bytes = withUnsafeBytes(of: &v6) { Array($0) }
            if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
                return bytes[12..<16].map { String($0) }.joined(separator: ".")
            }
            let groups = stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
            return groups.joined(separator: ":") + "::/64"
        }
        return String(address.prefix(64))
    }
}
