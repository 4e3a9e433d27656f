import Foundation
import PostgreSQL
import Synchronization

/// A running LISTEN on one channel (ConfigRepository.watch, SessionRepository.watchRevocations):
/// a thread of its own with a dedicated direct connection, never a pooled one (a pooled connection
/// is reused by other work and would miss or swallow notifications). It reconnects with backoff;
/// `onConnect` runs after every (re)connect, because a gap may have hidden notifications. Without a
/// URL (a transaction pooler and no direct URL) nothing listens and `isListening` stays false.
public final class NotificationWatch: Sendable {
    private let stopped = Mutex(false)
    private let listening = Mutex(false)

    init(url: String?, channel: String, threadName: String, onConnect: @escaping @Sendable () -> Void,
         onNotifications: @escaping @Sendable ([String]) -> Void) {
        guard let url else { return }
        let thread = Thread { [self] in self.run(url: url, channel: channel, onConnect: onConnect, onNotifications: onNotifications) }
        thread.name = threadName
        thread.start()
    }

    /// True while the LISTEN connection is up (notifications arrive at once).
    public var isListening: Bool { listening.withLock { $0 } }

    /// Ends the watch within a quarter of a second; no callback runs afterwards.
    public func stop() { stopped.withLock { $0 = true } }

    private func run(url: String, channel: String, onConnect: @escaping @Sendable () -> Void,
                     onNotifications: @escaping @Sendable ([String]) -> Void) {
        var backoff = 0.1
        while !stopped.withLock({ $0 }) {
            guard let listener = try? PostgresListener(url: url, channels: [channel]) else {
                Thread.sleep(forTimeInterval: backoff)
                backoff = min(backoff * 2, 2)
                continue
            }
            backoff = 0.1
            listening.withLock { $0 = true }
            onConnect()
            // A hung primary's kernel still answers keepalives: a round trip every couple of
            // seconds is what notices it, so the LISTEN moves to the new primary after a failover.
            var quietWaits = 0
            while !stopped.withLock({ $0 }) {
                do {
                    let received = try listener.wait(timeout: 0.25)
                    if !received.isEmpty, !stopped.withLock({ $0 }) { onNotifications(received.map(\.payload)) }
                    quietWaits = received.isEmpty ? quietWaits + 1 : 0
                    if quietWaits >= 8 {
                        quietWaits = 0
                        try listener.ping(timeout: .seconds(3))
                    }
                } catch {
                    break
                }
            }
            listening.withLock { $0 = false }
        }
    }
}

/// The config change feed's name before the LISTEN loop was shared with the session feed.
public typealias ConfigWatch = NotificationWatch
