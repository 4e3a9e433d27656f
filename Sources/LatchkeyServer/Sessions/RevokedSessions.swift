import Foundation
import Storage
import Synchronization

/// The ids of sessions revoked within the last access-token TTL (+ margin), so Latchkey's own
/// Bearer endpoints refuse a revoked session's access tokens before they expire (SPEC "Sessions")
/// without a database round trip per request: `contains` is a lookup in memory.
///
/// Fed three ways, so a revocation anywhere reaches this instance within a second:
/// (a) `insert`, at once, by this instance's own revocations; (b) NOTIFY `latchkey_sessions`
/// (migration 5's trigger) through a LISTEN connection, when there is a direct one; (c) a poll
/// every `pollInterval` of the sessions revoked since the last poll — it holds even without LISTEN
/// (behind a transaction pooler without `LATCHKEY_DB_LISTEN_URL`) and across a lost LISTEN.
/// An id is forgotten `retention` seconds after this instance learned of it: by then every access
/// token of that session has expired (none is issued after the revocation commits).
public final class RevokedSessions: Sendable {
    /// id → the monotonic time at which it may be forgotten.
    private let ids = Mutex<[String: Double]>([:])
    private let feed = Mutex<(watch: NotificationWatch?, poll: StopFlag?)>((nil, nil))
    /// Access-token TTL + margin (clock skew between instances, a refresh racing the revocation).
    let retention: Double
    /// Monotonic seconds (`Runtime.uptime`): when an id may be forgotten.
    let clock: @Sendable () -> Double

    /// How often the fallback poll runs: under a second, so polling alone meets "within one second".
    static let pollInterval = 0.5
    /// How far before the last poll's database time the next one looks: a revocation's
    /// `revoked_at` is its transaction's start, which may precede a poll that its commit follows.
    static let pollOverlap = 10.0
    static let margin = 60

    init(accessTokenTTL: Int, runtime: Runtime) {
        retention = Double(accessTokenTTL + Self.margin)
        clock = runtime.uptime
    }

    /// True when `sessionId` was revoked recently enough that its access tokens may still be unexpired.
    func contains(_ sessionId: String) -> Bool {
        ids.withLock { $0[sessionId] != nil }
    }

    /// Records revocations (this instance's own, or learned from the feed).
    func insert(_ sessionIds: some Sequence<String>) {
        let forgetAt = clock() + retention
        ids.withLock { d in for id in sessionIds { d[id] = max(d[id] ?? 0, forgetAt) } }
    }

    var count: Int { ids.withLock { $0.count } }

    private func prune() {
        let now = clock()
        ids.withLock { d in d = d.filter { $0.value > now } }
    }

    // MARK: Feed

    /// Start-up step: loads the revocations of the last `retention` seconds (so tokens of sessions
    /// revoked before this instance started are refused too), then starts the LISTEN watch (when
    /// `sessions` has a direct connection) and the poll thread. Calling it again restarts the feed.
    func start(_ sessions: SessionRepository) throws(StorageError) {
        stop()
        let first = try sessions.revoked(since: nil, lookbackSeconds: Int(retention.rounded(.up)))
        insert(first.ids)
        let watch = sessions.watchRevocations(onConnect: {}, onRevoked: { [self] ids in insert(ids) })
        let stopped = StopFlag()
        feed.withLock { $0 = (watch, stopped) }
        let thread = Thread { [self] in poll(sessions, from: first.at, until: stopped) }
        thread.name = "latchkey-session-poll"
        thread.start()
    }

    private func poll(_ sessions: SessionRepository, from start: Date, until stopped: StopFlag) {
        var last = start
        var sincePrune = 0.0
        while !stopped.isSet {
            Thread.sleep(forTimeInterval: Self.pollInterval)
            if stopped.isSet { break }
            // The database being down keeps the last position: the next poll covers the gap.
            if let (revoked, at) = try? sessions.revoked(since: last.addingTimeInterval(-Self.pollOverlap),
                                                         lookbackSeconds: Int(retention)) {
                insert(revoked)
                last = at
            }
            sincePrune += Self.pollInterval
            if sincePrune >= 30 { prune(); sincePrune = 0 }
        }
    }

    /// True while the LISTEN connection is up (revocations arrive at once, not at the next poll).
    var isListening: Bool { feed.withLock { $0.watch?.isListening ?? false } }

    /// Stops the watch and the poll (within half a second).
    func stop() {
        feed.withLock { f in
            f.watch?.stop()
            f.poll?.set()
            f = (nil, nil)
        }
    }

    deinit { stop() }
}

/// A flag one thread sets and another polls.
private final class StopFlag: Sendable {
    private let value = Mutex(false)
    var isSet: Bool { value.withLock { $0 } }
    func set() { value.withLock { $0 = true } }
}
