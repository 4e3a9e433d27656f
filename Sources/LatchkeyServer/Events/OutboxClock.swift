import Foundation

/// An instant the outbox can state in SQL: every instant the outbox stores or compares is on the
/// wall clock (Runtime.swift, "One clock", rule 2), so the state machine's clock must say which
/// `Date` each of its instants is.
public protocol WallClockInstant: InstantProtocol where Duration == Swift.Duration {
    var date: Date { get }
}

/// The outbox's clock in the server: `Runtime.now`, as a `Clock` (a test's runtime steps it).
/// Waiting is not reading (rule 5): the worker waits on a semaphore for the span to an instant of
/// this clock; `sleep` is here because `Clock` asks for it.
public struct OutboxClock: Clock {
    public struct Instant: WallClockInstant {
        public let date: Date

        public init(date: Date) { self.date = date }

        public func advanced(by duration: Swift.Duration) -> Instant { Instant(date: date.addingTimeInterval(duration.seconds)) }
        public func duration(to other: Instant) -> Swift.Duration { .seconds(other.date.timeIntervalSince(date)) }
        public static func < (a: Instant, b: Instant) -> Bool { a.date < b.date }
    }

    let read: @Sendable () -> Date

    public init(_ runtime: Runtime) { read = runtime.now }

    public var now: Instant { Instant(date: read()) }
    public var minimumResolution: Swift.Duration { .microseconds(1) }

    public func sleep(until deadline: Instant, tolerance: Swift.Duration? = nil) async throws {
        try await Task.sleep(for: now.duration(to: deadline))
    }
}

extension Swift.Duration {
    /// The span in seconds, as a `Double` (attoseconds kept to 1e-18).
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
