import Crypto
import Foundation
import DeviceKeys
import Tokens
import WebAuthn

// MARK: - One clock
//
// Where time comes from: one rule per concern (ARCHITECTURE.md copies this block). Only this file
// reads a clock: `grep -rn "Date()\|monotonicNow()" Sources/LatchkeyServer Sources/Storage` finds
// nothing else.
//
// 1. Instants the server decides or states: `Runtime.now`. Token claims (iat, exp, auth_time),
//    ceremony and step-up times, a new passkey's hold (`approves_from`) and the step-ups checked
//    against it, webhook-timestamp and mail Date headers, log lines, MDS and attestation validity.
// 2. The outbox: `Runtime.now`, never the database's clock. The worker decides when a delivery is
//    retried, when it is given up (LATCHKEY_WEBHOOK_MAX_AGE), when a lease has run out, and when its
//    poll and housekeeping are due (OutboxStateMachine on `OutboxClock`); every instant the outbox's SQL stores or compares — created_at,
//    expires_at, next_attempt_at, leased_until, finished_at — is that clock, passed as a bind
//    (OutboxRepository; the one `now()` left there stamps a cancelled delivery's finished_at beside
//    its endpoint's deleted_at, a record nothing decides on). So decision and query read one clock,
//    and tests step it. Instances' clocks must agree to well within LATCHKEY_OUTBOX_LEASE (NTP
//    does): a lease is compared on the claimer's clock.
// 3. Expiry of stored secrets and windows that SQL alone decides — challenges, enrolment tickets,
//    refresh tokens, one-time codes, recoveries, per-account limits, revocation stamps: the
//    database's `now()`, alone. The app passes durations (TTLs), never instants, and does not
//    compare those columns with its own clock; where it must, it reads the database's `now()` in
//    the same statement (`RecoveryRepository.recovery(tokenHash:)`'s `db_now`).
// 4. Time elapsed inside one process — cache ages, rate-limit buckets, the revoked-session set's
//    retention, the signer's reload bound, request latency: `Runtime.uptime`, monotonic.
// 5. Waiting is not reading: a thread's timed wait (the outbox's poll, the revocation poll, a
//    pause while the database is down) is a semaphore timeout or `Thread.sleep`; nothing is
//    decided on it.
// Tests replace `now`, `uptime` and `random` (ServerTests' ManualClock); the outbox tests step them.
// A cancel link (Recovery) follows both: a held passkey's link and hold are compared on
// `Runtime.now` (rule 1, passed as a bind), a recovery's link on the database's `now()` (rule 3).

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

    /// A session's id (its refresh family's): 16 bytes, base64url like `identifier()`, the first 6
    /// `now` in Unix milliseconds (big-endian), the other 10 random. Sessions started close together
    /// share their ids' first characters, so their entries in the indexes on `refresh_families.id`
    /// and `refresh_tokens.family_id` go to the same few leaf pages instead of each to a random leaf
    /// of an index as large as all live sessions (right after a checkpoint, an insert into a
    /// 2 M-entry index cost 1.0 full-page image and 6.7 kB of WAL with random ids, 0.004 and 224 B
    /// with these). A session id is no secret (the refresh token is), and its start is listed with it.
    func sessionIdentifier() -> String {
        let milliseconds = UInt64(max(0, (now().timeIntervalSince1970 * 1000).rounded(.down)))
        return Base64URL.encode(withUnsafeBytes(of: milliseconds.bigEndian) { Array($0.suffix(6)) } + random(10))
    }

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
    let year = Int(parts.tm_year) + 1900
    if (0...9999).contains(year) {
        // The common case, written digit by digit into one 20-byte string (it is on every request's
        // log line and every timestamp in a JSON answer).
        let fields = [(year, 4), (Int(parts.tm_mon) + 1, 2), (Int(parts.tm_mday), 2),
                      (Int(parts.tm_hour), 2), (Int(parts.tm_min), 2), (Int(parts.tm_sec), 2)]
        return String(unsafeUninitializedCapacity: 20) { out in
            let separators: [UInt8] = [UInt8(ascii: "-"), UInt8(ascii: "-"), UInt8(ascii: "T"), UInt8(ascii: ":"), UInt8(ascii: ":"), UInt8(ascii: "Z")]
            var at = 0
            for (index, (value, width)) in fields.enumerated() {
                var rest = value
                for position in stride(from: at + width - 1, through: at, by: -1) {
                    out[position] = UInt8(ascii: "0") + UInt8(rest % 10)
                    rest /= 10
                }
                out[at + width] = separators[index]
                at += width + 1
            }
            return 20
        }
    }
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
