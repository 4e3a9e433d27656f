import Dispatch
import Foundation
import Storage
import Synchronization

/// Runs one outbox channel's consumer in this instance: performs the actions of an
/// `OutboxStateMachine`, which makes every decision (what to claim, retries, giving up, leases).
/// One dispatcher thread owns the machine: it feeds it the reports in its mailbox — a wake-up
/// (`wakeUp()`: a `latchkey_outbox` notification, on any instance's write), a send or a record
/// finished, `stop()` — or `timerFired` when the machine's `sleep(until:)` instant comes, and
/// performs what comes back: claims, releases and housekeeping on its own thread, sends and
/// records on a fixed set of sender threads (outside any transaction). Every instance runs one per
/// channel; they never hold one delivery at once (the lease outlasts a send), and a killed
/// instance's claims come back when their leases end.
///
/// A consumer for another channel (mail) builds one of these with its own `deliver`.
public final class OutboxWorker: Sendable {
    public typealias Outcome = OutboxOutcome
    public typealias Policy = OutboxPolicy
    /// After an outcome was written (or found its lease gone): `delivered`, `retry` or `failed`, for metrics.
    public typealias Observer = @Sendable (_ delivery: ClaimedDelivery, _ outcome: String) -> Void
    typealias Machine = OutboxStateMachine<OutboxClock>

    public let channel: OutboxChannel
    public let policy: Policy
    let outbox: OutboxRepository
    let runtime: Runtime
    let clock: OutboxClock
    let deliver: @Sendable (ClaimedDelivery) -> Outcome
    let observe: Observer

    /// Touched by the dispatcher thread only (and read by `counts`).
    private let machine: Mutex<Machine>

    /// Reports for the dispatcher, and its doorbell.
    private enum Report: Sendable {
        case wakeUp
        case sent(ClaimedDelivery, Outcome, jitter: Double)
        case recorded(ClaimedDelivery, OutboxDecision, OutboxRecording)
        case stop
    }
    private let mailbox = Mutex<[Report]>([])
    private let bell = DispatchSemaphore(value: 0)

    /// Work for the senders: one permit per job (and one per sender when they end).
    private enum Job: Sendable {
        case deliver(ClaimedDelivery)
        case record(ClaimedDelivery, OutboxDecision)
    }
    private let jobs = Mutex<[Job]>([])
    private let work = DispatchSemaphore(value: 0)

    private struct Flags {
        var running = false
        var sendersEnding = false
    }
    private let flags = Mutex(Flags())

    public init(channel: OutboxChannel, outbox: OutboxRepository, policy: Policy, runtime: Runtime,
                deliver: @escaping @Sendable (ClaimedDelivery) -> Outcome, observe: @escaping Observer = { _, _ in }) {
        self.channel = channel
        self.policy = policy
        self.outbox = outbox
        self.runtime = runtime
        clock = OutboxClock(runtime)
        self.deliver = deliver
        self.observe = observe
        machine = Mutex(Machine(policy: policy, clock: clock))
    }

    /// Starts the dispatcher and the senders (nothing when `senders` is 0: this instance only writes).
    public func start() {
        guard policy.senders > 0 else { return }
        let begin = flags.withLock { f -> Bool in
            guard !f.running else { return false }
            f.running = true
            f.sendersEnding = false
            return true
        }
        guard begin else { return }
        mailbox.withLock { $0.removeAll() }
        let first = machine.withLock { $0.start() }
        let dispatcher = Thread { [self] in dispatch(first) }
        dispatcher.name = "latchkey-outbox-\(channel.rawValue)"
        dispatcher.start()
        for i in 0..<policy.senders {
            let sender = Thread { [self] in send() }
            sender.name = "latchkey-outbox-\(channel.rawValue)-\(i)"
            sender.start()
        }
    }

    /// Stops claiming; claims already made are still sent and recorded, then the threads end.
    public func stop() { post(.stop) }

    /// Something may be due: look now, not at the next poll.
    public func wakeUp() { post(.wakeUp) }

    /// What the machine counted (wake-ups received, claims made).
    public var counts: OutboxStateMachine<OutboxClock>.Counts { machine.withLock { $0.counts } }

    /// Deliveries claimed here and not recorded yet.
    public var inFlight: Int { machine.withLock { $0.total } }

    private func post(_ report: Report) {
        let running = flags.withLock { $0.running }
        if !running {
            // Not started: a wake-up is only counted, a stop needs nothing.
            if case .wakeUp = report { machine.withLock { _ = $0.wakeUp() } }
            return
        }
        mailbox.withLock { $0.append(report) }
        bell.signal()
    }

    // MARK: Dispatcher

    private func dispatch(_ first: [Machine.Action]) {
        var pending = first
        var deadline: OutboxClock.Instant? = nil
        var stopped = false
        while !stopped {
            while !pending.isEmpty {
                let action = pending.removeFirst()
                switch action {
                case .sleep(let until): deadline = until
                case .stopped: stopped = true
                default: pending += perform(action)
                }
            }
            if stopped { break }
            // A timed wait is not a clock reading: the machine decides on its own clock what is due.
            let seconds = deadline.map { clock.now.duration(to: $0).seconds } ?? policy.pollInterval
            let rang = bell.wait(timeout: .now() + max(0.001, min(seconds, 3600))) == .success
            // Every report rings once, but one ring may find several reports, or none left (taken
            // with an earlier ring): the mailbox is what counts.
            let reports: [Report] = rang ? mailbox.withLock { m in defer { m.removeAll() }; return m } : []
            for report in reports { pending += feed(report) }
            // The instant came (even while reports kept the bell ringing).
            if !rang || deadline.map({ clock.now >= $0 }) ?? false {
                pending += machine.withLock { $0.timerFired() }
            }
        }
        flags.withLock { f in
            f.running = false
            f.sendersEnding = true
        }
        for _ in 0..<policy.senders { work.signal() }
    }

    private func feed(_ report: Report) -> [Machine.Action] {
        machine.withLock { (m: inout Machine) -> [Machine.Action] in
            switch report {
            case .wakeUp: return m.wakeUp()
            case .sent(let d, let outcome, let jitter): return m.sent(d, outcome, jitter: jitter)
            case .recorded(let d, let decision, let recording): return m.recorded(d, decision, recording)
            case .stop: return m.stop()
            }
        }
    }

    /// Performs one action on the dispatcher's thread (or hands it to a sender); returns what the
    /// machine answers to its result.
    private func perform(_ action: Machine.Action) -> [Machine.Action] {
        switch action {
        case .claim(let c):
            do {
                let batch = try outbox.claim(channel: channel, limit: c.limit, leaseSeconds: c.leaseSeconds, leaseId: runtime.identifier(),
                                             excluding: c.excluding, now: c.now)
                return machine.withLock { $0.claimed(batch) }
            } catch {
                return machine.withLock { $0.claimFailed() }
            }
        case .release(let claims):
            // A release that fails leaves the claim to come back when its lease runs out.
            for d in claims { _ = try? outbox.release(d) }
        case .deliver(let d):
            enqueue(.deliver(d))
        case .record(let d, let decision):
            enqueue(.record(d, decision))
        case .expire(let now):
            // Housekeeping: what fails now is done at its next turn.
            _ = try? outbox.expire(now: now)
        case .purge(let cutoff):
            _ = try? outbox.purgeFinished(writtenBefore: cutoff)
        case .sleep, .stopped:
            break
        }
        return []
    }

    private func enqueue(_ job: Job) {
        jobs.withLock { $0.append(job) }
        work.signal()
    }

    // MARK: Senders

    private func send() {
        while true {
            work.wait()
            guard let job = jobs.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else {
                if flags.withLock({ $0.sendersEnding }) { return }
                continue
            }
            switch job {
            case .deliver(let d):
                let outcome = deliver(d)
                post(.sent(d, outcome, jitter: jitter()))
            case .record(let d, let decision):
                post(.recorded(d, decision, record(d, decision)))
            }
        }
    }

    /// Writes `decision` under `d`'s lease, once.
    private func record(_ d: ClaimedDelivery, _ decision: OutboxDecision) -> OutboxRecording {
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

    /// A fraction in [0, 1] from `Runtime.random` (two bytes): where a retry falls within its backoff.
    private func jitter() -> Double {
        let bytes = runtime.random(2)
        return Double(UInt16(bytes[0]) << 8 | UInt16(bytes[1])) / 65535
    }
}
