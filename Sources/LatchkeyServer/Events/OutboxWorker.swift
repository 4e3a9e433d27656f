import Foundation
import Storage
import Synchronization

/// Runs one outbox channel's consumer in this instance: a dispatcher thread claims due deliveries
/// (`OutboxRepository.claim`, SKIP LOCKED, with a lease) as senders come free, a fixed set of
/// sender threads calls `deliver` for each outside any transaction, and the outcome is recorded
/// under the claim's lease. Every instance runs one per channel; they never hold one delivery at
/// once (the lease outlasts a send), and a killed instance's claims come back when their leases end.
///
/// Isolation: at most `perTarget` deliveries to one target (a webhook endpoint) are in flight here,
/// so a target that hangs until its timeout holds `perTarget` senders, never all of them.
/// Retries: `retryBase · 2^(attempt−1)` seconds, capped at an hour, times a random factor in
/// [0.5, 1] (jitter), until the delivery's `expires_at` (the event's age limit), then `failed`.
///
/// A consumer for another channel (mail) builds one of these with its own `deliver`.
public final class OutboxWorker: Sendable {
    /// What one attempt came to.
    public enum Outcome: Sendable, Equatable {
        case delivered(statusCode: Int?)
        /// Retried later (backoff), or given up when the age limit is reached.
        case retry(statusCode: Int?, error: String)
        /// Never retried (e.g. the target no longer exists).
        case giveUp(statusCode: Int?, error: String)
    }

    public struct Policy: Sendable {
        public var senders: Int
        public var perTarget: Int
        public var leaseSeconds: Double
        public var retryBase: Double
        public var retryCap: Double = 3600
        /// How often an idle dispatcher looks for due deliveries (a local `poke` wakes it sooner).
        public var pollInterval: Double = 0.25

        public init(senders: Int, perTarget: Int, leaseSeconds: Double, retryBase: Double) {
            self.senders = senders
            self.perTarget = perTarget
            self.leaseSeconds = leaseSeconds
            self.retryBase = retryBase
        }
    }

    /// `delivered`, `retry` or `failed` (given up), for metrics.
    public typealias Observer = @Sendable (_ delivery: ClaimedDelivery, _ outcome: String) -> Void

    let channel: String
    let outbox: OutboxRepository
    let policy: Policy
    let runtime: Runtime
    let deliver: @Sendable (ClaimedDelivery) -> Outcome
    let observe: Observer

    private struct State {
        var running = false
        var stopped = false
        var queue: [ClaimedDelivery] = []
        var inFlight: [String: Int] = [:]   // target → deliveries claimed here and not yet recorded
        var total = 0
        var poked = false
    }
    private let state = Mutex(State())
    private let signal = NSCondition()

    public init(channel: String, outbox: OutboxRepository, policy: Policy, runtime: Runtime,
                deliver: @escaping @Sendable (ClaimedDelivery) -> Outcome, observe: @escaping Observer = { _, _ in }) {
        self.channel = channel
        self.outbox = outbox
        self.policy = policy
        self.runtime = runtime
        self.deliver = deliver
        self.observe = observe
    }

    /// Starts the dispatcher and the senders (nothing when `senders` is 0: this instance only writes).
    public func start() {
        guard policy.senders > 0 else { return }
        let begin = state.withLock { s -> Bool in
            guard !s.running else { return false }
            s.running = true
            s.stopped = false
            return true
        }
        guard begin else { return }
        let dispatcher = Thread { [self] in dispatch() }
        dispatcher.name = "latchkey-outbox-\(channel)"
        dispatcher.start()
        for i in 0..<policy.senders {
            let sender = Thread { [self] in send() }
            sender.name = "latchkey-outbox-\(channel)-\(i)"
            sender.start()
        }
    }

    /// Stops claiming; sends under way finish (and record) on their own.
    public func stop() {
        state.withLock { $0.stopped = true; $0.running = false }
        signal.lock(); signal.broadcast(); signal.unlock()
    }

    /// Something was just written here: look now instead of at the next poll.
    public func poke() {
        state.withLock { $0.poked = true }
        signal.lock(); signal.broadcast(); signal.unlock()
    }

    /// Deliveries claimed here and not recorded yet.
    public var inFlight: Int { state.withLock { $0.total } }

    // MARK: Dispatcher

    private func dispatch() {
        var lastExpiry = 0.0, lastPurge = 0.0
        while true {
            let (stopped, free, busy) = state.withLock { s -> (Bool, Int, [String]) in
                (s.stopped, policy.senders - s.total, s.inFlight.filter { $0.value >= policy.perTarget }.map(\.key))
            }
            if stopped { return }
            var claimedAny = false
            if free > 0, let claimed = try? outbox.claim(channel: channel, limit: free, leaseSeconds: policy.leaseSeconds,
                                                         leaseId: runtime.identifier(), excluding: busy) {
                claimedAny = !claimed.isEmpty
                var extra: [ClaimedDelivery] = []
                state.withLock { s in
                    for d in claimed {
                        // One batch may hold several deliveries for one target: past its limit they go back.
                        if s.inFlight[d.target, default: 0] >= policy.perTarget { extra.append(d); continue }
                        s.inFlight[d.target, default: 0] += 1
                        s.total += 1
                        s.queue.append(d)
                    }
                }
                for d in extra { try? outbox.release(d) }
                if !claimed.isEmpty { signal.lock(); signal.broadcast(); signal.unlock() }
            }
            let now = monotonicNow()
            if now - lastExpiry > 10 { lastExpiry = now; _ = try? outbox.expire() }
            if now - lastPurge > 3600 { lastPurge = now; _ = try? outbox.purgeFinished(olderThanSeconds: 7 * 86400) }
            if claimedAny && free > 0 { continue }
            // Idle (or every sender busy): wait for a poke, a sender finishing, or the poll interval.
            signal.lock()
            if !state.withLock({ s in let p = s.poked; s.poked = false; return p || s.stopped }) {
                _ = signal.wait(until: Date().addingTimeInterval(policy.pollInterval))
            }
            signal.unlock()
        }
    }

    // MARK: Senders

    private func send() {
        while true {
            signal.lock()
            var next: ClaimedDelivery? = nil
            while next == nil {
                let (stopped, item) = state.withLock { s -> (Bool, ClaimedDelivery?) in
                    if s.queue.isEmpty { return (s.stopped, nil) }
                    return (false, s.queue.removeFirst())
                }
                if let item { next = item; break }
                if stopped { signal.unlock(); return }
                _ = signal.wait(until: Date().addingTimeInterval(1))
            }
            signal.unlock()
            guard let delivery = next else { continue }
            let outcome = deliver(delivery)
            record(delivery, outcome)
            state.withLock { s in
                s.total -= 1
                s.inFlight[delivery.target, default: 1] -= 1
                if s.inFlight[delivery.target] == 0 { s.inFlight[delivery.target] = nil }
                s.poked = true
            }
            signal.lock(); signal.broadcast(); signal.unlock()
        }
    }

    /// Records the outcome under the lease; retried while the database is unreachable (a PostgreSQL
    /// restart), for as long as the lease lasts — after that the delivery comes back and is sent again.
    private func record(_ d: ClaimedDelivery, _ outcome: Outcome) {
        let deadline = monotonicNow() + policy.leaseSeconds
        let delay = backoff(attempt: d.attempt)
        let label: String
        switch outcome {
        case .delivered: label = "delivered"
        case .retry: label = runtime.now().addingTimeInterval(delay) >= d.expiresAt ? "failed" : "retry"
        case .giveUp: label = "failed"
        }
        while true {
            do {
                switch outcome {
                case .delivered(let status): try outbox.delivered(d, statusCode: status)
                case .retry(let status, let error): try outbox.failed(d, statusCode: status, error: error, retryInSeconds: delay)
                case .giveUp(let status, let error):
                    try outbox.failed(d, statusCode: status, error: error, retryInSeconds: 10 * 365 * 86400)
                }
                observe(d, label)
                return
            } catch {
                if monotonicNow() > deadline { return }
                Thread.sleep(forTimeInterval: 0.5)
            }
        }
    }

    /// Seconds before retry number `attempt` + 1: exponential, capped, with jitter in [0.5, 1].
    func backoff(attempt: Int) -> Double {
        let exponential = min(policy.retryCap, policy.retryBase * pow(2, Double(max(0, attempt - 1))))
        let bytes = runtime.random(2)
        let fraction = Double(UInt16(bytes[0]) << 8 | UInt16(bytes[1])) / 65535
        return exponential * (0.5 + 0.5 * fraction)
    }
}
