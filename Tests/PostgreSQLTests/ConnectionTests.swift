import Foundation
import Testing
@testable import PostgreSQL

@Suite("PostgresConnection against a real server")
struct ConnectionTests {
    @Test("every parameter type round-trips")
    func everyTypeRoundTrips() throws {
        let conn = try TestDatabase.connect()
        let bytes: [UInt8] = [0, 1, 0, 255, 0, 0x5C, 0x78, 0]  // zeros, a backslash and 'x'
        let when = Date(timeIntervalSince1970: 1_714_972_089.123456)
        let rows = try conn.query("""
            SELECT \("héllo 'quoted' \\ \"x\" 🔑") AS t, \(Int64.min) AS min, \(Int64.max) AS max,
                   \(true) AS yes, \(false) AS no, \(bytes) AS b, \([UInt8]()) AS empty,
                   \(3.141592653589793) AS pi, \(-0.5e-300) AS tiny, \(PostgresValue.double(.infinity)) AS inf,
                   \(when) AS at, \(PostgresValue.timestamptz(epochSeconds: 0)) AS epoch,
                   \(PostgresValue.json(#"{"a":[1,2,{"b":null}]}"#)) AS j, \(PostgresValue.null)::text AS n,
                   \(String?.none)::int8 AS n2, \("") AS blank
            """)
        let row = try #require(rows.first)
        #expect(try row.string("t") == "héllo 'quoted' \\ \"x\" 🔑")
        #expect(try row.int64("min") == Int64.min)
        #expect(try row.int64("max") == Int64.max)
        #expect(try row.bool("yes") == true)
        #expect(try row.bool("no") == false)
        #expect(try row.bytes("b") == bytes)
        #expect(try row.bytes("empty") == [])
        #expect(try row.double("pi") == 3.141592653589793)
        #expect(try row.double("tiny") == -0.5e-300)
        #expect(try row.double("inf") == .infinity)
        let at = try row.date("at")
        #expect(abs(at.timeIntervalSince1970 - when.timeIntervalSince1970) < 0.000_001)
        #expect(try row.date("epoch") == Date(timeIntervalSince1970: 0))
        #expect(try row.json("j") == #"{"a":[1,2,{"b":null}]}"#)
        #expect(try row.optionalString("n") == nil)
        #expect(try row.optionalInt("n2") == nil)
        #expect(try row.isNull("n"))
        #expect(try row.string("blank") == "")
    }

    @Test("a string_agg of hex-encoded bytea reads back as the list of byte strings; over no rows it is empty")
    func hexListsDecode() throws {
        let conn = try TestDatabase.connect()
        let some = try conn.query("""
            SELECT string_agg(encode(x, 'hex'), ',' ORDER BY n) AS l FROM (VALUES (1, '\\x00ff10'::bytea), (2, '\\xAB'::bytea)) v (n, x)
            """)
        #expect(try some[0].hexList("l") == [[0x00, 0xFF, 0x10], [0xAB]])
        let none = try conn.query("SELECT string_agg(encode(x, 'hex'), ',') AS l FROM (SELECT ''::bytea AS x WHERE false) v")
        #expect(try none[0].hexList("l") == [])
        #expect(throws: PostgresError.self) { try conn.query("SELECT 'zz,01' AS l")[0].hexList("l") }
    }

    @Test("values stored in typed columns read back unchanged")
    func storedColumnsRoundTrip() throws {
        let conn = try TestDatabase.connect()
        let table = TestDatabase.uniqueName("pg_types")
        try conn.executeScript("""
            CREATE TABLE \(table) (id bigserial PRIMARY KEY, t text, i int8, small int4, b bool, raw bytea,
                                   d float8, at timestamptz, day date, doc jsonb, u uuid)
            """)
        defer { _ = try? conn.executeScript("DROP TABLE \(table)") }
        let raw: [UInt8] = (0...255).map(UInt8.init) + [0, 0, 0]
        let at = Date(timeIntervalSince1970: -1_234_567_890.5)  // before 1970, half a second
        let inserted = try conn.execute(SQL(unsafeRaw: """
            INSERT INTO \(table) (t, i, small, b, raw, d, at, day, doc, u)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8::date, $9::jsonb, $10::uuid)
            """, binds: [.text("a"), .int64(42), .int(-7), .bool(true), .bytea(raw), .double(1e-9),
                          .timestamptz(at), .text("2024-02-29"), .json(#"{"k": "v"}"#),
                          .text("0b7e3f4a-1c2d-4e5f-8a9b-0c1d2e3f4a5b")]))
        #expect(inserted == 1)
        let row = try #require(try conn.query(SQL(unsafeRaw: "SELECT * FROM \(table)")).first)
        #expect(try row.string("t") == "a")
        #expect(try row.int("i") == 42)
        #expect(try row.int("small") == -7)
        #expect(try row.bool("b"))
        #expect(try row.bytes("raw") == raw)
        #expect(try row.double("d") == 1e-9)
        #expect(try row.date("at") == at)
        #expect(try row.date("day") == Date(timeIntervalSince1970: 1_709_164_800))
        #expect(try row.json("doc") == #"{"k": "v"}"#)
        #expect(try row.string("u") == "0b7e3f4a-1c2d-4e5f-8a9b-0c1d2e3f4a5b")
    }

    @Test("injection-looking strings are data, never SQL", arguments: [
        "'; DROP TABLE victims; --",
        "x' OR '1'='1",
        "$1",
        "\\'); SELECT pg_sleep(10); --",
        "Robert\"); DROP TABLE Students;--",
    ])
    func injectionIsData(_ payload: String) throws {
        let conn = try TestDatabase.connect()
        let table = TestDatabase.uniqueName("victims")
        try conn.executeScript("CREATE TABLE \(table) (name text NOT NULL)")
        defer { _ = try? conn.executeScript("DROP TABLE \(table)") }
        try conn.execute(SQL(unsafeRaw: "INSERT INTO \(table) (name) VALUES ($1)", binds: [.text(payload)]))
        let rows = try conn.query(SQL(unsafeRaw: "SELECT name FROM \(table) WHERE name = $1", binds: [.text(payload)]))
        #expect(try rows.map { try $0.string("name") } == [payload])
        let none = try conn.query(SQL(unsafeRaw: "SELECT name FROM \(table) WHERE name = $1", binds: [.text("x' OR '1'='1 ")]))
        #expect(none.isEmpty)
    }

    @Test("a NUL inside text is refused before it reaches libpq")
    func nulInTextIsRefused() throws {
        let conn = try TestDatabase.connect()
        #expect(throws: PostgresError(.invalidArgument, "")) { try conn.query("SELECT \("a\u{0}b") AS t") }
    }

    @Test("a statement is prepared once and reused with new parameters")
    func preparedStatementsAreReused() throws {
        let conn = try TestDatabase.connect()
        for i in 0..<50 {
            let row = try #require(try conn.query("SELECT \(i) + \(1) AS n").first)
            #expect(try row.int("n") == i + 1)
        }
        #expect(conn.preparedStatementCount == 1)
        let prepared = try conn.query("SELECT count(*) AS n FROM pg_prepared_statements WHERE statement = 'SELECT $1 + $2 AS n'")
        #expect(try prepared.first?.int("n") == 1)
        #expect(conn.preparedStatementCount == 2)  // the loop's statement and the one above
        // Same text with other parameter types is a separate statement; the first stays cached.
        _ = try conn.query("SELECT \(1.5) + \(1) AS n")
        #expect(conn.preparedStatementCount == 3)
    }

    @Test("a prepared statement survives a schema change and DISCARD ALL")
    func preparedStatementsRecover() throws {
        let conn = try TestDatabase.connect()
        let table = TestDatabase.uniqueName("reshape")
        try conn.executeScript("CREATE TABLE \(table) (a int8); INSERT INTO \(table) VALUES (1)")
        defer { _ = try? conn.executeScript("DROP TABLE \(table)") }
        let select = SQL(unsafeRaw: "SELECT * FROM \(table) WHERE a = $1", binds: [.int64(1)])
        #expect(try conn.query(select).first?.columns == ["a"])
        try conn.executeScript("ALTER TABLE \(table) ADD COLUMN b text DEFAULT 'x'")
        #expect(try conn.query(select).first?.columns == ["a", "b"])
        try conn.executeScript("DISCARD ALL")
        try conn.executeScript("SET TimeZone = 'UTC'")
        #expect(try conn.query(select).count == 1)
    }

    @Test("transaction commits on return and rolls back on throw")
    func transactionRollback() throws {
        let conn = try TestDatabase.connect()
        let table = TestDatabase.uniqueName("tx")
        try conn.executeScript("CREATE TABLE \(table) (v int8)")
        defer { _ = try? conn.executeScript("DROP TABLE \(table)") }
        let insert = { (v: Int) in SQL(unsafeRaw: "INSERT INTO \(table) VALUES ($1)", binds: [.int(v)]) }
        let count = { try conn.query(SQL(unsafeRaw: "SELECT count(*) AS n FROM \(table)")).first!.int("n") }

        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try conn.transaction { tx in
                try tx.execute(insert(1))
                #expect(tx.isInTransaction)
                throw Boom()
            }
        }
        #expect(try count() == 0)
        #expect(!conn.isInTransaction)

        let value = try conn.transaction(isolation: .serializable) { tx in
            try tx.execute(insert(2))
            // A nested transaction is a savepoint: its failure undoes only itself.
            _ = try? tx.transaction { inner in
                try inner.execute(insert(3))
                throw Boom()
            }
            return "done"
        }
        #expect(value == "done")
        #expect(try count() == 1)

        // An error swallowed inside the transaction must not look like a successful commit.
        let swallowed = #expect(throws: PostgresError.self) {
            try conn.transaction { tx in
                try tx.execute(insert(4))
                _ = try? tx.query("SELECT 1/0")
            }
        }
        #expect(swallowed?.sqlState == "25P02")
        #expect(try count() == 1)
    }

    @Test("a unique violation reports SQLSTATE 23505 and the constraint")
    func uniqueViolation() throws {
        let conn = try TestDatabase.connect()
        let table = TestDatabase.uniqueName("uniq")
        try conn.executeScript("CREATE TABLE \(table) (name text CONSTRAINT \(table)_name_key UNIQUE)")
        defer { _ = try? conn.executeScript("DROP TABLE \(table)") }
        let insert = SQL(unsafeRaw: "INSERT INTO \(table) VALUES ($1)", binds: [.text("alice")])
        try conn.execute(insert)
        let error = #expect(throws: PostgresError.self) { try conn.execute(insert) }
        #expect(error?.code == .query)
        #expect(error?.sqlState == SQLState.uniqueViolation)
        #expect(error?.isUniqueViolation == true)
        #expect(error?.constraint == "\(table)_name_key")
        // The connection stays usable after a statement error.
        #expect(try conn.query("SELECT 1 AS one").first?.int("one") == 1)
    }

    @Test("syntax errors carry their SQLSTATE")
    func syntaxError() throws {
        let conn = try TestDatabase.connect()
        let error = #expect(throws: PostgresError.self) { try conn.query("SELEC 1") }
        #expect(error?.sqlState == "42601")
        #expect(error?.code == .query)
    }

    /// `ColumnLayout.index(of:)` compares fingerprints (length and first seven bytes) before names:
    /// names sharing both still resolve to their own column, a repeated name to its first column,
    /// an absent one to none, for narrow and wide (30 columns) results alike.
    @Test("columns are found by name among look-alikes, repeats and wide results")
    func columnsAreFoundByName() throws {
        let conn = try TestDatabase.connect()
        let wide = (0..<26).map { "\($0) AS filler_\($0)" }.joined(separator: ", ")
        for extra in ["", ", " + wide] {
            let row = try #require(try conn.query(SQL(unsafeRaw: """
                SELECT 1 AS user_id1, 2 AS user_id2, 3 AS user_id1, 4 AS "é", 5 AS x \(extra)
                """)).first)
            #expect(try row.int64("user_id2") == 2)
            #expect(try row.int64("user_id1") == 1)
            #expect(try row.int64("é") == 4)
            #expect(try row.int64("x") == 5)
            #expect(throws: PostgresError.self) { try row.int64("user_id") }
            #expect(throws: PostgresError.self) { try row.int64("user_id3") }
            if !extra.isEmpty { #expect(try row.int64("filler_25") == 25) }
        }
    }

    /// A statement with a placeholder used twice gives the same answer run as written and spliced
    /// into a composed one (where the value is bound once per use).
    @Test("explicit placeholders mean the same run directly and spliced")
    func explicitPlaceholdersSpliced() throws {
        let conn = try TestDatabase.connect()
        let explicit = SQL("$2::int8 - $1::int8 + $2::int8", binds: [.int64(1), .int64(10)])
        #expect(try conn.query("SELECT \(fragment: explicit) AS v")[0].int64("v") == 19)
        #expect(try conn.query(SQL("SELECT $2::int8 - $1::int8 + $2::int8 AS v", binds: [.int64(1), .int64(10)]))[0].int64("v") == 19)
        #expect(try conn.query("SELECT \(5)::int8 AS a, \(fragment: explicit) AS v, \("x") AS b")[0].int64("v") == 19)
    }

    @Test("decode errors name the column")
    func decodeErrors() throws {
        let conn = try TestDatabase.connect()
        let row = try #require(try conn.query("SELECT 'abc'::text AS name, NULL::int8 AS missing, 1.5::float8 AS ratio").first)
        let notInt = #expect(throws: PostgresError.self) { try row.int("name") }
        #expect(notInt?.code == .decode)
        #expect(notInt?.column == "name")
        let null = #expect(throws: PostgresError.self) { try row.int("missing") }
        #expect(null?.column == "missing")
        let absent = #expect(throws: PostgresError.self) { try row.string("nope") }
        #expect(absent?.column == "nope")
        let notBytes = #expect(throws: PostgresError.self) { try row.bytes("name") }
        #expect(notBytes?.column == "name")
        let notDate = #expect(throws: PostgresError.self) { try row.date("ratio") }
        #expect(notDate?.column == "ratio")
        #expect(try row.optionalInt("missing") == nil)
    }

    @Test("timestamps decode in every shape the server prints")
    func timestampShapes() throws {
        let conn = try TestDatabase.connect()
        let row = try #require(try conn.query("""
            SELECT '0044-03-15 12:00:00+00 BC'::timestamptz AS bc, 'infinity'::timestamptz AS inf,
                   '2000-01-01 00:00:00.000001+00'::timestamptz AS micro, '1969-12-31 23:59:59'::timestamp AS local
            """).first)
        #expect(try row.date("inf") == .distantFuture)
        #expect(try row.date("micro").timeIntervalSince1970 == 946_684_800.000_001)
        #expect(try row.date("local") == Date(timeIntervalSince1970: -1))
        #expect(try row.date("bc").timeIntervalSince1970 < -62_135_596_800)  // before year 1
    }

    @Test("a prepared statement's cached column layout reads every later result by name; another statement has its own")
    func preparedLayoutIsReused() throws {
        let conn = try TestDatabase.connect()
        for n in 1...3 {
            let rows = try conn.query("SELECT \(Int64(n)) AS first, \("v\(n)") AS second, generate_series(1, \(Int64(n))) AS third")
            #expect(rows.count == n)
            #expect(try rows.last?.int64("first") == Int64(n))
            #expect(try rows.last?.string("second") == "v\(n)")
            #expect(try rows.last?.int("third") == n)
            #expect(rows.last?.columns == ["first", "second", "third"])
            // Same parameter types, other text: its own layout, its own names.
            let other = try conn.query("SELECT \("w\(n)") AS second, \(Int64(n)) AS first")
            #expect(other.first?.columns == ["second", "first"])
            #expect(try other.first?.string("second") == "w\(n)")
        }
    }

    @Test("executeScript runs several statements")
    func script() throws {
        let conn = try TestDatabase.connect()
        let table = TestDatabase.uniqueName("script")
        try conn.executeScript("""
            CREATE TABLE \(table) (v int8);
            INSERT INTO \(table) VALUES (1), (2);
            INSERT INTO \(table) VALUES (3);
            """)
        defer { _ = try? conn.executeScript("DROP TABLE \(table)") }
        #expect(try conn.query(SQL(unsafeRaw: "SELECT sum(v) AS s FROM \(table)")).first?.int("s") == 6)
        #expect(try conn.execute(SQL(unsafeRaw: "UPDATE \(table) SET v = v + 1")) == 3)
    }

    @Test("a bad URL is a connection error without the password")
    func badURL() {
        let error = #expect(throws: PostgresError.self) {
            try PostgresConnection(url: "postgresql://u:hunter2@127.0.0.1:1/none?connect_timeout=2")
        }
        #expect(error?.code == .connection)
        #expect(error?.description.contains("hunter2") == false)
    }
}
