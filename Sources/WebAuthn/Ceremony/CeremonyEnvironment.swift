import Crypto

/// What a ceremony takes from the outside world: randomness and the clock. Injected so a test pins
/// both and gets the same options, byte for byte, on every run.
public struct CeremonyEnvironment: Sendable {
    /// `count` bytes from a CSPRNG (challenges).
    public var random: @Sendable (Int) -> [UInt8]
    /// Seconds since 1970. The WebAuthn ceremonies read no time themselves: expiry is the stored
    /// challenge's, and verification time is `VerificationPolicy.clock`. Kept so one environment
    /// serves every ceremony, and a future expiry check has its clock.
    public var now: @Sendable () -> Int64

    /// The operating system's CSPRNG and the real-time clock.
    public static let system = CeremonyEnvironment()

    public init(random: @escaping @Sendable (Int) -> [UInt8] = { SecureRandom.bytes($0) },
                now: @escaping @Sendable () -> Int64 = VerificationPolicy.systemClock) {
        self.random = random
        self.now = now
    }

    /// A fresh 32-byte challenge (WebAuthn L3 §13.4.3: at least 16 random bytes).
    func challenge() -> [UInt8] {
        let bytes = random(32)
        precondition(bytes.count == 32, "a ceremony challenge must be 32 bytes")
        return bytes
    }
}
