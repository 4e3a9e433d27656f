import Storage
import Synchronization

/// This instance's outbox workers by channel, so that a change that wrote outbox events wakes the
/// workers that send them as soon as its transaction has committed, instead of leaving the events
/// to the next poll. Other instances find them at their own poll. `Services` registers the workers;
/// services reach this through `OutboxEvents.written`.
public final class OutboxWakeUps: Sendable {
    private let workers = Mutex<[OutboxChannel: [OutboxWorker]]>([:])

    public init() {}

    public func register(_ worker: OutboxWorker) {
        workers.withLock { $0[worker.channel, default: []].append(worker) }
    }

    /// The worker registered for `channel` (the first, when several are).
    public func worker(channel: OutboxChannel) -> OutboxWorker? {
        workers.withLock { $0[channel]?.first }
    }

    /// Pokes the workers of every channel `events` fan out to. Call it after the call that stored
    /// them returned: before the commit a poked worker would find nothing and wait for its poll.
    func wake(for events: [OutboxEvent]) {
        var channels: Set<OutboxChannel> = []
        for event in events {
            for fanOut in event.fanOut {
                switch fanOut {
                case .webhooks: channels.insert(OutboxRepository.webhookChannel)
                case .direct(let channel, _): channels.insert(channel)
                }
            }
        }
        wake(channels: channels)
    }

    /// Pokes the workers of `channels`.
    func wake(channels: Set<OutboxChannel>) {
        guard !channels.isEmpty else { return }
        let woken = workers.withLock { w in channels.flatMap { w[$0] ?? [] } }
        for worker in woken { worker.poke() }
    }
}
