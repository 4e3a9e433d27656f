import Foundation
import Storage

/// How one outbox channel's consumer in this instance behaves (`LATCHKEY_OUTBOX_*`, the channel's retry base).
public struct OutboxPolicy: Sendable, Equatable {
    public var senders: Int
    public var perTarget: Int
    public var leaseSeconds: Double
    public var retryBase: Double
    public var retryCap: Double = 3600
    /// How often an idle worker looks for due deliveries: the safety net under the `latchkey_outbox`
    /// notifications (no LISTEN behind a pooler without a direct URL, one lost while it reconnected).
    public var pollInterval: Double = 0.25
    /// How often pending deliveries past their age limit are expired, and finished events purged.
    public var expiryInterval: Double = 10
    public var purgeInterval: Double = 3600
    /// Finished events are kept this long (the deliveries API shows them).
    public var keepFinished: Double = 7 * 86400
    /// The pause before recording an outcome again while the database is unreachable.
    public var recordPause: Double = 0.5

    public init(senders: Int, perTarget: Int, leaseSeconds: Double, retryBase: Double) {
        self.senders = senders
        self.perTarget = perTarget
        self.leaseSeconds = leaseSeconds
        self.retryBase = retryBase
    }
}

/// What one attempt came to (the channel's `deliver` says).
public enum OutboxOutcome: Sendable, Equatable {
    case delivered(statusCode: Int?)
    /// Retried later (backoff), or given up when the age limit is reached.
    case retry(statusCode: Int?, error: String)
    /// Never retried (e.g. the target no longer exists).
    case giveUp(statusCode: Int?, error: String)
}

/// What is recorded for an attempt: decided by the state machine, written as it is.
public enum OutboxDecision: Sendable, Equatable {
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
public enum OutboxRecording: Sendable, Equatable {
    case recorded
    /// The lease was no longer this claim's (it ran out and the delivery was claimed again, or the
    /// endpoint was deleted): nothing was written.
    case leaseLost
    /// The database could not be reached: tried again while the lease lasts.
    case unreachable
}

/// The decisions of one outbox channel's consumer in this instance, as a value: events go in
/// (`start`, `wakeUp`, `timerFired`, `claimed`, `sent`, `recorded`, `stop`, …) and actions come
/// out (`claim`, `deliver`, `record`, `release`, `expire`, `purge`, `sleep(until:)`, `stopped`),
/// with no I/O, no threads and no locks (STYLE §11, "workers are state machines over a clock").
/// `OutboxWorker` feeds it and performs its actions; a test feeds it on a clock it steps.
///
/// - Claims: one claim at a time, for as many deliveries as there are free senders, never more than
///   `perTarget` in flight to one target (a webhook endpoint), so a target that hangs until its
///   timeout holds `perTarget` senders, never all of them. A batch's deliveries past a target's
///   limit are released. A claim is made when something may be due: at start, on a wake-up (a
///   `latchkey_outbox` notification: an event was written on some instance), at each poll, and after
///   a claim that came back full. A wake-up while every sender is busy is remembered: the claim is
///   made when one comes free.
/// - Retries: `retryBase · 2^(attempt−1)` seconds, capped at `retryCap`, times a factor in [0.5, 1]
///   (the `jitter` that `sent` carries, from `Runtime.random`).
/// - Giving up: a retry that would fall on or after the delivery's `expiresAt` (the event's
///   `LATCHKEY_WEBHOOK_MAX_AGE`) is recorded `failed` instead; so is an outcome that is never
///   retried. Every `expiryInterval`, pending deliveries nobody claimed before their limit expire.
/// - Leases: a claim is this instance's until `leasedUntil`; the outcome is recorded under it. An
///   outcome the database could not take is recorded again every `recordPause` until the lease
///   runs out; then the delivery is left to come back (here or anywhere).
/// - Stop: no claim after it; deliveries in flight are still sent and recorded, then `stopped`.
///
/// Every instant is `clock.now`, and goes to SQL as its `date` (a bind): the decisions and the
/// queries read one clock (Runtime.swift, "One clock"). A clock that steps back is no reason to
/// wait: a cadence whose last turn lies ahead of `now` is due.
public struct OutboxStateMachine<C: Clock>: Sendable where C: Sendable, C.Instant: WallClockInstant {
    /// What the owner does next, in order.
    public enum Action: Sendable, Equatable {
        /// Claim deliveries (`OutboxRepository.claim`) and report with `claimed` or `claimFailed`.
        case claim(Claim)
        /// Hand these claims back untried (`OutboxRepository.release`).
        case release([ClaimedDelivery])
        /// Send this one on a sender (outside any transaction) and report with `sent`.
        case deliver(ClaimedDelivery)
        /// Write this decision under the claim's lease and report with `recorded`.
        case record(ClaimedDelivery, OutboxDecision)
        /// Expire pending deliveries past their age limit (`OutboxRepository.expire`).
        case expire(now: Date)
        /// Delete finished events written before this (`OutboxRepository.purgeFinished`).
        case purge(writtenBefore: Date)
        /// Nothing more until a report, a wake-up or this instant (then `timerFired`).
        case sleep(until: C.Instant)
        /// Stopped: nothing is in flight and nothing more will be asked.
        case stopped
    }

    /// One claim's parameters, every instant from the machine's clock.
    public struct Claim: Sendable, Equatable {
        public let limit: Int
        /// Targets at their `perTarget` limit (sorted).
        public let excluding: [String]
        public let now: Date
        public let leaseSeconds: Double

        public init(limit: Int, excluding: [String], now: Date, leaseSeconds: Double) {
            self.limit = limit
            self.excluding = excluding
            self.now = now
            self.leaseSeconds = leaseSeconds
        }
    }

    private enum Phase: Sendable, Equatable { case idle, running, stopping, stopped }

    /// A turn taken every `every`: due at first, then `every` after the last turn (or as soon as the
    /// last turn lies ahead: the clock went back).
    private struct Cadence: Sendable {
        let every: Swift.Duration
        var last: C.Instant? = nil

        func isDue(_ now: C.Instant) -> Bool {
            guard let last else { return true }
            return now < last || now >= last.advanced(by: every)
        }

        /// When the next turn is due, seen from `now` (at once when it is due already).
        func next(_ now: C.Instant) -> C.Instant {
            guard let last, now >= last else { return now }
            return last.advanced(by: every)
        }
    }

    /// An outcome waiting to be recorded again (the database was unreachable).
    private struct Paused: Sendable {
        let delivery: ClaimedDelivery
        let decision: OutboxDecision
        let at: C.Instant
    }

    /// What the machine has counted, for metrics and tests.
    public struct Counts: Sendable, Equatable {
        /// Wake-ups received (notifications, reconnects).
        public var wakeUps = 0
        /// Claims made, and how many of them claimed something.
        public var claims = 0
        public var claimingClaims = 0
    }

    public let policy: OutboxPolicy
    public let clock: C
    private var phase = Phase.idle
    /// The claim under way, if any (one at a time).
    private var claiming: Claim? = nil
    /// Something may be due that nobody has claimed yet.
    private var wanted = false
    private var perTarget: [String: Int] = [:]
    private var paused: [Paused] = []
    private var poll: Cadence
    private var expiry: Cadence
    private var purge: Cadence
    public private(set) var counts = Counts()

    public init(policy: OutboxPolicy, clock: C) {
        self.policy = policy
        self.clock = clock
        poll = Cadence(every: .seconds(policy.pollInterval))
        expiry = Cadence(every: .seconds(policy.expiryInterval))
        purge = Cadence(every: .seconds(policy.purgeInterval))
    }

    /// Deliveries claimed here and not finished, per target.
    public var inFlight: [String: Int] { perTarget }
    public var total: Int { perTarget.values.reduce(0, +) }
    public var isStopped: Bool { phase == .stopped }

    // MARK: Events

    /// Begins claiming (nothing when `senders` is 0: this instance only writes). Again after `stopped`.
    public mutating func start() -> [Action] {
        guard policy.senders > 0, phase == .idle || phase == .stopped else { return [] }
        phase = .running
        wanted = true
        poll.last = clock.now
        return proceed()
    }

    /// Something may be due now: a `latchkey_outbox` notification for this channel (an event was
    /// written on some instance), or the LISTEN connection came back (one may have been missed).
    public mutating func wakeUp() -> [Action] {
        counts.wakeUps += 1
        guard phase == .running else { return [] }
        wanted = true
        return proceed()
    }

    /// The instant of the last `sleep(until:)` came (or a wait ended without a report).
    public mutating func timerFired() -> [Action] {
        guard phase == .running || phase == .stopping else { return [] }
        let now = clock.now
        if phase == .running, poll.isDue(now) {
            poll.last = now
            wanted = true
        }
        return proceed()
    }

    /// The claim came back with `batch` (possibly empty).
    public mutating func claimed(_ batch: [ClaimedDelivery]) -> [Action] {
        guard let claim = claiming else { return [] }
        claiming = nil
        counts.claims += 1
        var actions: [Action] = []
        var extra: [ClaimedDelivery] = []
        for d in batch {
            // One batch may hold several deliveries for one target: past its limit they go back.
            if perTarget[d.target, default: 0] >= policy.perTarget { extra.append(d); continue }
            perTarget[d.target, default: 0] += 1
            actions.append(.deliver(d))
        }
        if !extra.isEmpty { actions.append(.release(extra)) }
        if actions.contains(where: { if case .deliver = $0 { true } else { false } }) { counts.claimingClaims += 1 }
        // A full batch: there may be more due. Look again as soon as a sender is free.
        if batch.count >= claim.limit { wanted = true }
        return actions + proceed()
    }

    /// The claim failed (the database unreachable): the next poll tries again.
    public mutating func claimFailed() -> [Action] {
        guard claiming != nil else { return [] }
        claiming = nil
        counts.claims += 1
        wanted = false
        return proceed()
    }

    /// The send of `d` came to `outcome`; `jitter` in [0, 1] places a retry within its backoff.
    public mutating func sent(_ d: ClaimedDelivery, _ outcome: OutboxOutcome, jitter: Double) -> [Action] {
        guard perTarget[d.target] != nil else { return [] }
        return [.record(d, decide(d, outcome, jitter: jitter))] + proceed()
    }

    /// Recording `decision` for `d` came to `recording`.
    public mutating func recorded(_ d: ClaimedDelivery, _ decision: OutboxDecision, _ recording: OutboxRecording) -> [Action] {
        guard perTarget[d.target] != nil else { return [] }
        let now = clock.now
        if recording == .unreachable, now.date < d.leasedUntil {
            paused.append(Paused(delivery: d, decision: decision, at: now.advanced(by: .seconds(policy.recordPause))))
        } else {
            finish(d)
        }
        return proceed()
    }

    /// No more claims; what is in flight is still sent and recorded, then `stopped`.
    public mutating func stop() -> [Action] {
        switch phase {
        case .idle:
            phase = .stopped
            return [.stopped]
        case .running:
            phase = .stopping
            wanted = false
            return proceed()
        case .stopping, .stopped:
            return []
        }
    }

    // MARK: Decisions

    /// What `outcome` comes to now: a retry after the backoff, unless that falls on or after the
    /// delivery's `expiresAt` (its age limit) — then it is given up.
    public func decide(_ d: ClaimedDelivery, _ outcome: OutboxOutcome, jitter: Double) -> OutboxDecision {
        switch outcome {
        case .delivered(let status): return .delivered(statusCode: status)
        case .giveUp(let status, let error): return .giveUp(statusCode: status, error: error)
        case .retry(let status, let error):
            let next = clock.now.date.addingTimeInterval(backoff(attempt: d.attempt, jitter: jitter))
            return next >= d.expiresAt ? .giveUp(statusCode: status, error: error) : .retry(at: next, statusCode: status, error: error)
        }
    }

    /// Seconds before retry number `attempt` + 1: `retryBase · 2^(attempt−1)`, capped at `retryCap`,
    /// times `0.5 + 0.5 · jitter` (jitter clamped to [0, 1]).
    public func backoff(attempt: Int, jitter: Double) -> Double {
        let exponential = min(policy.retryCap, policy.retryBase * pow(2, Double(max(0, attempt - 1))))
        return exponential * (0.5 + 0.5 * min(1, max(0, jitter)))
    }

    // MARK: Moving on

    private mutating func finish(_ d: ClaimedDelivery) {
        perTarget[d.target, default: 1] -= 1
        if perTarget[d.target] == 0 { perTarget[d.target] = nil }
    }

    /// After every event: the outcomes due to be recorded again, housekeeping, a claim when
    /// something may be due and a sender is free, and then the wait (or `stopped`).
    private mutating func proceed() -> [Action] {
        let now = clock.now
        var actions: [Action] = []
        for p in paused where p.at <= now {
            if now.date >= p.delivery.leasedUntil { finish(p.delivery) } else { actions.append(.record(p.delivery, p.decision)) }
        }
        paused.removeAll { $0.at <= now }
        if phase == .running, claiming == nil {
            if expiry.isDue(now) {
                expiry.last = now
                actions.append(.expire(now: now.date))
            }
            if purge.isDue(now) {
                purge.last = now
                actions.append(.purge(writtenBefore: now.date.addingTimeInterval(-policy.keepFinished)))
            }
            let free = policy.senders - total
            if wanted, free > 0 {
                wanted = false
                let claim = Claim(limit: free, excluding: perTarget.filter { $0.value >= policy.perTarget }.map(\.key).sorted(),
                                  now: now.date, leaseSeconds: policy.leaseSeconds)
                claiming = claim
                actions.append(.claim(claim))
            }
        }
        if phase == .stopping, claiming == nil, total == 0 {
            phase = .stopped
            return actions + [.stopped]
        }
        if claiming == nil { actions.append(.sleep(until: deadline(now))) }
        return actions
    }

    /// The next instant something is due without a report: the poll, housekeeping, a paused record.
    private func deadline(_ now: C.Instant) -> C.Instant {
        var candidates = paused.map(\.at)
        if phase == .running { candidates += [poll.next(now), expiry.next(now), purge.next(now)] }
        return candidates.min() ?? now.advanced(by: .seconds(policy.pollInterval))
    }
}
