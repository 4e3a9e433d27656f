import Foundation
import JSON
import PostgreSQL
import PostgreSQLTesting
@testable import Storage
import Synchronization
import Testing

/// A webhook endpoint deleted while an event's fan-out to it is still uncommitted: the fan-out holds
/// the endpoint `FOR SHARE`, so the delete waits for it, and must then cancel the delivery that
/// fan-out wrote. Driven step by step on two connections, so the interleaving is the one that lost
/// the delivery when the delete's one statement took its snapshot before the lock wait.
@Suite struct WebhookDeleteRaceTests {
    @Test func aDeleteThatWaitedForAFanOutCancelsTheDeliveryItWrote() throws {
        let s = try TestDatabase.scratch()
        let endpoint = TestDatabase.uniqueName("wh")
        _ = try s.database.webhooks.create(NewWebhookEndpoint(id: endpoint, url: "https://example.com/\(endpoint)", events: [.userCreated],
                                                              sealedSecret: [1, 2, 3]),
                                           audit: Fixture.audit("webhook.created", subject: endpoint))
        let event = OutboxEvent(id: TestDatabase.uniqueName("evt"), type: .userCreated, accountId: "acct",
                                data: .object([("userId", .string("acct"))]), fanOut: [.webhooks], maxAgeSeconds: 3600, createdAt: Date())

        // 1. The fan-out, as any writer's statement carries it (OutboxRepository.ctes), left open.
        let writer = try s.connect()
        _ = try writer.execute("BEGIN")
        _ = try writer.query(SQL.with(OutboxRepository.ctes([event]), "SELECT 1 AS one"))
        let writerPid = try writer.query("SELECT pg_backend_pid() AS pid")[0].int("pid")

        // 2. The delete, on the pool, waits for the fan-out's lock on the endpoint.
        let outcome = Mutex<Result<Bool, StorageError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            let result = Result { () throws(StorageError) -> Bool in
                try s.database.webhooks.delete(id: endpoint, audit: Fixture.audit("webhook.deleted", subject: endpoint))
            }
            outcome.withLock { $0 = result }
            done.signal()
        }
        let blocked = try s.waitsForALock(blockedBy: writerPid) { outcome.withLock { $0 != nil } }
        #expect(blocked, "the delete waited for the fan-out's lock on the endpoint")

        // 3. The fan-out commits; the delete goes on and must see (and cancel) what it wrote.
        _ = try writer.execute("COMMIT")
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(try outcome.withLock { $0 }?.get() == true)
        let pending = try s.count("""
            SELECT count(*) AS n FROM outbox_deliveries WHERE target = \(endpoint) AND status = 'pending'
            """)
        let cancelled = try s.count("""
            SELECT count(*) AS n FROM outbox_deliveries WHERE target = \(endpoint) AND event_id = \(event.id) AND status = 'cancelled'
            """)
        #expect(pending == 0 && cancelled == 1, "pending \(pending), cancelled \(cancelled)")
    }
}
