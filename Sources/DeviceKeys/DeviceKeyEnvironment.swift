import Crypto

#if canImport(Glibc)
import Glibc
#endif

/// What the device-key ceremonies take from the outside world: randomness (challenge nonces) and
/// the clock (`expiresAt`). Injected so a test pins both.
public struct DeviceKeyEnvironment: Sendable {
    /// `count` bytes from a CSPRNG.
    public var random: @Sendable (Int) -> [UInt8]
    /// Seconds since 1970.
    public var now: @Sendable () -> Int64

    /// The operating system's CSPRNG and the real-time clock.
    public static let system = DeviceKeyEnvironment()

    public init(random: @escaping @Sendable (Int) -> [UInt8] = { SecureRandom.bytes($0) },
                now: @escaping @Sendable () -> Int64 = DeviceKeyEnvironment.systemClock) {
        self.random = random
        self.now = now
    }

    public static let systemClock: @Sendable () -> Int64 = {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec)
    }
}
