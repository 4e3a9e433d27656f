import Foundation
import JSON
import LatchkeyServer
import Storage
import Synchronization
import Testing

/// The outbox worker's decisions without its threads: `OutboxStateMachine` over a clock the test
/// steps (ManualClock), against real PostgreSQL (a database of its own, so no other suite's worker
/// takes part). Nothing sleeps and nothing is timed: the clock moves, `tick()` claims, `complete`
/// records, and the rows say what was decided.
@Suite("Outbox state machine on a stepped clock")
struct OutboxStateMachineTests {
    final class Bench: Sendable {
        let scratch: TestDatabase.Scratch
        let database: Database
        let clock = ManualClock()
        /// The two random bytes of the jitter: 0xFFFF is a factor of 1, 0x0000 of 0.5.
        let jitter = Mutex<[UInt8]>([0xFF, 0xFF])
        let observed = Mutex<[String]>([])

        init() throws {
            scratch = try TestDatabase.Scratch()
            database = Database(url: scratch.url, connections: 2)
            _ = try database.migrate()
        }

        deinit { database.shutdown() }

        var runtime: Runtime {
            clock.runtime { [self] n in n == 2 ? self.jitter.withLock { $0 } : Runtime.system.random(n) }
        }

        func machine(senders: Int = 4, perTarget: Int = 2, lease: Double = 30, retryBase: Double = 5) -> OutboxStateMachine {
            let policy = OutboxStateMachine.Policy(senders: senders, perTarget: perTarget, leaseSeconds: lease, retryBase: retryBase)
            return OutboxStateMachine(channel: OutboxRepository.webhookChannel, outbox: database.outbox, policy: policy, runtime: runtime,
                                      observe: { [self] _, outcome in self.observed.withLock { $0.append(outcome) } })
        }

        func endpoint(_ events: [EventType] = [.userCreated]) throws -> String {
            let id = "wh_\(uniqueSuffix())"
            _ = try database.webhooks.create(NewWebhookEndpoint(id: id, url: "https://example.com/\(id)", events: events, sealedSecret: [1, 2, 3]),
                                             audit: AuditRecord(actor: "test", action: "webhook.created", subject: id))
            return id
        }

        /// An event written now by the stepped clock; `maxAge` is LATCHKEY_WEBHOOK_MAX_AGE.
        @discardableResult
        func write(account: String = "acct", maxAge: Int = 86400) throws -> OutboxEvent {
            let event = OutboxEvent(id: "evt_\(uniqueSuffix())", type: .userCreated, accountId: account,
                                    data: .object([("userId", .string(account))]), maxAgeSeconds: maxAge, createdAt: clock.now())
            try database.outbox.append([event])
            return event
        }

        func row(_ target: String, _ eventId: String) throws -> DeliveryRecord? {
            try database.outbox.deliveries(channel: OutboxRepository.webhookChannel, target: target, limit: 100).first { $0.eventId == eventId }
        }
    }

    @Test("retries follow the backoff (base · 2^(attempt−1), capped, jitter in [0.5, 1] from Runtime's randomness)")
    func backoffSchedule() throws {
        let bench = try Bench()
        let m = bench.machine(retryBase: 5)
        #expect((1...4).map { m.backoff(attempt: $0) } == [5, 10, 20, 40], "jitter factor 1")
        #expect(m.backoff(attempt: 30) == 3600, "capped at an hour")
        bench.jitter.withLock { $0 = [0, 0] }
        #expect((1...3).map { m.backoff(attempt: $0) } == [2.5, 5, 10], "jitter factor 0.5")
        bench.jitter.withLock { $0 = [0x80, 0x00] }
        #expect(m.backoff(attempt: 1) == 5 * (0.5 + 0.5 * (32768.0 / 65535)))
    }

    @Test("a failed attempt is retried when the clock reaches its backoff, not a moment before")
    func retryWhenDue() throws {
        let bench = try Bench()
        let target = try bench.endpoint()
        let event = try bench.write()
        let m = bench.machine(retryBase: 5)
        let start = bench.clock.now()

        let first = try #require(m.tick().first)
        #expect(first.eventId == event.id && first.attempt == 1)
        #expect(m.next()?.eventId == event.id)
        let (decision, recording) = m.complete(first, .retry(statusCode: 500, error: "HTTP 500"))
        #expect(decision == .retry(at: start.addingTimeInterval(5), statusCode: 500, error: "HTTP 500") && recording == .recorded)
        #expect(try bench.row(target, event.id)?.nextAttemptAt == start.addingTimeInterval(5))

        // Retry 1 after 5 s, retry 2 after 10 s more: each due exactly then.
        for (attempt, wait) in [(2, 5.0), (3, 10.0)] {
            // Steps of quarter seconds: exact in binary, so the clock lands on the retry time exactly.
            bench.clock.advance(wait - 0.25)
            #expect(m.tick().isEmpty, "attempt \(attempt) is not due yet")
            bench.clock.advance(0.25)
            let again = try #require(m.tick().first)
            #expect(again.eventId == event.id && again.attempt == attempt)
            _ = m.next()
            m.complete(again, .retry(statusCode: nil, error: "connection refused"))
        }
        let row = try #require(try bench.row(target, event.id))
        #expect(row.status == .pending && row.attempts == 3 && row.nextAttemptAt == start.addingTimeInterval(5 + 10 + 20))
        #expect(bench.observed.withLock { $0 } == ["retry", "retry", "retry"])
        #expect(m.snapshot.total == 0 && m.snapshot.queued.isEmpty)
    }

    @Test("a retry that would fall on or after LATCHKEY_WEBHOOK_MAX_AGE gives up instead: failed, never claimed again")
    func giveUpAtMaxAge() throws {
        let bench = try Bench()
        let target = try bench.endpoint()
        let event = try bench.write(maxAge: 15)
        let m = bench.machine(retryBase: 5)

        let first = try #require(m.tick().first)
        _ = m.next()
        #expect(m.complete(first, .retry(statusCode: 503, error: "HTTP 503")).0 == .retry(at: event.createdAt.addingTimeInterval(5),
                                                                                         statusCode: 503, error: "HTTP 503"))
        bench.clock.advance(5)
        let second = try #require(m.tick().first)
        _ = m.next()
        // The next retry would be at 5 + 10 = 15 s: exactly the age limit, so this is the last attempt.
        let (decision, recording) = m.complete(second, .retry(statusCode: 503, error: "HTTP 503"))
        #expect(decision == .giveUp(statusCode: 503, error: "HTTP 503") && recording == .recorded)
        let row = try #require(try bench.row(target, event.id))
        #expect(row.status == .failed && row.attempts == 2 && row.nextAttemptAt == nil && row.lastStatusCode == 503)
        bench.clock.advance(3600)
        #expect(m.tick().isEmpty)
        #expect(bench.observed.withLock { $0 } == ["retry", "failed"])

        // An outcome that is never retried gives up at once, however young the event.
        let young = try bench.write()
        let claimed = try #require(m.tick().first)
        #expect(claimed.eventId == young.id)
        _ = m.next()
        #expect(m.complete(claimed, .giveUp(statusCode: nil, error: "the endpoint was deleted")).0
                == .giveUp(statusCode: nil, error: "the endpoint was deleted"))
        #expect(try bench.row(target, young.id)?.status == .failed)
    }

    @Test("a claim whose lease runs out (its instance died) is claimed again elsewhere; the late outcome is not recorded")
    func leaseExpiryAndReclaim() throws {
        let bench = try Bench()
        let target = try bench.endpoint()
        let event = try bench.write()
        let a = bench.machine(lease: 30), b = bench.machine(lease: 30)

        let held = try #require(a.tick().first)
        #expect(held.leasedUntil == bench.clock.now().addingTimeInterval(30))
        _ = a.next()
        // A is stuck in the send (or killed). B finds nothing while A's lease lasts.
        bench.clock.advance(29.75)
        #expect(b.tick().isEmpty && !a.leaseEnded(held))
        bench.clock.advance(0.25)
        #expect(a.leaseEnded(held))
        let again = try #require(b.tick().first)
        #expect(again.eventId == event.id && again.attempt == 2 && again.leaseId != held.leaseId)
        _ = b.next()

        // A's send finally returns: its lease is gone, nothing is written. B's outcome is recorded.
        #expect(a.complete(held, .delivered(statusCode: 200)).1 == .leaseLost)
        #expect(try bench.row(target, event.id)?.status == .pending)
        #expect(b.complete(again, .delivered(statusCode: 204)).1 == .recorded)
        let row = try #require(try bench.row(target, event.id))
        #expect(row.status == .delivered && row.attempts == 2 && row.lastStatusCode == 204)
        #expect(a.snapshot.total == 0 && b.snapshot.total == 0)
    }

    @Test("claims stop at the free senders and at perTarget per target; a batch's extra deliveries go back uncounted")
    func sendersAndPerTarget() throws {
        let bench = try Bench()
        let busy = try bench.endpoint(), other = try bench.endpoint([.passkeyCreated])
        let events = try (1...3).map { try bench.write(account: "acct-\($0)") }
        let elsewhere = OutboxEvent(id: "evt_\(uniqueSuffix())", type: .passkeyCreated, accountId: "acct-9", data: .object([]),
                                    maxAgeSeconds: 86400, createdAt: bench.clock.now())
        try bench.database.outbox.append([elsewhere])
        let m = bench.machine(senders: 3, perTarget: 1)

        // Three free senders claim the three oldest, all for `busy`: one is kept, two go back.
        let first = m.tick()
        #expect(first.map(\.eventId) == [events[0].id] && first.map(\.target) == [busy])
        #expect(try bench.row(busy, events[1].id)?.attempts == 0, "handed back: the attempt is not counted")
        // `busy` is at its limit: the next round skips it and takes the other target's delivery.
        let second = m.tick()
        #expect(second.map(\.eventId) == [elsewhere.id] && second.map(\.target) == [other])
        #expect(m.snapshot.inFlight == [busy: 1, other: 1] && m.snapshot.queued == [events[0].id, elsewhere.id])
        #expect(m.tick().isEmpty, "nothing else may go now")

        // One for `busy` finishes: its next one is claimed.
        let sent = try #require(m.next())
        m.complete(sent, .delivered(statusCode: 204))
        #expect(m.tick().map(\.eventId) == [events[1].id])
        #expect(m.snapshot.inFlight == [busy: 1, other: 1])
    }

    @Test("housekeeping on the stepped clock: deliveries past their age limit that nobody claimed are given up")
    func expiryOnTheClock() throws {
        let bench = try Bench()
        let target = try bench.endpoint()
        let m = bench.machine(senders: 1, perTarget: 1, lease: 3600)
        let sending = try bench.write(account: "a", maxAge: 20)
        let waiting = try bench.write(account: "b", maxAge: 20)
        // The one sender is busy with `sending` (a long lease): `waiting` is not claimed.
        #expect(m.tick().map(\.eventId) == [sending.id])
        bench.clock.advance(20)
        #expect(m.tick().isEmpty)
        #expect(try bench.row(target, waiting.id)?.status == .failed, "expired by the round's housekeeping")
        #expect(try bench.row(target, sending.id)?.status == .pending, "still leased: its outcome decides")
    }

    @Test("OutboxEvents.written pokes this instance's worker for each channel its events go to, and no other")
    func writtenWakesTheChannelsWorkers() throws {
        let bench = try Bench()
        let wakeUps = OutboxWakeUps()
        let events = OutboxEvents(runtime: bench.runtime, maxAgeSeconds: 60, wakeUps: wakeUps)
        let policy = OutboxWorker.Policy(senders: 1, perTarget: 1, leaseSeconds: 30, retryBase: 5)
        let webhooks = OutboxWorker(channel: OutboxRepository.webhookChannel, outbox: bench.database.outbox, policy: policy,
                                    runtime: bench.runtime, deliver: { _ in .delivered(statusCode: 204) })
        let mail = OutboxWorker(channel: MailRepository.channel, outbox: bench.database.outbox, policy: policy,
                                runtime: bench.runtime, deliver: { _ in .delivered(statusCode: nil) })
        wakeUps.register(webhooks)
        wakeUps.register(mail)
        #expect(wakeUps.worker(channel: OutboxRepository.webhookChannel) === webhooks)

        events.written([events.userCreated(userId: "u", username: "n")])
        #expect(webhooks.wakeUps == 1 && mail.wakeUps == 0)
        let letter = OutboxEvent(id: "evt_m", type: .mailMessage, accountId: "u", data: .object([]),
                                 fanOut: [.direct(channel: .mail, target: "mail_1")], maxAgeSeconds: 60,
                                 createdAt: bench.clock.now())
        events.written([letter])
        #expect(webhooks.wakeUps == 1 && mail.wakeUps == 1)
        events.written([])
        events.written(channels: OutboxEvents.webhooks)
        #expect(webhooks.wakeUps == 2 && mail.wakeUps == 1)
    }
}
