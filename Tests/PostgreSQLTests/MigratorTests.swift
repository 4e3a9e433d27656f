import Foundation
@testable import PostgreSQL
import PostgreSQLTesting
import Synchronization
import Testing

@Suite("Migrator against a real server")
struct MigratorTests {
    /// Migrations that create uniquely named tables, plus the log table they append to.
    private static func fixture(_ prefix: String) -> (migrations: [Migration], table: String, cleanup: String) {
        let p = TestDatabase.uniqueName(prefix)
        let migrations = [
            Migration(version: 1, name: "create log", sql: "CREATE TABLE \(p)_log (version int PRIMARY KEY)"),
            Migration(version: 2, name: "users", sql: """
                CREATE TABLE \(p)_users (id bigserial PRIMARY KEY, name text NOT NULL UNIQUE);
                INSERT INTO \(p)_log VALUES (2);
                """),
            Migration(version: 3, name: "index", sql: "CREATE INDEX ON \(p)_users (lower(name)); INSERT INTO \(p)_log VALUES (3)"),
        ]
        return (migrations, "\(p)_migrations", "DROP TABLE IF EXISTS \(p)_log, \(p)_users, \(p)_migrations")
    }

    @Test("migrations apply once, in order, and a second run does nothing")
    func idempotent() throws {
        let (migrations, table, cleanup) = Self.fixture("mig")
        let conn = try TestDatabase.connect()
        defer { _ = try? conn.executeScript(cleanup) }

        // Given out of order on purpose.
        let first = try Migrator([migrations[1], migrations[0]], table: table)
        #expect(try first.appliedVersions(on: conn) == [])
        #expect(try first.migrate(on: conn) == [1, 2])
        #expect(try first.migrate(on: conn) == [])
        #expect(try first.appliedVersions(on: conn) == [1, 2])

        let later = try Migrator(migrations, table: table)
        #expect(try later.migrate(on: conn) == [3])
        #expect(try later.migrate(on: conn) == [])
        let names = try conn.query(SQL(unsafeRaw: "SELECT name FROM \(table) ORDER BY version")).map { try $0.string("name") }
        #expect(names == ["create log", "users", "index"])
    }

    @Test("a failing migration is rolled back and stops the run")
    func failureRollsBack() throws {
        let (migrations, table, cleanup) = Self.fixture("migfail")
        let conn = try TestDatabase.connect()
        defer { _ = try? conn.executeScript(cleanup) }
        let broken = Migration(version: 3, name: "broken", sql: "INSERT INTO \(table) VALUES (99, 'x'); SELEC oops")
        let migrator = try Migrator([migrations[0], migrations[1], broken], table: table)
        let error = #expect(throws: PostgresError.self) { try migrator.migrate(on: conn) }
        #expect(error?.sqlState == "42601")
        #expect(error?.reason.contains("migration 3 (broken)") == true)
        #expect(try migrator.appliedVersions(on: conn) == [1, 2])
        // The lock was released: another session can take it at once.
        let other = try TestDatabase.connect()
        #expect(try other.query("SELECT pg_try_advisory_lock(\(migrator.lockKey)) AS got").first?.bool("got") == true)
    }

    @Test("two migrators starting at once apply each migration exactly once")
    func concurrentMigrators() throws {
        let (migrations, table, cleanup) = Self.fixture("migrace")
        let url = try TestDatabase.url()
        let migrator = try Migrator(migrations, table: table)
        let results = Mutex<[[Int]]>([])
        let errors = onThreads(2) { _ in
            let pool = PostgresPool(url: url, maxConnections: 1)
            let applied = try migrator.migrate(using: pool)
            results.withLock { $0.append(applied) }
        }
        let conn = try TestDatabase.connect()
        defer { _ = try? conn.executeScript(cleanup) }
        #expect(errors.isEmpty, "\(errors)")
        let outcomes = results.withLock { $0 }.sorted { $0.count < $1.count }
        #expect(outcomes == [[], [1, 2, 3]])
        #expect(try migrator.appliedVersions(on: conn) == [1, 2, 3])
        let prefix = String(table.dropLast("_migrations".count))
        let logged = try conn.query(SQL(unsafeRaw: "SELECT version FROM \(prefix)_log ORDER BY version")).map { try $0.int("version") }
        #expect(logged == [2, 3])
    }

    @Test("bad migration lists are refused up front")
    func validation() {
        #expect(throws: PostgresError.self) {
            try Migrator([Migration(version: 1, name: "a", sql: ""), Migration(version: 1, name: "b", sql: "")])
        }
        #expect(throws: PostgresError.self) { try Migrator([Migration(version: 0, name: "a", sql: "")]) }
        #expect(throws: PostgresError.self) { try Migrator([Migration](), table: "x; DROP TABLE y") }
        #expect(throws: Never.self) { try Migrator([(version: 1, name: "a", sql: "SELECT 1")]) }
    }
}
