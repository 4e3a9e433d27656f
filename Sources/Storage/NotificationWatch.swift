import Foundation
import PostgreSQL
import Synchronization

/// A running LISTEN on one channel (ConfigRepository.watch, SessionRepository.watchRevocations),
/// and on the channels of any further `Feed`s given to it, which share its connection (the outbox's
/// wake-ups ride on the config feed's): a thread of its own with a dedicated direct connection,
/// never a pooled one (a pooled connection is reused by other work and would miss or swallow
/// notifications). It reconnects with backoff;
/// `onConnect` runs after every (re)connect, because a gap may have hidden notifications, and the
/// watch counts as listening only once it returned (a throw drops the connection and tries again).
/// Without a URL (a transaction pooler and no direct URL) nothing listens and `isListening` stays false.
///
/// With a `Heartbeat`, the watch also proves every `interval` that the feed works end to end: it
/// NOTIFYs a channel of its own (`<channel>_alive_<backend pid>`) from its own connection and, when
/// that notification comes back, reports the clock's reading from just before it was sent.
/// PostgreSQL delivers notifications in commit order, so by then every notification committed before
/// that instant has been handed to `onNotifications` (SPEC "Sessions" → "How fast.").
public final class NotificationWatch: Sendable {
    /// How the watch tells its owner that the feed is alive.
    public struct Heartbeat: Sendable {
        /// Seconds between heartbeats.
        public let interval: Double
        /// The owner's monotonic clock (`Runtime.uptime`): heartbeats are stamped with it.
        public let clock: @Sendable () -> Double
        /// After `onNotifications` for what arrived with it: a heartbeat sent at `sentAt` came back.
        public let alive: @Sendable (_ sentAt: Double) -> Void
        /// The connection is gone (or not caught up yet): nothing is known until the next `alive`.
        public let lost: @Sendable () -> Void

        public init(interval: Double, clock: @escaping @Sendable () -> Double, alive: @escaping @Sendable (Double) -> Void,
                    lost: @escaping @Sendable () -> Void) {
            self.interval = interval
            self.clock = clock
            self.alive = alive
            self.lost = lost
        }
    }

    /// One more channel on the watch's connection, with its own handlers: `onConnect` after every
    /// (re)connect (once the LISTEN is in place), `onNotifications` with the payloads of its channel.
    public struct Feed: Sendable {
        public let channel: String
        public let onConnect: @Sendable () -> Void
        public let onNotifications: @Sendable ([String]) -> Void

        public init(channel: String, onConnect: @escaping @Sendable () -> Void, onNotifications: @escaping @Sendable ([String]) -> Void) {
            self.channel = channel
            self.onConnect = onConnect
            self.onNotifications = onNotifications
        }
    }

    private let stopped = Mutex(false)
    private let listening = Mutex(false)
    /// Set by `beat()`: the next heartbeat goes out within a slice, not at its turn.
    private let beatWanted = Mutex(false)
    /// The wait between two looks at `beatWanted` and the heartbeat's turn.
    static let slice = 0.02
    /// How long a heartbeat's NOTIFY (or a keep-alive ping) may take before the connection is given up.
    static let roundTripLimit: Duration = .seconds(3)
    /// Heartbeats sent and not heard back past which the connection is given up and made again.
    static let unansweredLimit = 16

    init(url: String?, channel: String, threadName: String, heartbeat: Heartbeat? = nil, also feeds: [Feed] = [],
         onConnect: @escaping @Sendable () throws -> Void, onNotifications: @escaping @Sendable ([String]) -> Void) {
        guard let url else { return }
        let all = [Feed(channel: channel, onConnect: {}, onNotifications: onNotifications)] + feeds
        let thread = Thread { [self] in
            self.run(url: url, feeds: all, heartbeat: heartbeat, onConnect: {
                try onConnect()
                for feed in feeds { feed.onConnect() }
            })
        }
        thread.name = threadName
        thread.start()
    }

    /// True while the LISTEN connection is up and caught up (notifications arrive at once).
    public var isListening: Bool { listening.withLock { $0 } }

    /// Ends the watch within a quarter of a second; no callback runs afterwards.
    public func stop() { stopped.withLock { $0 = true } }

    /// Asks for a heartbeat now rather than at its turn (someone waits for the feed to catch up).
    public func beat() { beatWanted.withLock { $0 = true } }

    private var isStopped: Bool { stopped.withLock { $0 } }

    /// `feeds[0]` is the watch's own channel (the heartbeat's is named after it).
    private func run(url: String, feeds: [Feed], heartbeat: Heartbeat?, onConnect: @escaping @Sendable () throws -> Void) {
        var backoff = 0.1
        while !isStopped {
            guard let (listener, alive) = connect(url: url, channels: feeds.map(\.channel), heartbeat: heartbeat, onConnect: onConnect) else {
                Thread.sleep(forTimeInterval: backoff)
                backoff = min(backoff * 2, 2)
                continue
            }
            backoff = 0.1
            listening.withLock { $0 = true }
            if let heartbeat, let alive {
                beating(listener, alive: alive, heartbeat: heartbeat, feeds: feeds)
            } else {
                quiet(listener, feeds: feeds)
            }
            listening.withLock { $0 = false }
            heartbeat?.lost()
        }
    }

    /// A new LISTEN connection (and the heartbeat's channel), caught up by `onConnect`; nil when any step failed.
    private func connect(url: String, channels: [String], heartbeat: Heartbeat?,
                         onConnect: () throws -> Void) -> (PostgresListener, alive: String?)? {
        do {
            let listener = try PostgresListener(url: url, channels: channels)
            var alive: String? = nil
            if heartbeat != nil {
                let name = "\(channels[0])_alive_\(listener.backendPID)"
                try listener.listen(name, timeout: Self.roundTripLimit)
                alive = name
            }
            // After LISTEN: what committed before it is `onConnect`'s to fetch, what commits after it arrives.
            try onConnect()
            return (listener, alive)
        } catch {
            return nil
        }
    }

    /// Without a heartbeat: waits a quarter of a second at a time. A hung primary's kernel still
    /// answers keepalives: a round trip every couple of quiet seconds is what notices it, so the
    /// LISTEN moves to the new primary after a failover.
    private func quiet(_ listener: PostgresListener, feeds: [Feed]) {
        var quietWaits = 0
        while !isStopped {
            do {
                let received = try listener.wait(timeout: 0.25)
                if !received.isEmpty, !isStopped { hand(received, to: feeds) }
                quietWaits = received.isEmpty ? quietWaits + 1 : 0
                if quietWaits >= 8 {
                    quietWaits = 0
                    try listener.ping(timeout: Self.roundTripLimit)
                }
            } catch {
                return
            }
        }
    }

    /// With a heartbeat: a NOTIFY to `alive` every `interval` (or at once after `beat()`); what comes
    /// back on `channel` goes to `onNotifications` first, then the newest heartbeat heard back to
    /// `alive` — in that order, so an owner that sees the sign of life already holds what preceded it.
    private func beating(_ listener: PostgresListener, alive: String, heartbeat: Heartbeat, feeds: [Feed]) {
        let slicesPerBeat = max(1, Int((heartbeat.interval / Self.slice).rounded()))
        var sent: [UInt64: Double] = [:]  // heartbeat number → the clock when it was sent
        var number: UInt64 = 0
        var untilBeat = 0
        while !isStopped {
            do {
                let wanted = beatWanted.withLock { w in defer { w = false }; return w }
                if untilBeat <= 0 || wanted {
                    guard sent.count < Self.unansweredLimit else { return }
                    number += 1
                    sent[number] = heartbeat.clock()
                    try listener.notify(alive, payload: String(number), timeout: Self.roundTripLimit)
                    untilBeat = slicesPerBeat
                }
                let received = try listener.wait(timeout: Self.slice)
                untilBeat -= 1
                if received.isEmpty || isStopped { continue }
                hand(received, to: feeds)
                let heard = received.filter { $0.channel == alive }.compactMap { UInt64($0.payload) }.max()
                if let heard, let at = sent[heard] {
                    heartbeat.alive(at)
                    sent = sent.filter { $0.key > heard }
                }
            } catch {
                return
            }
        }
    }
}

extension NotificationWatch {
    /// Each feed gets the payloads of its own channel, in the order they came (nothing when none did).
    private func hand(_ received: [PostgresNotification], to feeds: [Feed]) {
        for feed in feeds {
            let payloads = received.filter { $0.channel == feed.channel }.map(\.payload)
            if !payloads.isEmpty { feed.onNotifications(payloads) }
        }
    }
}

/// The config change feed's name before the LISTEN loop was shared with the session feed.
public typealias ConfigWatch = NotificationWatch
