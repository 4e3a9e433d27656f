import Synchronization

/// A monotonic clock a test moves by hand: `Runtime.uptime` of a TestServer, so that what depends on
/// elapsed time (the signer's reload bound, the rate limiter's buckets) is pinned, not raced.
final class ManualClock: Sendable {
    private let seconds = Mutex<Double>(1000)
    var uptime: @Sendable () -> Double { { [self] in seconds.withLock { $0 } } }
    func advance(_ by: Double) { seconds.withLock { $0 += by } }
}
