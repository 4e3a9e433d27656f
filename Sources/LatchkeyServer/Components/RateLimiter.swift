import Synchronization

/// Token buckets per client address for the ceremony and token endpoints: brute force and
/// challenge flooding get 429 `rate_limited` with `Retry-After`. Per instance (each instance
/// enforces its own share); 0 turns it off.
public final class RateLimiter: Sendable {
    let ratePerSecond: Double
    let burst: Double
    private let buckets = Mutex<[String: (tokens: Double, last: Double)]>([:])

    public init(ratePerSecond: Int) {
        self.ratePerSecond = Double(ratePerSecond)
        self.burst = Double(ratePerSecond * 2)
    }

    /// Nil when allowed; otherwise the seconds to wait.
    public func admit(_ client: String) -> Int? { admit(client, now: monotonicNow()) }

    func admit(_ client: String, now: Double) -> Int? {
        guard ratePerSecond > 0 else { return nil }
        return buckets.withLock { b in
            if b.count > 100_000 { b.removeAll(keepingCapacity: true) }  // bounded memory under address spraying
            var entry = b[client] ?? (burst, now)
            entry.tokens = min(burst, entry.tokens + (now - entry.last) * ratePerSecond)
            entry.last = now
            if entry.tokens >= 1 {
                entry.tokens -= 1
                b[client] = entry
                return nil
            }
            b[client] = entry
            return max(1, Int(((1 - entry.tokens) / ratePerSecond).rounded(.up)))
        }
    }
}
