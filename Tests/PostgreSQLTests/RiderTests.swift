import Foundation
@testable import PostgreSQL
import PostgreSQLTesting
import Testing

/// `PostgresBudget.carry`: a CTE the request's first write that commits carries, in that write's
/// round trip (how a DPoP proof's `jti` rides in a route's one write); refused with it, never
/// written apart from it, and given back to run alone when no write could carry it.
@Suite("A CTE carried by the request's one write")
struct RiderTests {
    @Test("the CTE leads the statement's WITH list, its binds first, explicit placeholders renumbered")
    func leading() throws {
        let rider: SQL = "INSERT INTO seen (key) VALUES (\("k")) RETURNING key"
        let insert: SQL = "INSERT INTO t (a, b) VALUES (\(1), \("x"))"
        let ledInsert = try #require(insert.leading(cte: "r", rider))
        #expect(ledInsert.text == "WITH r AS (INSERT INTO seen (key) VALUES ($1) RETURNING key) INSERT INTO t (a, b) VALUES ($2, $3)")
        #expect(ledInsert.binds == [.text("k"), .int64(1), .text("x")])
        let with: SQL = "  with recursive x AS (SELECT \(2) AS n) UPDATE t SET a = x.n FROM x"
        let ledWith = try #require(with.leading(cte: "r", rider))
        #expect(ledWith.text == "  with recursive r AS (INSERT INTO seen (key) VALUES ($1) RETURNING key), x AS (SELECT $2 AS n) UPDATE t SET a = x.n FROM x")
        #expect(ledWith.binds == [.text("k"), .int64(2)])
        let explicit = SQL("UPDATE t SET a = $1 WHERE b = $2 OR c = $1", binds: [.int64(5), .text("y")])
        let ledExplicit = try #require(explicit.leading(cte: "r", rider))
        #expect(ledExplicit.text == "WITH r AS (INSERT INTO seen (key) VALUES ($1) RETURNING key) UPDATE t SET a = $2 WHERE b = $3 OR c = $4")
        #expect(ledExplicit.binds == [.text("k"), .int64(5), .text("y"), .int64(5)])
        #expect(SQL("NOTIFY some_channel").leading(cte: "r", rider) == nil)
    }

    @Test("carried by the first write that commits, not by a read or a write inside a transaction; refused, its statement writes nothing")
    func carried() throws {
        let table = TestDatabase.uniqueName("rider_t"), seen = TestDatabase.uniqueName("rider_seen")
        let admin = try TestDatabase.connect()
        try admin.executeScript("CREATE TABLE \(seen) (key text PRIMARY KEY); CREATE TABLE \(table) (id int PRIMARY KEY)")
        defer { _ = try? admin.executeScript("DROP TABLE \(table); DROP TABLE \(seen)") }
        let pool = PostgresPool(url: try TestDatabase.url(), maxConnections: 2)
        defer { pool.shutdown() }
        func rider(_ key: String) -> SQL { SQL(unsafeRaw: "INSERT INTO \(seen) (key) VALUES ($1) RETURNING key", binds: [.text(key)]) }
        func alone(_ key: String) -> SQL { SQL(unsafeRaw: "INSERT INTO \(seen) (key) VALUES ($1) ON CONFLICT DO NOTHING RETURNING key", binds: [.text(key)]) }
        func count(_ sql: String) throws -> Int { try admin.query(SQL(unsafeRaw: sql))[0].int("n") }

        // A read, a write inside a transaction (rolled back), then a write that commits: the last carries it.
        let (_, first) = try PostgresDeadline.within(seconds: 5) {
            #expect(PostgresDeadline.carry(cte: "seen_it", rider("a"), refusedBy: "\(seen)_pkey", alone: alone("a")))
            _ = try pool.query(SQL(unsafeRaw: "SELECT count(*)::int AS n FROM \(table)"))
            #expect(PostgresDeadline.riderState == .pending)
            #expect(throws: CancellationError.self) {
                try pool.withConnection { c in
                    try c.transaction { t in _ = try t.execute(SQL(unsafeRaw: "INSERT INTO \(table) (id) VALUES (1)")); throw CancellationError() }
                }
            }
            #expect(PostgresDeadline.riderState == .pending)
            _ = try pool.execute(SQL(unsafeRaw: "INSERT INTO \(table) (id) VALUES (2)"))
            #expect(PostgresDeadline.riderState == .carried)
            #expect(PostgresDeadline.takeAlone() == nil)
        }
        // Two writes, the rolled-back insert and the one that carried the CTE: none of its own.
        #expect(first.counts.writes == 2)
        #expect(try count("SELECT count(*)::int AS n FROM \(seen) WHERE key = 'a'") == 1)
        #expect(try count("SELECT count(*)::int AS n FROM \(table)") == 1)

        // The same CTE again: the write that carries it fails whole, and says so.
        _ = try PostgresDeadline.within(seconds: 5) { () throws in
            _ = PostgresDeadline.carry(cte: "seen_it", rider("a"), refusedBy: "\(seen)_pkey", alone: alone("a"))
            #expect(throws: PostgresError.self) { try pool.execute(SQL(unsafeRaw: "INSERT INTO \(table) (id) VALUES (3)")) }
            #expect(PostgresDeadline.riderState == .refused)
            // A store that writes something else on that failure writes nothing either; reads still run.
            #expect(throws: PostgresError.self) { try pool.execute(SQL(unsafeRaw: "INSERT INTO \(table) (id) VALUES (6)")) }
            #expect(throws: PostgresError.self) { try pool.withConnection { c in try c.pipeline([SQL(unsafeRaw: "DELETE FROM \(table)"), "COMMIT"]) } }
            #expect(try pool.query(SQL(unsafeRaw: "SELECT count(*)::int AS n FROM \(table)"))[0].int("n") == 1)
        }
        #expect(try count("SELECT count(*)::int AS n FROM \(table) WHERE id IN (3, 6)") == 0)

        // A pipeline that ends with COMMIT carries it; one that leaves its transaction open does not.
        _ = try PostgresDeadline.within(seconds: 5) {
            _ = PostgresDeadline.carry(cte: "seen_it", rider("b"), refusedBy: "\(seen)_pkey", alone: alone("b"))
            try pool.withConnection { c in
                _ = try c.pipeline(["BEGIN", SQL(unsafeRaw: "INSERT INTO \(table) (id) VALUES (4)")])
                #expect(PostgresDeadline.riderState == .pending)
                _ = try c.pipeline([SQL(unsafeRaw: "INSERT INTO \(table) (id) VALUES (5)"), "COMMIT"])
            }
            #expect(PostgresDeadline.riderState == .carried)
        }
        #expect(try count("SELECT count(*)::int AS n FROM \(seen) WHERE key = 'b'") == 1)

        // No write: handed back to run alone, once.
        _ = try PostgresDeadline.within(seconds: 5) {
            _ = PostgresDeadline.carry(cte: "seen_it", rider("c"), refusedBy: "\(seen)_pkey", alone: alone("c"))
            _ = try pool.query(SQL(unsafeRaw: "SELECT count(*)::int AS n FROM \(table)"))
            let statement = try #require(PostgresDeadline.takeAlone())
            #expect(try pool.query(statement).count == 1)
            #expect(PostgresDeadline.takeAlone() == nil && PostgresDeadline.riderState == .alone)
        }
        #expect(try count("SELECT count(*)::int AS n FROM \(seen) WHERE key = 'c'") == 1)
    }
}
