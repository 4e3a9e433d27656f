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

    @Test func repeatedAndMultiDigitPlaceholdersAreRenumbered() {
        // Ten binds, then one that refers to two of them twice (explicit placeholders).
        var values: [PostgresValue] = []
        for n in 1...10 { values.append(.int64(Int64(n))) }
        let ten = SQL(unsafeRaw: (1...10).map { "$\($0)" }.joined(separator: ","), binds: values)
        let pair = SQL("x = $2 OR x = $1 OR y = $2", binds: [.text("a"), .text("b")])
        let joined = SQL.joined([ten, pair, ten], separator: " | ")
        #expect(joined.text == (1...10).map { "$\($0)" }.joined(separator: ",") + " | x = $12 OR x = $11 OR y = $12 | "
                + (13...22).map { "$\($0)" }.joined(separator: ","))
        #expect(joined.binds == values + [.text("a"), .text("b")] + values)
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
