import Foundation
import LatchkeyServer
import Synchronization

/// A clock a test moves by hand: `Runtime.uptime` (monotonic) and `Runtime.now` (wall) of a
/// TestServer or an outbox state machine, so that what depends on time (the signer's reload bound,
/// the rate limiter's buckets, the outbox's retries, leases and age limit) is pinned, not raced.
/// `advance` moves both together.
final class ManualClock: Sendable {
    private let seconds = Mutex<Double>(1000)
    private let wall: Mutex<Date>

    /// `start`: the wall time it shows first — a whole second, so that `start + n` round-trips
    /// through PostgreSQL's timestamptz (microseconds) exactly.
    init(start: Date = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))) {
        wall = Mutex(start)
    }

    var uptime: @Sendable () -> Double { { [self] in seconds.withLock { $0 } } }
    var now: @Sendable () -> Date { { [self] in wall.withLock { $0 } } }

    func advance(_ by: Double) {
        seconds.withLock { $0 += by }
        wall.withLock { $0 = $0.addingTimeInterval(by) }
    }

    /// The system's randomness (unless `random` is given) on this clock.
    func runtime(random: (@Sendable (Int) -> [UInt8])? = nil) -> Runtime {
        var runtime = Runtime.system
        runtime.now = now
        runtime.uptime = uptime
        if let random { runtime.random = random }
        return runtime
    }
}
