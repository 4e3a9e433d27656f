import Crypto
import Foundation
import DeviceKeys
import Tokens
import WebAuthn

/// Where the server's randomness, wall-clock time and host-name lookups come from. Built once by
/// `Wiring` and passed to every service, so a test pins them (STYLE §2); nothing in the server calls
/// `SecureRandom`, `Date()` or getaddrinfo on its own.
public struct Runtime: Sendable {
    public var random: @Sendable (Int) -> [UInt8]
    public var now: @Sendable () -> Date
    /// Seconds on a monotonic clock (cache ages, rate-limit windows); a test can freeze or step it.
    public var uptime: @Sendable () -> Double
    /// Names of the URLs Latchkey fetches for someone else (webhook deliveries); a test gives a table.
    public var resolver: HostResolver

    public init(random: @escaping @Sendable (Int) -> [UInt8], now: @escaping @Sendable () -> Date,
                uptime: @escaping @Sendable () -> Double = { monotonicNow() }, resolver: HostResolver = .system) {
        self.random = random
        self.now = now
        self.uptime = uptime
        self.resolver = resolver
    }

    /// The OS CSPRNG and the system clock.
    public static let system = Runtime(random: { SecureRandom.bytes($0) }, now: { Date() })

    /// Unix seconds.
    var unixTime: Int64 { Int64(now().timeIntervalSince1970) }

    /// A random id: `bytes` random bytes, base64url.
    func identifier(bytes: Int = 16) -> String { Base64URL.encode(random(bytes)) }

    /// The same sources for the protocol core's ceremonies.
    var ceremonies: CeremonyEnvironment {
        let now = self.now
        return CeremonyEnvironment(random: random, now: { Int64(now().timeIntervalSince1970) })
    }

    /// The same clock for the token signer.
    var tokenClock: TokenClock {
        let now = self.now, uptime = self.uptime
        return TokenClock(now: now, unixTime: { Int64(now().timeIntervalSince1970) }, uptime: uptime)
    }

    var deviceKeys: DeviceKeyEnvironment {
        let now = self.now
        return DeviceKeyEnvironment(random: random, now: { Int64(now().timeIntervalSince1970) })
    }
}

/// RFC 3339 / ISO 8601 in UTC with second precision, as every JSON timestamp in SPEC.
func iso8601(_ date: Date) -> String {
    var t = time_t(date.timeIntervalSince1970)
    var parts = tm()
    gmtime_r(&t, &parts)
    func pad(_ v: Int32, _ n: Int = 2) -> String { let s = String(v); return String(repeating: "0", count: max(0, n - s.count)) + s }
    return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1))-\(pad(parts.tm_mday))T\(pad(parts.tm_hour)):\(pad(parts.tm_min)):\(pad(parts.tm_sec))Z"
}

func iso8601(unixSeconds: Int64) -> String { iso8601(Date(timeIntervalSince1970: Double(unixSeconds))) }

/// Seconds on the monotonic clock (cache ages, latencies; never wall-clock time).
public func monotonicNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}
