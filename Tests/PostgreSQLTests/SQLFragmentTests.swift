import PostgreSQL
import Testing

/// Splicing statements into statements (no server needed): binds stay binds, renumbered in order.
@Suite struct SQLFragmentTests {
    @Test func aFragmentsPlaceholdersFollowTheEnclosingBinds() {
        let inner: SQL = "b = \(2) AND c = \("three")"
        let outer: SQL = "SELECT \(1) WHERE \(fragment: inner) AND d = \(true)"
        #expect(outer.text == "SELECT $1 WHERE b = $2 AND c = $3 AND d = $4")
        #expect(outer.binds == [.int64(1), .int64(2), .text("three"), .bool(true)])
    }

    /// A fragment written with explicit placeholders becomes binds in the order its text uses
    /// them (a placeholder used twice carries its value twice); the statement is numbered in order.
    @Test func repeatedAndMultiDigitPlaceholdersAreRenumbered() {
        // Ten binds, then one that refers to two of them twice (explicit placeholders).
        var values: [PostgresValue] = []
        for n in 1...10 { values.append(.int64(Int64(n))) }
        let ten = SQL(unsafeRaw: (1...10).map { "$\($0)" }.joined(separator: ","), binds: values)
        let pair = SQL("x = $2 OR x = $1 OR y = $2", binds: [.text("a"), .text("b")])
        let joined = SQL.joined([ten, pair, ten], separator: " | ")
        #expect(joined.text == (1...10).map { "$\($0)" }.joined(separator: ",") + " | x = $11 OR x = $12 OR y = $13 | "
                + (14...23).map { "$\($0)" }.joined(separator: ","))
        #expect(joined.binds == values + [.text("b"), .text("a"), .text("b")] + values)
        // Executed as written, an explicit statement keeps its text and binds.
        #expect(pair.text == "x = $2 OR x = $1 OR y = $2" && pair.binds == [.text("a"), .text("b")])
    }

    /// Composed statements nest by copying: three levels deep, every bind is numbered in text order.
    @Test func nestedFragmentsKeepTheirBindsInTextOrder() {
        let innermost: SQL = "c = \(3)"
        let inner: SQL = "b = \(2) AND (\(fragment: innermost)) AND d = \(4)"
        let outer: SQL = "SELECT \(1) WHERE \(fragment: inner) AND \(fragment: SQL.joined([innermost, inner], separator: " OR "))"
        #expect(outer.text == "SELECT $1 WHERE b = $2 AND (c = $3) AND d = $4 AND c = $5 OR b = $6 AND (c = $7) AND d = $8")
        #expect(outer.binds == [1, 2, 3, 4, 3, 2, 3, 4].map { PostgresValue.int64($0) })
        // Equality is by the text and values sent, not by how a statement was put together.
        #expect(SQL("SELECT $1", binds: [.int64(1)]) == "SELECT \(1)")
    }

    @Test func aDollarSignWithoutDigitsIsText() {
        let inner = SQL(unsafeRaw: "jsonb_path_query(doc, '$.a') = $1", binds: [.text("v")])
        let outer: SQL = "SELECT \(0), \(fragment: inner)"
        #expect(outer.text == "SELECT $1, jsonb_path_query(doc, '$.a') = $2")
        #expect(outer.binds == [.int64(0), .text("v")])
    }

    @Test func joiningNothingOrFragmentsWithoutBinds() {
        #expect(SQL.joined([], separator: ", ").text == "")
        let joined = SQL.joined(["a", "b", "\(7)"], separator: ", ")
        #expect(joined.text == "a, b, $1" && joined.binds == [.int64(7)])
    }
}
