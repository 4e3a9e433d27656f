import Foundation
import PostgreSQL
import Storage
import Synchronization

/// Whether a session's tokens may still be accepted here (SPEC "Sessions" → "How fast."): a
/// revocation is in force on the instance that answered it before it answers, and on every other
/// instance within `LATCHKEY_REVOCATION_MAX_LAG` (`lag`) of that answer.
///
/// The ids of sessions revoked within the last access-token TTL (+ margin) are kept in memory, fed
/// by this instance's own revocations (`insert`) and by the revocation feed: NOTIFY
/// `latchkey_sessions` (migration 5's trigger, delivered at commit) on a LISTEN connection of its
/// own. The feed proves itself every `heartbeatInterval`: it NOTIFYs itself and hears it back
/// (`NotificationWatch.Heartbeat`), and since notifications arrive in commit order, a heartbeat sent
/// at `aliveAt` and heard back means every revocation committed before `aliveAt` is in `ids`.
///
/// So the check (`refuses`) is exact, not a race against a poll: while the feed was heard from
/// within `lag` (`isStale` false), a revocation answered more than `lag` ago is in memory and the
/// check costs nothing; while it was not (the LISTEN connection down, catching up, hung, or no
/// direct URL at all), the session's row in PostgreSQL decides — one primary-key read, the "only
/// extra read" SPEC "Performance targets" allows a stale instance. `latchkey_revocation_feed_stale`
/// reports which. An id is forgotten `retention` seconds after this instance learned of it: by then
/// every access token of that session has expired.
public final class RevokedSessions: Sendable {
    private struct State {
        /// id → the monotonic time at which it may be forgotten.
        var ids: [String: Double] = [:]
        /// The clock's reading when the newest heartbeat heard back was sent; nil while the LISTEN
        /// connection is down or catching up (nothing is known about what it may have missed).
        var aliveAt: Double? = nil
        var prunedAt: Double
    }

    private let state: Mutex<State>
    private let watch = Mutex<NotificationWatch?>(nil)
    private let sessions: any SessionRevocationSource
    /// Access-token TTL + margin (clock skew between instances, a refresh racing the revocation).
    let retention: Double
    /// `LATCHKEY_REVOCATION_MAX_LAG`: the longest the feed may go unheard before the database decides.
    let lag: Double
    /// Monotonic seconds (`Runtime.uptime`).
    let clock: @Sendable () -> Double

    /// SPEC: each instance pings its revocation feed every 250 ms.
    static let heartbeatInterval = 0.25
    static let margin = 60
    /// How often ids past their retention are dropped.
    static let pruneInterval = 30.0

    init(accessTokenTTL: Int, maxLag: Double, sessions: any SessionRevocationSource, runtime: Runtime) {
        retention = Double(accessTokenTTL + Self.margin)
        lag = maxLag
        clock = runtime.uptime
        self.sessions = sessions
        state = Mutex(State(prunedAt: runtime.uptime()))
    }

    /// True when the feed has not been heard from within `lag` (or its LISTEN connection is down):
    /// tokens are then checked against the database (`refuses`).
    var isStale: Bool {
        let now = clock()
        return state.withLock { Self.isStale($0, now: now, lag: lag) }
    }

    private static func isStale(_ s: State, now: Double, lag: Double) -> Bool {
        guard let aliveAt = s.aliveAt else { return true }
        return now - aliveAt > lag
    }

    /// True when a token of `sessionId` must be refused: revoked as far as this instance knows,
    /// or — while the feed is stale — as the database says (one indexed read; a revoked answer is
    /// remembered). Staleness and the set are read under one lock, so a sign of life can never
    /// vouch for a set read before the revocations that preceded it arrived.
    func refuses(_ sessionId: String) throws(StorageError) -> Bool {
        let now = clock()
        let (known, stale) = state.withLock { s in (s.ids[sessionId] != nil, Self.isStale(s, now: now, lag: lag)) }
        if known { return true }
        guard stale else { return false }
        // The one extra read a request may make (a stale feed), outside the route's round trips.
        guard try PostgresDeadline.uncounted({ () throws(StorageError) in try sessions.isRevoked(id: sessionId) }) else { return false }
        learn([sessionId])
        return true
    }

    /// True when `sessionId` is among the revocations this instance knows of (memory only: for
    /// lists already read from the database; a token is accepted through `refuses`).
    func contains(_ sessionId: String) -> Bool {
        state.withLock { $0.ids[sessionId] != nil }
    }

    /// This instance's own revocations, committed and about to be answered: in force here at once.
    /// Then waits (at most `lag`) for the feed to be heard from after this call, so what the same
    /// transaction revoked without naming it (the OAuth grants migration 20's triggers end with a
    /// passkey, a session or a device key) is in force here before the answer too. A stale feed
    /// needs no wait: the database decides every token until it is heard from again.
    func insert(_ sessionIds: some Sequence<String>) {
        learn(sessionIds)
        settle()
    }

    /// Sessions this instance ended by a logout (SPEC "Grants live and die": a logout revokes nothing
    /// else, so there is nothing the feed must bring first): in force here at once, no wait.
    func insertLogout(_ sessionIds: some Sequence<String>) { learn(sessionIds) }

    var count: Int { state.withLock { $0.ids.count } }

    private func learn(_ sessionIds: some Sequence<String>) {
        let now = clock()
        let forgetAt = now + retention
        state.withLock { s in
            for id in sessionIds { s.ids[id] = max(s.ids[id] ?? 0, forgetAt) }
            if now - s.prunedAt >= Self.pruneInterval {
                s.ids = s.ids.filter { $0.value > now }
                s.prunedAt = now
            }
        }
    }

    /// Blocks until a heartbeat sent after this call is heard back, or the feed is stale.
    private func settle() {
        let since = clock()
        guard let watch = watch.withLock({ $0 }), !isStale else { return }
        watch.beat()
        // A bounded wait (the slices decide nothing: the heartbeat or staleness does).
        let slice = 0.002
        for _ in 0..<Int((lag / slice).rounded(.up)) + 1 {
            let done = state.withLock { s in (s.aliveAt ?? -.infinity) >= since } || isStale
            if done { return }
            Thread.sleep(forTimeInterval: slice)
        }
    }

    // MARK: Feed

    /// Start-up step: loads the revocations of the last `retention` seconds (so tokens of sessions
    /// revoked before this instance started are refused too), then starts the LISTEN watch with its
    /// heartbeat. After every (re)connect the watch fetches those revocations again before it counts
    /// as heard from (what was revoked while it was away). Calling it again restarts the feed.
    func start() throws(StorageError) {
        stop()
        learn(try sessions.revoked(since: nil, lookbackSeconds: Int(retention.rounded(.up))).ids)
        let heartbeat = NotificationWatch.Heartbeat(
            interval: Self.heartbeatInterval, clock: clock,
            alive: { [self] sentAt in state.withLock { s in s.aliveAt = max(s.aliveAt ?? sentAt, sentAt) } },
            lost: { [self] in state.withLock { $0.aliveAt = nil } })
        let started = sessions.watchRevocations(
            heartbeat: heartbeat,
            onConnect: { [self] in
                state.withLock { $0.aliveAt = nil }
                learn(try sessions.revoked(since: nil, lookbackSeconds: Int(retention.rounded(.up))).ids)
            },
            onRevoked: { [self] ids in learn(ids) })
        watch.withLock { $0 = started }
    }

    /// True while the LISTEN connection is up (revocations arrive at once).
    var isListening: Bool { watch.withLock { $0?.isListening ?? false } }

    /// Stops the watch (within a quarter of a second); the feed is stale from now on.
    func stop() {
        watch.withLock { w in
            w?.stop()
            w = nil
        }
        state.withLock { $0.aliveAt = nil }
    }

    deinit { stop() }
}

/// Where revocations are read from: `SessionRepository` (the revocation feed and the one-row
/// check), or a test's memory.
protocol SessionRevocationSource: Sendable {
    /// Whether session `id` is revoked now (an unknown id counts as revoked).
    func isRevoked(id: String) throws(StorageError) -> Bool
    /// The sessions revoked after `since` (nil: in the last `lookbackSeconds`), with the source's clock.
    func revoked(since: Date?, lookbackSeconds: Int) throws(StorageError) -> (ids: [String], at: Date)
    /// Calls `onRevoked` for every revocation as it is committed, until the watch is stopped.
    func watchRevocations(heartbeat: NotificationWatch.Heartbeat, onConnect: @escaping @Sendable () throws -> Void,
                          onRevoked: @escaping @Sendable ([String]) -> Void) -> NotificationWatch
}

extension SessionRepository: SessionRevocationSource {}
