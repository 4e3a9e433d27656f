import Foundation
import JSON
import LatchkeyServer
import Storage
import Synchronization
import Testing

/// A clock the test steps by hand, for `OutboxStateMachine` alone: its instants are wall-clock
/// instants (the outbox states them in SQL), and nothing moves unless the test says so.
struct SteppedClock: Clock {
    typealias Instant = OutboxClock.Instant
    private final class Reading: Sendable { let date: Mutex<Date>; init(_ d: Date) { date = Mutex(d) } }
    private let reading: Reading

    /// A whole second, so that instants are exact.
    init(start: Date = Date(timeIntervalSince1970: 1_700_000_000)) { reading = Reading(start) }

    var now: Instant { Instant(date: reading.date.withLock { $0 }) }
    var minimumResolution: Duration { .microseconds(1) }
    func sleep(until deadline: Instant, tolerance: Duration?) async throws {}

    func advance(_ seconds: Double) { reading.date.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

/// `OutboxStateMachine` on its own, as postgres-nio tests its connection state machine: events in,
/// actions out, on a clock the test steps. No database, no threads, nothing timed: each test feeds
/// one sequence and asserts the exact actions that come back.
@Suite("Outbox state machine: events in, actions out")
struct OutboxStateMachineTests {
    typealias Machine = OutboxStateMachine<SteppedClock>
    typealias Action = Machine.Action

    let clock = SteppedClock()
    /// The stepped clock's reading now.
    var now: Date { clock.now.date }

    func machine(senders: Int = 4, perTarget: Int = 2, lease: Double = 30, retryBase: Double = 5,
                 configure: (inout OutboxPolicy) -> Void = { _ in }) -> Machine {
        var policy = OutboxPolicy(senders: senders, perTarget: perTarget, leaseSeconds: lease, retryBase: retryBase)
        configure(&policy)
        return Machine(policy: policy, clock: clock)
    }

    /// A claimed delivery as the repository returns it, its lease and age limit on the test's clock.
    func delivery(_ id: String, target: String = "wh_a", attempt: Int = 1, lease: Double = 30, maxAge: Double = 259_200,
                  createdAt: Date? = nil) -> ClaimedDelivery {
        let created = createdAt ?? clock.now.date
        return ClaimedDelivery(eventId: id, type: .userCreated, accountId: "acct", data: .object([]), createdAt: created,
                               channel: .webhook, target: target, attempt: attempt, leaseId: "lease_\(id)_\(attempt)",
                               leasedUntil: clock.now.date.addingTimeInterval(lease), expiresAt: created.addingTimeInterval(maxAge))
    }

    func claim(_ limit: Int, excluding: [String] = [], lease: Double = 30) -> Action {
        .claim(Machine.Claim(limit: limit, excluding: excluding, now: clock.now.date, leaseSeconds: lease))
    }

    func sleep(_ seconds: Double) -> Action { .sleep(until: clock.now.advanced(by: .seconds(seconds))) }

    // MARK: Claims

    @Test("start: housekeeping at once, then one claim for every free sender; nothing at all with 0 senders")
    func start() {
        var m = machine(senders: 4)
        #expect(m.start() == [.expire(now: now), .purge(writtenBefore: now.addingTimeInterval(-7 * 86400)), claim(4)])
        #expect(m.start() == [], "already running")
        var writer = machine(senders: 0)
        #expect(writer.start() == [])
        #expect(writer.wakeUp() == [])
    }

    @Test("one claim at a time: a wake-up during a claim is remembered and claims again as soon as it returns")
    func wakeUpWhileClaiming() {
        var m = machine(senders: 2)
        _ = m.start()
        #expect(m.wakeUp() == [], "a claim is under way: nothing new now")
        #expect(m.claimed([]) == [claim(2)], "nothing was due then, but the wake-up came after the claim began")
        #expect(m.claimed([]) == [sleep(0.25)], "nothing due, no wake-up: wait for the poll")
        #expect(m.counts.wakeUps == 1 && m.counts.claims == 2 && m.counts.claimingClaims == 0)
    }

    @Test("a wake-up while delivering claims for the free senders only; with none free, it waits for one")
    func wakeUpWhileDelivering() {
        var m = machine(senders: 2, perTarget: 2)
        _ = m.start()
        let a = delivery("evt_a")
        #expect(m.claimed([a]) == [.deliver(a), sleep(0.25)], "one of two: nothing more was due")
        #expect(m.wakeUp() == [claim(1)], "an event was written somewhere: the free sender claims")
        let b = delivery("evt_b", target: "wh_b")
        #expect(m.claimed([b]) == [.deliver(b), sleep(0.25)], "a full batch, but no sender is free to look again")
        #expect(m.total == 2)
        #expect(m.wakeUp() == [sleep(0.25)], "both senders busy: no claim now")
        #expect(m.sent(a, .delivered(statusCode: 204), jitter: 1) == [.record(a, .delivered(statusCode: 204)), sleep(0.25)])
        #expect(m.recorded(a, .delivered(statusCode: 204), .recorded) == [claim(1)], "the freed sender claims what woke it")
        #expect(m.claimed([]) == [sleep(0.25)])
        #expect(m.sent(b, .delivered(statusCode: 200), jitter: 1) == [.record(b, .delivered(statusCode: 200)), sleep(0.25)])
        #expect(m.recorded(b, .delivered(statusCode: 200), .recorded) == [sleep(0.25)],
                "no wake-up, the last batch not full: a freed sender waits for the poll")
        #expect(m.total == 0 && m.counts.wakeUps == 2)
    }

    @Test("a batch past a target's limit: the extra ones are released; a full batch looks again for the free senders")
    func perTargetLimit() {
        var m = machine(senders: 3, perTarget: 1)
        _ = m.start()
        let a1 = delivery("evt_1"), a2 = delivery("evt_2"), b1 = delivery("evt_3", target: "wh_b")
        #expect(m.claimed([a1, a2, b1]) == [.deliver(a1), .deliver(b1), .release([a2]), claim(1, excluding: ["wh_a", "wh_b"])])
        #expect(m.inFlight == ["wh_a": 1, "wh_b": 1])
        #expect(m.claimed([]) == [sleep(0.25)])
    }

    @Test("the poll is the safety net: a claim every poll interval, housekeeping on its own cadence")
    func pollAndHousekeeping() {
        var m = machine(senders: 1) { $0.pollInterval = 2 }
        _ = m.start()
        #expect(m.claimed([]) == [sleep(2)])
        clock.advance(1.75)
        #expect(m.timerFired() == [sleep(0.25)], "not due yet")
        clock.advance(0.25)
        #expect(m.timerFired() == [claim(1)])
        #expect(m.claimed([]) == [sleep(2)])
        clock.advance(8)
        #expect(m.timerFired() == [.expire(now: clock.now.date), claim(1)], "ten seconds since the first expiry")
        #expect(m.claimed([]) == [sleep(2)])
        clock.advance(3600)
        #expect(m.timerFired() == [.expire(now: now), .purge(writtenBefore: now.addingTimeInterval(-7 * 86400)), claim(1)])
    }

    @Test("a clock that steps back does not stall the poll: every cadence is due at once")
    func clockStepsBack() {
        var m = machine(senders: 1)
        _ = m.start()
        _ = m.claimed([])
        clock.advance(-3600)
        #expect(m.timerFired() == [.expire(now: now), .purge(writtenBefore: now.addingTimeInterval(-7 * 86400)), claim(1)])
        #expect(m.claimed([]) == [sleep(0.25)])
    }

    @Test("a claim that fails (database unreachable) waits for the next poll, even with a wake-up pending")
    func claimFails() {
        var m = machine(senders: 1)
        _ = m.start()
        _ = m.wakeUp()
        #expect(m.claimFailed() == [sleep(0.25)])
        clock.advance(0.25)
        #expect(m.timerFired() == [claim(1)])
    }

    // MARK: Retries and giving up (SPEC "Events")

    @Test("backoff: base · 2^(attempt−1), capped at an hour, times 0.5 + 0.5 · jitter")
    func backoff() {
        let m = machine(retryBase: 5)
        #expect((1...4).map { m.backoff(attempt: $0, jitter: 1) } == [5, 10, 20, 40])
        #expect(m.backoff(attempt: 30, jitter: 1) == 3600)
        #expect((1...3).map { m.backoff(attempt: $0, jitter: 0) } == [2.5, 5, 10])
        #expect(m.backoff(attempt: 1, jitter: 0.5) == 3.75)
        // The server's default base: the first retry comes within 10 s whatever the jitter (SPEC).
        let server = machine(retryBase: Configuration().webhookRetryBase)
        #expect(server.backoff(attempt: 1, jitter: 1) <= 10 && server.backoff(attempt: 1, jitter: 0) > 0)
    }

    @Test("retries come later each time and give up once the next would fall on or after LATCHKEY_WEBHOOK_MAX_AGE")
    func retriesThenGiveUp() {
        var m = machine(senders: 1, retryBase: 5)
        _ = m.start()
        let created = now
        var retries: [Date] = []
        var attempt = 1
        var last: OutboxDecision? = nil
        while attempt <= 10 {
            let d = delivery("evt_r", attempt: attempt, maxAge: 60, createdAt: created)
            _ = m.claimed([d])
            let actions = m.sent(d, .retry(statusCode: 503, error: "HTTP 503"), jitter: 1)
            guard case .record(_, let decision) = actions.first else { Issue.record("no record: \(actions)"); return }
            last = decision
            _ = m.recorded(d, decision, .recorded)
            guard case .retry(let at, _, _) = decision else { break }
            retries.append(at)
            clock.advance(at.timeIntervalSince(clock.now.date))  // the poll finds it due then
            _ = m.timerFired()
            attempt += 1
        }
        #expect(retries == [created.addingTimeInterval(5), created.addingTimeInterval(15), created.addingTimeInterval(35)])
        let gaps = zip([created] + retries, retries).map { $1.timeIntervalSince($0) }
        #expect(gaps.first.map { $0 <= 10 } == true && gaps == gaps.sorted() && Set(gaps).count == gaps.count, "growing: \(gaps)")
        #expect(last == .giveUp(statusCode: 503, error: "HTTP 503"), "35 + 40 s is past the 60 s age limit")
        #expect(attempt == 4 && m.total == 0)
    }

    @Test("an outcome that is never retried gives up at once; a delivery is recorded as it went")
    func giveUpAndDelivered() {
        var m = machine(senders: 2)
        _ = m.start()
        let gone = delivery("evt_g"), fine = delivery("evt_f", target: "wh_b")
        _ = m.claimed([gone, fine])
        #expect(m.sent(gone, .giveUp(statusCode: nil, error: "the endpoint was deleted"), jitter: 1).first
                == .record(gone, .giveUp(statusCode: nil, error: "the endpoint was deleted")))
        #expect(m.sent(fine, .delivered(statusCode: 204), jitter: 0).first == .record(fine, .delivered(statusCode: 204)))
    }

    // MARK: Leases

    @Test("an outcome the database cannot take is recorded again every half second until the lease runs out, then dropped")
    func leaseRunsOutWhileUnreachable() {
        // A poll of a minute, so that only the record's pause and the lease set the pace here.
        var m = machine(senders: 1, lease: 2) { $0.pollInterval = 60 }
        _ = m.start()
        let d = delivery("evt_l", lease: 2)
        #expect(m.claimed([d]) == [.deliver(d), sleep(10)], "the next instant due: the expiry's turn")
        let decision = OutboxDecision.delivered(statusCode: 204)
        #expect(m.sent(d, .delivered(statusCode: 204), jitter: 1) == [.record(d, decision), sleep(10)])
        clock.advance(1)
        #expect(m.recorded(d, decision, .unreachable) == [sleep(0.5)])
        clock.advance(0.5)
        #expect(m.timerFired() == [.record(d, decision), sleep(8.5)], "half a second later: once more")
        #expect(m.recorded(d, decision, .unreachable) == [sleep(0.5)])
        #expect(m.total == 1)
        clock.advance(0.5)  // 2 s after the claim: the lease has run out
        #expect(m.timerFired() == [claim(1, lease: 2)], "not this claim's to record any more: its sender is free and claims")
        #expect(m.total == 0)
    }

    @Test("a record that finds its lease gone (claimed again elsewhere) frees the sender and writes nothing more")
    func leaseLost() {
        var m = machine(senders: 1)
        _ = m.start()
        let d = delivery("evt_x")
        _ = m.claimed([d])
        _ = m.sent(d, .delivered(statusCode: 200), jitter: 1)
        #expect(m.recorded(d, .delivered(statusCode: 200), .leaseLost) == [claim(1)], "the full batch's look-again")
        #expect(m.total == 0)
    }

    // MARK: Stop

    @Test("stop: no claim after it, what is in flight is still sent and recorded, then stopped")
    func stopWhileDelivering() {
        var m = machine(senders: 2)
        _ = m.start()
        let d = delivery("evt_s")
        _ = m.claimed([d])
        #expect(m.stop() == [sleep(0.25)])
        #expect(m.wakeUp() == [])
        clock.advance(10)
        #expect(m.timerFired() == [sleep(0.25)], "no poll, no housekeeping")
        #expect(m.sent(d, .delivered(statusCode: 204), jitter: 1) == [.record(d, .delivered(statusCode: 204)), sleep(0.25)])
        #expect(m.recorded(d, .delivered(statusCode: 204), .recorded) == [.stopped])
        #expect(m.isStopped && m.stop() == [])
        #expect(m.start().last == claim(2), "started again")
    }

    @Test("stop during a claim: what it claimed is still sent; stop with nothing in flight, or before start, is at once")
    func stopEdges() {
        var m = machine(senders: 1)
        _ = m.start()
        #expect(m.stop() == [], "the claim is under way")
        let d = delivery("evt_c")
        #expect(m.claimed([d]) == [.deliver(d), sleep(0.25)])
        _ = m.sent(d, .retry(statusCode: 500, error: "HTTP 500"), jitter: 1)
        #expect(m.recorded(d, .retry(at: now.addingTimeInterval(5), statusCode: 500, error: "HTTP 500"), .recorded) == [.stopped])

        var idle = machine()
        #expect(idle.stop() == [.stopped])
        var quiet = machine()
        _ = quiet.start()
        _ = quiet.claimed([])
        #expect(quiet.stop() == [.stopped])
    }
}
