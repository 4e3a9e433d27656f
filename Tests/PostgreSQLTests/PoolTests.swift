import Foundation
@testable import PostgreSQL
import PostgreSQLTesting
import Synchronization
import Testing

@Suite("PostgresPool against a real server")
struct PoolTests {
    @Test("16 threads share a pool of 4 without losing an update")
    func sixteenThreads() throws {
        let pool = PostgresPool(url: try TestDatabase.url(), maxConnections: 4, acquireTimeout: .seconds(60))
        let table = TestDatabase.uniqueName("counter")
        try pool.execute(SQL(unsafeRaw: "CREATE TABLE \(table) (id int PRIMARY KEY, n int8 NOT NULL, log int8[] NOT NULL DEFAULT '{}')"))
        defer { _ = try? pool.execute(SQL(unsafeRaw: "DROP TABLE \(table)")) }
        try pool.execute(SQL(unsafeRaw: "INSERT INTO \(table) (id, n) VALUES (1, 0)"))

        let peakInUse = Mutex(0)
        let errors = onThreads(16) { thread in
            for i in 0..<25 {
                if i % 5 == 0 {
                    // A transaction on one pooled connection.
                    try pool.transaction { tx in
                        let n = try tx.query(SQL(unsafeRaw: "SELECT n FROM \(table) WHERE id = 1 FOR UPDATE")).first!.int64("n")
                        try tx.execute(SQL(unsafeRaw: "UPDATE \(table) SET n = $1 WHERE id = 1", binds: [.int64(n + 1)]))
                    }
                } else {
                    try pool.withConnection { conn in
                        let inUse = pool.stats.inUse
                        peakInUse.withLock { $0 = max($0, inUse) }
                        try conn.execute(SQL(unsafeRaw: "UPDATE \(table) SET n = n + 1, log = log || $1 WHERE id = 1",
                                             binds: [.int(thread * 100 + i)]))
                    }
                }
            }
        }
        #expect(errors.isEmpty, "\(errors)")
        let row = try #require(try pool.query(SQL(unsafeRaw: "SELECT n, cardinality(log) AS logged FROM \(table)")).first)
        #expect(try row.int("n") == 16 * 25)
        #expect(try row.int("logged") == 16 * 20)
        let stats = pool.stats
        #expect(stats.inUse == 0)
        #expect(stats.waiting == 0)
        #expect(stats.open <= 4)
        #expect(stats.open == stats.idle)
        #expect(stats.created <= 4)
        #expect(peakInUse.withLock { $0 } <= 4)
    }

    @Test("waiting longer than the acquire timeout fails with poolTimeout")
    func acquireTimeout() throws {
        let pool = PostgresPool(url: try TestDatabase.url(), maxConnections: 1, acquireTimeout: .milliseconds(50))
        try pool.withConnection { _ in
            let error = #expect(throws: PostgresError.self) { try pool.withConnection { _ in } }
            #expect(error?.code == .poolTimeout)
        }
        #expect(pool.stats.timeouts == 1)
        // The pool still works afterwards.
        #expect(try pool.query("SELECT 1 AS one").first?.int("one") == 1)
    }

    @Test("a connection left in an open transaction is rolled back before reuse")
    func leftoverTransaction() throws {
        let pool = PostgresPool(url: try TestDatabase.url(), maxConnections: 1)
        try pool.withConnection { try $0.executeScript("BEGIN; SET LOCAL statement_timeout = 1234") }
        let status = try pool.query("SELECT current_setting('statement_timeout') AS s, now() = statement_timestamp() AS fresh")
        #expect(try status.first?.string("s") != "1234ms")
    }

    @Test("connections killed with pg_terminate_backend are replaced")
    func reconnectAfterTerminate() throws {
        let app = TestDatabase.uniqueName("lk_pool")
        let pool = PostgresPool(url: try TestDatabase.url(adding: "application_name=\(app)"), maxConnections: 3)
        // Open three connections at once so three sit idle afterwards.
        let pidsBefore = try pool.withConnection { a in
            try pool.withConnection { b in
                try pool.withConnection { c in [a.backendPID, b.backendPID, c.backendPID] }
            }
        }
        #expect(pool.stats.idle == 3)
        try terminateBackends(applicationName: app)

        let pidsAfter = try pool.withConnection { a in
            try pool.withConnection { b in
                try pool.withConnection { c in
                    _ = try a.query("SELECT 1 AS one")
                    _ = try b.query("SELECT 1 AS one")
                    _ = try c.query("SELECT 1 AS one")
                    return [a.backendPID, b.backendPID, c.backendPID]
                }
            }
        }
        #expect(Set(pidsAfter).isDisjoint(with: pidsBefore))
        let stats = pool.stats
        #expect(stats.discarded == 3)
        #expect(stats.created == 6)
        #expect(stats.open == 3)
    }

    @Test("a statement that fails because the connection dropped is retried once")
    func retryAfterDrop() throws {
        let app = TestDatabase.uniqueName("lk_retry")
        // Without the idle probe, the dead connection is handed out and the statement fails on it.
        let pool = PostgresPool(url: try TestDatabase.url(adding: "application_name=\(app)"),
                                maxConnections: 2, acquireTimeout: .seconds(10), probeOnCheckout: false)
        #expect(try pool.query("SELECT 1 AS one").count == 1)
        try terminateBackends(applicationName: app)

        #expect(try pool.query("SELECT 2 AS two").first?.int("two") == 2)
        #expect(pool.stats.retries == 1)
        #expect(pool.stats.discarded == 1)

        // Inside withConnection nothing is retried: the caller sees the connection error.
        try terminateBackends(applicationName: app)
        let error = #expect(throws: PostgresError.self) {
            try pool.withConnection { try $0.transaction { tx in try tx.query("SELECT 3 AS three") } }
        }
        #expect(error?.code == .connection)
        #expect(pool.stats.discarded == 2)
        #expect(try pool.query("SELECT 4 AS four").count == 1)
    }

    @Test("a lone connection reports the drop as a connection error")
    func connectionErrorAfterTerminate() throws {
        let app = TestDatabase.uniqueName("lk_single")
        let conn = try PostgresConnection(url: try TestDatabase.url(adding: "application_name=\(app)"))
        try terminateBackends(applicationName: app)
        #expect(!conn.probeIdle())
        let error = #expect(throws: PostgresError.self) { try conn.query("SELECT 1 AS one") }
        #expect(error?.code == .connection)
        #expect(!conn.isConnected)
    }

    /// Restarts the cluster, so it is opt-in and must run alone, against a private cluster:
    /// `LATCHKEY_PG_RESTART_TEST=1 LATCHKEY_DATA_DIR=/tmp/x LATCHKEY_PG_PORT=54339 swift test
    /// --filter serverRestart` (no DATABASE_URL). Other tests running meanwhile would fail.
    @Test("after a server restart the pool replaces every connection",
          .enabled(if: ProcessInfo.processInfo.environment["LATCHKEY_PG_RESTART_TEST"] == "1"
                       && ProcessInfo.processInfo.environment["DATABASE_URL"] == nil))
    func serverRestart() throws {
        let pool = PostgresPool(url: try TestDatabase.url(), maxConnections: 2)
        try pool.withConnection { a in try pool.withConnection { b in
            _ = try a.query("SELECT 1 AS one"); _ = try b.query("SELECT 1 AS one")
        } }
        #expect(runCapturingStdout(["/bin/bash", TestCluster.script, "--test", "--stop"]).status == 0)
        #expect(runCapturingStdout(["/bin/bash", TestCluster.script, "--test"]).status == 0)
        let counts = try pool.withConnection { a in try pool.withConnection { b in
            [try a.query("SELECT 1 AS one").count, try b.query("SELECT 1 AS one").count]
        } }
        #expect(counts == [1, 1])
        #expect(pool.stats.discarded == 2)
    }

    @Test("shutdown refuses new work")
    func shutdown() throws {
        let pool = PostgresPool(url: try TestDatabase.url(), maxConnections: 2)
        _ = try pool.query("SELECT 1 AS one")
        pool.shutdown()
        #expect(pool.stats.open == 0)
        let error = #expect(throws: PostgresError.self) { try pool.query("SELECT 1 AS one") }
        #expect(error?.code == .poolClosed)
    }
}

/// Terminates every backend with `application_name` and waits until the server has let them go,
/// so the next use of those connections is certain to find them dead.
func terminateBackends(applicationName: String) throws {
    let admin = try TestDatabase.connect()
    let killed = try admin.query("""
        SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = \(applicationName)
        """)
    #expect(!killed.isEmpty)
    while try admin.query("SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = \(applicationName)")
        .first!.int("n") > 0 {
        usleep(10_000)
    }
}
