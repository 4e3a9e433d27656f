import Foundation
@testable import PostgreSQL
import PostgreSQLTesting
import Synchronization
import Testing

extension TestDatabase {
    /// Where the transaction-pooling tests connect: `LATCHKEY_PGBOUNCER_URL` when set
    /// (`scripts/test.sh` points it at its PgBouncer in `pool_mode = transaction`), else the test
    /// database itself, which checks the same things without the pooler in between.
    static func pooledURL() throws -> String {
        if let url = ProcessInfo.processInfo.environment["LATCHKEY_PGBOUNCER_URL"], !url.isEmpty { return url }
        return try url()
    }

    /// `url` (a `postgresql://…/db?…` URI) naming `database` instead.
    static func url(_ url: String, database: String) throws -> String {
        guard let scheme = url.range(of: "://") else { throw TestSetupError(message: "not a URI: \(url)") }
        let rest = url[scheme.upperBound...]
        guard let slash = rest.firstIndex(of: "/") else { return url + "/" + database }
        let end = rest[slash...].firstIndex(of: "?") ?? rest.endIndex
        return String(url[..<slash]) + "/" + database + String(url[end...])
    }

    /// A database of the test server whose sessions start in `zone` (`ALTER DATABASE … SET
    /// timezone`): the server's setting, not one a client sends. Created on first use and kept.
    static func database(inTimeZone zone: String) throws -> String {
        let name = "latchkey_test_tz_" + zone.lowercased().map { $0.isLetter || $0.isNumber ? String($0) : "_" }.joined()
        let admin = try connect()
        if try admin.query("SELECT 1 AS present FROM pg_database WHERE datname = \(name)").isEmpty {
            do {
                try admin.executeScript("CREATE DATABASE \(name)")
            } catch let error as PostgresError where error.sqlState == "42P04" || error.sqlState == "23505" {
                // Created meanwhile by a concurrent run.
            }
        }
        // An identifier and a zone name chosen by this test, never input.
        // Two tests may set the same database's zone at once; the loser of that race (a unique
        // violation in pg_db_role_setting) finds the value already set, so it tries once more.
        do {
            try admin.executeScript("ALTER DATABASE \(name) SET timezone = '\(zone)'")
        } catch let error as PostgresError where error.sqlState == "23505" {
            try admin.executeScript("ALTER DATABASE \(name) SET timezone = '\(zone)'")
        }
        return name
    }
}

/// Connections opened with `transactionPooling: true` keep no session state, so they work behind
/// PgBouncer in transaction mode, where each transaction may run on another server session.
@Suite("Transaction pooling: no session state")
struct TransactionPoolingTests {
    @Test("statements with binds run, in and out of transactions, and nothing is prepared by name")
    func bindsWithoutPreparedStatements() throws {
        let table = TestDatabase.uniqueName("pool_tx")
        let admin = try TestDatabase.connect()
        try admin.executeScript("CREATE TABLE \(table) (id bigint PRIMARY KEY, name text NOT NULL, raw bytea, at timestamptz)")
        defer { _ = try? admin.executeScript("DROP TABLE \(table)") }

        let conn = try PostgresConnection(url: TestDatabase.pooledURL(), transactionPooling: true)
        #expect(conn.transactionPooling)
        let at = Date(timeIntervalSince1970: 1_714_972_089.25)
        // The same statement text several times: a preparing connection would prepare it once.
        for id in 1...3 {
            let inserted = try conn.execute(SQL(unsafeRaw: "INSERT INTO \(table) (id, name, raw, at) VALUES ($1, $2, $3, $4)",
                                                binds: [.int(id), .text("n\(id) 'é' 🔑"), .bytea([0, UInt8(id), 0]), .timestamptz(at)]))
            #expect(inserted == 1)
        }
        let total = try conn.transaction { t -> Int in
            try t.execute(SQL(unsafeRaw: "UPDATE \(table) SET name = name || $1 WHERE id = $2", binds: [.text("!"), .int(2)]))
            return try t.query(SQL(unsafeRaw: "SELECT sum(id) AS total FROM \(table) WHERE id >= $1", binds: [.int(1)]))
                .first!.int("total")
        }
        #expect(total == 6)
        let row = try #require(try conn.query(SQL(unsafeRaw: "SELECT * FROM \(table) WHERE id = $1", binds: [.int(2)])).first)
        #expect(try row.string("name") == "n2 'é' 🔑!")
        #expect(try row.bytes("raw") == [0, 2, 0])
        #expect(try row.date("at") == at)
        // A failed statement inside a transaction rolls it back like anywhere else.
        #expect(throws: PostgresError.self) {
            try conn.transaction { t in
                try t.execute(SQL(unsafeRaw: "INSERT INTO \(table) (id, name) VALUES ($1, $2)", binds: [.int(4), .text("x")]))
                try t.execute(SQL(unsafeRaw: "INSERT INTO \(table) (id, name) VALUES ($1, $2)", binds: [.int(1), .text("dup")]))
            }
        }
        #expect(try conn.query(SQL(unsafeRaw: "SELECT count(*) AS n FROM \(table)")).first?.int("n") == 3)

        #expect(conn.preparedStatementCount == 0)
        // And none on the server session that answers (whichever one PgBouncer picked).
        #expect(try conn.query("SELECT count(*) AS n FROM pg_prepared_statements WHERE \(true)").first?.int("n") == 0)
    }

    @Test("a pool with transactionPooling hands out connections that prepare nothing")
    func poolPassesItOn() throws {
        let pool = PostgresPool(url: try TestDatabase.pooledURL(), maxConnections: 2, transactionPooling: true)
        defer { pool.shutdown() }
        #expect(pool.transactionPooling)
        let errors = onThreads(4) { i in
            for j in 0..<20 {
                let rows = try pool.query("SELECT \(i) * 100 + \(j) AS v, \("x") AS s")
                guard try rows.first?.int("v") == i * 100 + j else { throw TestSetupError(message: "wrong row") }
            }
        }
        #expect(errors.isEmpty, "\(errors)")
        try pool.withConnection { conn in
            #expect(conn.transactionPooling)
            #expect(conn.preparedStatementCount == 0)
        }
    }

    @Test("nothing is SET at connect: the session keeps the server's TimeZone")
    func noSessionSet() throws {
        let database = try TestDatabase.database(inTimeZone: "Asia/Kolkata")
        let url = try TestDatabase.url(TestDatabase.pooledURL(), database: database)
        let pooled = try PostgresConnection(url: url, transactionPooling: true)
        #expect(try pooled.query("SELECT current_setting('TimeZone') AS tz").first?.string("tz") == "Asia/Kolkata")
        #expect(try pooled.query("SELECT current_setting('client_encoding') AS e").first?.string("e") == "UTF8")
        // Without transaction pooling the connection still pins UTC for itself.
        let direct = try PostgresConnection(url: TestDatabase.url(TestDatabase.url(), database: database))
        #expect(try direct.query("SELECT current_setting('TimeZone') AS tz").first?.string("tz") == "UTC")
    }

    /// (zone, the offset PostgreSQL prints for 2024-01-15 12:00 UTC there)
    @Test("timestamps decode to the same instant whatever the server's TimeZone", arguments: [
        ("Asia/Kolkata", "+05:30"), ("Europe/Paris", "+01"), ("America/Los_Angeles", "-08"),
        ("Asia/Kathmandu", "+05:45"), ("UTC", "+00"),
    ])
    func timestampsInAnyZone(_ zone: String, _ januaryOffset: String) throws {
        let url = try TestDatabase.url(TestDatabase.pooledURL(), database: TestDatabase.database(inTimeZone: zone))
        let conn = try PostgresConnection(url: url, transactionPooling: true)
        #expect(try conn.query("SELECT current_setting('TimeZone') AS tz").first?.string("tz") == zone)

        let january = Date(timeIntervalSince1970: 1_705_320_000)  // 2024-01-15 12:00:00 UTC
        let literal = try #require(try conn.query(
            "SELECT '2024-01-15 12:00:00+00'::timestamptz AS at, ('2024-01-15 12:00:00+00'::timestamptz)::text AS shown, now() AS now"
        ).first)
        #expect(try literal.string("shown").hasSuffix(januaryOffset))
        #expect(try literal.date("at") == january)
        #expect(abs(try literal.date("now").timeIntervalSinceNow) < 60)

        let instants = [
            january,
            Date(timeIntervalSince1970: 1_714_972_089.123456),  // May 2024: summer time where there is one
            Date(timeIntervalSince1970: -1_234_567_890.5),  // 1930: other historical offsets
            Date(timeIntervalSince1970: -2_208_988_800),  // 1900-01-01: local mean time, offsets with seconds
            Date(timeIntervalSince1970: 4_102_444_800.5),  // 2100
        ]
        for at in instants {
            let row = try #require(try conn.query("SELECT \(at) AS at, (\(at))::text AS shown").first)
            let decoded = try row.date("at")
            let shown = try row.string("shown")
            #expect(abs(decoded.timeIntervalSince1970 - at.timeIntervalSince1970) < 0.000_001,
                    "\(zone): \(shown) decoded as \(decoded.timeIntervalSince1970), want \(at.timeIntervalSince1970)")
        }
    }

    @Test("migrators through transaction pooling apply each migration exactly once, in order")
    func concurrentPooledMigrators() throws {
        let p = TestDatabase.uniqueName("migpool")
        let migrations = [
            Migration(version: 1, name: "create log", sql: "CREATE TABLE \(p)_log (version int PRIMARY KEY)"),
            Migration(version: 2, name: "users", sql: "CREATE TABLE \(p)_users (id bigserial PRIMARY KEY); INSERT INTO \(p)_log VALUES (2)"),
            Migration(version: 3, name: "index", sql: "CREATE INDEX ON \(p)_users (id); INSERT INTO \(p)_log VALUES (3)"),
            Migration(version: 4, name: "column", sql: "ALTER TABLE \(p)_users ADD COLUMN name text; INSERT INTO \(p)_log VALUES (4)"),
        ]
        let admin = try TestDatabase.connect()
        defer { _ = try? admin.executeScript("DROP TABLE IF EXISTS \(p)_log, \(p)_users, \(p)_migrations") }
        let migrator = try Migrator(migrations, table: "\(p)_migrations")
        let url = try TestDatabase.pooledURL()
        let results = Mutex<[[Int]]>([])
        let errors = onThreads(4) { _ in
            let pool = PostgresPool(url: url, maxConnections: 1, transactionPooling: true)
            defer { pool.shutdown() }
            let applied = try migrator.migrate(using: pool)
            results.withLock { $0.append(applied) }
        }
        #expect(errors.isEmpty, "\(errors)")
        let outcomes = results.withLock { $0 }
        #expect(outcomes.count == 4)
        #expect(outcomes.flatMap { $0 }.sorted() == [1, 2, 3, 4])  // each applied by exactly one migrator
        #expect(outcomes.allSatisfy { $0 == $0.sorted() })
        #expect(try migrator.appliedVersions(on: admin) == [1, 2, 3, 4])
        let logged = try admin.query(SQL(unsafeRaw: "SELECT version FROM \(p)_log ORDER BY version")).map { try $0.int("version") }
        #expect(logged == [2, 3, 4])

        // A pooled run takes no session-level lock, so none can be left behind on a server session.
        let pooled = try PostgresConnection(url: url, transactionPooling: true)
        #expect(try migrator.migrate(on: pooled) == [])
        #expect(try admin.query("SELECT pg_try_advisory_lock(\(migrator.lockKey)) AS got").first?.bool("got") == true)
        _ = try admin.query("SELECT pg_advisory_unlock(\(migrator.lockKey)) AS released")
    }
}

/// `timestamptz` text as PostgreSQL prints it in `DateStyle=ISO` for various session time zones,
/// decoded without a server.
@Suite("Timestamp decoding")
struct TimestampDecodingTests {
    private static func decode(_ text: String, type: UInt32 = 1184) throws -> Date {
        let bytes = Array(text.utf8)
        let storage = ResultStorage(layout: ColumnLayout(columns: ["at"], columnTypes: [type]), rowCount: 1, cells: [(0, bytes.count)], bytes: bytes)
        return try Row(storage: storage, row: 0).date("at")
    }

    @Test("the printed offset is applied", arguments: [
        ("2024-01-15 12:00:00+00", 1_705_320_000.0),
        ("2024-01-15 13:00:00+01", 1_705_320_000.0),
        ("2024-01-15 17:30:00+05:30", 1_705_320_000.0),
        ("2024-01-15 17:45:00+05:45", 1_705_320_000.0),
        ("2024-01-15 04:00:00-08", 1_705_320_000.0),
        ("2024-01-14 23:00:00-13", 1_705_320_000.0),
        ("2024-05-06 12:38:09.123456+05:30", 1_714_979_289.123456),
        ("1900-01-01 05:21:10+05:21:10", -2_208_988_800.0),  // Madras mean time
        ("1900-01-01 05:53:28+05:53:28", -2_208_988_800.0),
        ("1969-12-31 15:59:59.5-08", -0.5),
        ("2024-01-15 12:00:00", 1_705_320_000.0),  // no offset: read as UTC
    ])
    func offsets(_ text: String, _ epochSeconds: Double) throws {
        let decoded = try Self.decode(text)
        #expect(abs(decoded.timeIntervalSince1970 - epochSeconds) < 0.000_001, "\(text)")
    }

    @Test("malformed offsets are decode errors naming the column", arguments: [
        "2024-01-15 12:00:00+5", "2024-01-15 12:00:00+05:3", "2024-01-15 12:00:00 +05", "2024-01-15 12:00:00+05:30:",
    ])
    func malformed(_ text: String) {
        let error = #expect(throws: PostgresError.self) { try Self.decode(text) }
        #expect(error?.code == .decode)
        #expect(error?.column == "at")
    }
}
