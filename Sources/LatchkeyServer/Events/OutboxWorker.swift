import Dispatch
import Foundation
import Storage
import Synchronization

/// Runs one outbox channel's consumer in this instance: the threads around an `OutboxStateMachine`,
/// which makes every decision (what to claim, retries, giving up, leases). A dispatcher thread calls
/// `tick()` whenever it is woken — by `poke()` (this instance just wrote an event: `OutboxWakeUps`),
/// by a sender coming free, or by the poll interval (what other instances wrote) — and a fixed set
/// of sender threads takes the claims, calls `deliver` for each outside any transaction, and records
/// the outcome under the claim's lease. Every instance runs one per channel; they never hold one
/// delivery at once (the lease outlasts a send), and a killed instance's claims come back when their
/// leases end.
///
/// A consumer for another channel (mail) builds one of these with its own `deliver`.
public final class OutboxWorker: Sendable {
    public typealias Outcome = OutboxStateMachine.Outcome
    public typealias Policy = OutboxStateMachine.Policy
    public typealias Observer = OutboxStateMachine.Observer

    public let machine: OutboxStateMachine
    let deliver: @Sendable (ClaimedDelivery) -> Outcome
    public var channel: OutboxChannel { machine.channel }
    var policy: Policy { machine.policy }

    private struct Flags {
        var running = false
        var stopped = false
        var wakeUps = 0
    }
    private let flags = Mutex(Flags())
    /// The dispatcher's doorbell: rung by `poke`, a sender coming free and `stop`. `rung` folds the
    /// rings between two rounds into one.
    private let bell = DispatchSemaphore(value: 0)
    private let rung = Atomic<Bool>(false)
    /// One permit per queued claim (and one per sender at `stop`).
    private let work = DispatchSemaphore(value: 0)

    public init(channel: OutboxChannel, outbox: OutboxRepository, policy: Policy, runtime: Runtime,
                deliver: @escaping @Sendable (ClaimedDelivery) -> Outcome, observe: @escaping Observer = { _, _ in }) {
        machine = OutboxStateMachine(channel: channel, outbox: outbox, policy: policy, runtime: runtime, observe: observe)
        self.deliver = deliver
    }

    /// Starts the dispatcher and the senders (nothing when `senders` is 0: this instance only writes).
    public func start() {
        guard policy.senders > 0 else { return }
        let begin = flags.withLock { f -> Bool in
            guard !f.running else { return false }
            f.running = true
            f.stopped = false
            return true
        }
        guard begin else { return }
        let dispatcher = Thread { [self] in dispatch() }
        dispatcher.name = "latchkey-outbox-\(channel.rawValue)"
        dispatcher.start()
        for i in 0..<policy.senders {
            let sender = Thread { [self] in send() }
            sender.name = "latchkey-outbox-\(channel.rawValue)-\(i)"
            sender.start()
        }
    }

    /// Stops claiming; claims already queued are still sent, and sends under way finish (and record).
    public func stop() {
        let senders = flags.withLock { f -> Int in
            guard f.running else { return 0 }
            f.stopped = true
            f.running = false
            return policy.senders
        }
        ring()
        for _ in 0..<senders { work.signal() }
    }

    /// Something was just written here (its transaction committed): look now, not at the next poll.
    public func poke() {
        flags.withLock { $0.wakeUps += 1 }
        ring()
    }

    /// How many times `poke()` was called: a test's evidence that a write woke this worker.
    public var wakeUps: Int { flags.withLock { $0.wakeUps } }

    /// Deliveries claimed here and not recorded yet.
    public var inFlight: Int { machine.snapshot.total }

    private var isStopped: Bool { flags.withLock { $0.stopped } }

    private func ring() {
        if !rung.exchange(true, ordering: .acquiringAndReleasing) { bell.signal() }
    }

    // MARK: Dispatcher

    private func dispatch() {
        while !isStopped {
            let claimed = machine.tick()
            for _ in claimed { work.signal() }
            // Something was due and there may be more: look again before waiting.
            if !claimed.isEmpty { continue }
            // Idle (or every sender busy): wait for a poke, a sender coming free, stop, or the poll
            // interval. A timed wait is not a clock reading: nothing is decided on it.
            _ = bell.wait(timeout: .now() + policy.pollInterval)
            rung.store(false, ordering: .releasing)
        }
    }

    // MARK: Senders

    private func send() {
        while true {
            work.wait()
            guard let delivery = machine.next() else {
                if isStopped { return }
                continue
            }
            let decision = machine.decide(delivery, deliver(delivery))
            // Recorded under the lease; retried while the database is unreachable (a PostgreSQL
            // restart) for as long as the lease lasts — after that the delivery comes back and is sent again.
            while machine.record(delivery, decision) == .unreachable, !machine.leaseEnded(delivery) {
                Thread.sleep(forTimeInterval: 0.5)
            }
            machine.done(delivery)
            ring()
        }
    }
}
