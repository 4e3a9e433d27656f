import Foundation
import Storage
import Synchronization

/// The decisions of one outbox channel's consumer in this instance, with no threads and no waiting
/// (STYLE §11, "workers are state machines over a clock"): what to claim, when a failed attempt is
/// retried, when a delivery is given up, when a lease has run out. `OutboxWorker` runs it on
/// threads; a test calls it directly, steps the clock of its `Runtime` and calls `tick()` again.
///
/// - Claims: `tick()` claims due deliveries (`OutboxRepository.claim`, SKIP LOCKED, leased for
///   `leaseSeconds`) as long as senders are free, never more than `perTarget` in flight to one
///   target (a webhook endpoint), so a target that hangs until its timeout holds `perTarget`
///   senders, never all of them. A batch's deliveries past a target's limit are handed back.
/// - Retries: `retryBase · 2^(attempt−1)` seconds, capped at `retryCap`, times a random factor in
///   [0.5, 1] (jitter, from `Runtime.random`).
/// - Giving up: a retry that would fall on or after the delivery's `expires_at` (the event's
///   `LATCHKEY_WEBHOOK_MAX_AGE`) is recorded `failed` instead; so is an outcome that is never retried.
///   `tick()` also expires, every 10 s, pending deliveries nobody claimed before their limit.
/// - Leases: a claim is this instance's until `leasedUntil`; the outcome is recorded under it.
///   After it the delivery is due again — here or anywhere — and a late outcome is not recorded.
///
/// Every instant comes from `runtime.now()` and goes to SQL as a bind: the decisions and the
/// queries read one clock (Runtime.swift, "One clock"). Housekeeping cadence is `runtime.uptime()`.
public final class OutboxStateMachine: Sendable {
    /// What one attempt came to (the channel's `deliver` says).
    public enum Outcome: Sendable, Equatable {
        case delivered(statusCode: Int?)
        /// Retried later (backoff), or given up when the age limit is reached.
        case retry(statusCode: Int?, error: String)
        /// Never retried (e.g. the target no longer exists).
        case giveUp(statusCode: Int?, error: String)
    }

    /// What is recorded for an attempt: decided here, written as it is.
    public enum Decision: Sendable, Equatable {
        case delivered(statusCode: Int?)
        case retry(at: Date, statusCode: Int?, error: String)
        case giveUp(statusCode: Int?, error: String)

        /// `delivered`, `retry` or `failed`, for metrics.
        public var label: String {
            switch self {
            case .delivered: "delivered"
            case .retry: "retry"
            case .giveUp: "failed"
            }
        }
    }

    /// How recording a decision went.
    public enum Recording: Sendable, Equatable {
        case recorded
        /// The lease was no longer this claim's (it ran out and the delivery was claimed again, or
        /// the endpoint was deleted): nothing was written.
        case leaseLost
        /// The database could not be reached: try again while the lease lasts.
        case unreachable
    }

    public struct Policy: Sendable {
        public var senders: Int
        public var perTarget: Int
        public var leaseSeconds: Double
        public var retryBase: Double
        public var retryCap: Double = 3600
        /// How often an idle worker looks for due deliveries (this instance's own writes wake it at once).
        public var pollInterval: Double = 0.25
        /// How often pending deliveries past their age limit are expired, and finished events purged.
        public var expiryInterval: Double = 10
        public var purgeInterval: Double = 3600
        /// Finished events are kept this long (the deliveries API shows them).
        public var keepFinished: Double = 7 * 86400

        public init(senders: Int, perTarget: Int, leaseSeconds: Double, retryBase: Double) {
            self.senders = senders
            self.perTarget = perTarget
            self.leaseSeconds = leaseSeconds
            self.retryBase = retryBase
        }
    }

    /// `delivered`, `retry` or `failed` (given up), for metrics.
    public typealias Observer = @Sendable (_ delivery: ClaimedDelivery, _ outcome: String) -> Void

    /// What the machine holds right now.
    public struct Snapshot: Sendable, Equatable {
        /// Claimed here and not yet finished, per target.
        public var inFlight: [String: Int] = [:]
        /// Claimed and waiting for a sender.
        public var queued: [String] = []
        /// `tick()`s so far, and how many of them claimed something.
        public var ticks = 0
        public var claimingTicks = 0
        public var total: Int { inFlight.values.reduce(0, +) }
    }

    public let channel: OutboxChannel
    let outbox: OutboxRepository
    public let policy: Policy
    let runtime: Runtime
    let observe: Observer

    private struct State {
        var snapshot = Snapshot()
        var queue: [ClaimedDelivery] = []
        var lastExpiry: Double? = nil
        var lastPurge: Double? = nil
    }
    private let state = Mutex(State())

    public init(channel: OutboxChannel, outbox: OutboxRepository, policy: Policy, runtime: Runtime, observe: @escaping Observer = { _, _ in }) {
        self.channel = channel
        self.outbox = outbox
        self.policy = policy
        self.runtime = runtime
        self.observe = observe
    }

    public var snapshot: Snapshot { state.withLock { $0.snapshot } }

    // MARK: Claiming

    /// One round: claims as many deliveries due now as there are free senders (targets at their
    /// limit excluded) and queues them for `next()`; expires and purges when that is due. Returns
    /// what it queued (empty: nothing due, no free sender, or the database unreachable).
    @discardableResult
    public func tick() -> [ClaimedDelivery] {
        let (free, busy) = state.withLock { s -> (Int, [String]) in
            (policy.senders - s.snapshot.total, s.snapshot.inFlight.filter { $0.value >= policy.perTarget }.map(\.key))
        }
        var accepted: [ClaimedDelivery] = []
        if free > 0, let claimed = try? outbox.claim(channel: channel, limit: free, leaseSeconds: policy.leaseSeconds,
                                                     leaseId: runtime.identifier(), excluding: busy, now: runtime.now()) {
            var extra: [ClaimedDelivery] = []
            state.withLock { s in
                for d in claimed {
                    // One batch may hold several deliveries for one target: past its limit they go back.
                    if s.snapshot.inFlight[d.target, default: 0] >= policy.perTarget { extra.append(d); continue }
                    s.snapshot.inFlight[d.target, default: 0] += 1
                    s.queue.append(d)
                    accepted.append(d)
                }
            }
            for d in extra { try? outbox.release(d) }
        }
        housekeeping()
        state.withLock { s in
            s.snapshot.ticks += 1
            if !accepted.isEmpty { s.snapshot.claimingTicks += 1 }
            s.snapshot.queued = s.queue.map(\.eventId)
        }
        return accepted
    }

    private func housekeeping() {
        let t = runtime.uptime()
        let (expire, purge) = state.withLock { s -> (Bool, Bool) in
            let expire = s.lastExpiry.map { t - $0 >= policy.expiryInterval } ?? true
            let purge = s.lastPurge.map { t - $0 >= policy.purgeInterval } ?? true
            if expire { s.lastExpiry = t }
            if purge { s.lastPurge = t }
            return (expire, purge)
        }
        let now = runtime.now()
        if expire { _ = try? outbox.expire(now: now) }
        if purge { _ = try? outbox.purgeFinished(writtenBefore: now.addingTimeInterval(-policy.keepFinished)) }
    }

    /// The next queued claim, for a sender; nil when none is queued.
    public func next() -> ClaimedDelivery? {
        state.withLock { s in
            guard !s.queue.isEmpty else { return nil }
            let d = s.queue.removeFirst()
            s.snapshot.queued = s.queue.map(\.eventId)
            return d
        }
    }

    // MARK: Outcomes

    /// What `outcome` comes to now: a retry after the backoff, unless that falls on or after the
    /// delivery's `expiresAt` (its age limit) — then it is given up.
    public func decide(_ d: ClaimedDelivery, _ outcome: Outcome) -> Decision {
        switch outcome {
        case .delivered(let status): return .delivered(statusCode: status)
        case .giveUp(let status, let error): return .giveUp(statusCode: status, error: error)
        case .retry(let status, let error):
            let next = runtime.now().addingTimeInterval(backoff(attempt: d.attempt))
            return next >= d.expiresAt ? .giveUp(statusCode: status, error: error) : .retry(at: next, statusCode: status, error: error)
        }
    }

    /// Writes `decision` under `d`'s lease, once.
    public func record(_ d: ClaimedDelivery, _ decision: Decision) -> Recording {
        let written: Bool
        do {
            switch decision {
            case .delivered(let status): written = try outbox.delivered(d, statusCode: status, now: runtime.now())
            case .retry(let next, let status, let error): written = try outbox.retry(d, statusCode: status, error: error, at: next)
            case .giveUp(let status, let error): written = try outbox.failed(d, statusCode: status, error: error, now: runtime.now())
            }
        } catch {
            return .unreachable
        }
        observe(d, decision.label)
        return written ? .recorded : .leaseLost
    }

    /// True once `d`'s lease has run out: its outcome is no longer this claim's to record.
    public func leaseEnded(_ d: ClaimedDelivery) -> Bool { runtime.now() >= d.leasedUntil }

    /// `d` is finished here (recorded, or its lease ran out): its sender and its target's slot are free.
    public func done(_ d: ClaimedDelivery) {
        state.withLock { s in
            s.snapshot.inFlight[d.target, default: 1] -= 1
            if s.snapshot.inFlight[d.target] == 0 { s.snapshot.inFlight[d.target] = nil }
        }
    }

    /// `decide`, `record` once and `done`: one attempt's outcome, end to end (a test's sender).
    @discardableResult
    public func complete(_ d: ClaimedDelivery, _ outcome: Outcome) -> (Decision, Recording) {
        let decision = decide(d, outcome)
        let recording = record(d, decision)
        done(d)
        return (decision, recording)
    }

    /// Seconds before retry number `attempt` + 1: exponential, capped, with jitter in [0.5, 1].
    public func backoff(attempt: Int) -> Double {
        let exponential = min(policy.retryCap, policy.retryBase * pow(2, Double(max(0, attempt - 1))))
        let bytes = runtime.random(2)
        let fraction = Double(UInt16(bytes[0]) << 8 | UInt16(bytes[1])) / 65535
        return exponential * (0.5 + 0.5 * fraction)
    }
}
