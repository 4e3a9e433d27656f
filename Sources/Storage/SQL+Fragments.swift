import JSON
import PostgreSQL

// Statements here are built from shared fragments (the one credential-use UPDATE, the one
// refresh-family insert, the one audit insert) so that each thing is written in SQL exactly once.
// A fragment is an ordinary `SQL` value with its own binds; splicing (PostgreSQL's
// `appendInterpolation(fragment:)`, `SQL.joined`) makes them binds of the enclosing statement, in
// place (numbered `$1…$N` once, when the statement is prepared), so values never reach the text.

extension SQL {
    /// `WITH name AS (sql), … final`: a single statement whose data-modifying CTEs all run once,
    /// whether or not `final` reads them (PostgreSQL docs, "Data-Modifying Statements in WITH").
    /// Built in one pass: each part is spliced once (`appendInterpolation(fragment:)`).
    static func with(_ ctes: [(name: String, sql: SQL)], _ final: SQL) -> SQL {
        guard !ctes.isEmpty else { return final }
        // Sized for the whole statement up front (the login's is ~1.5 kB with ~20 binds).
        let length = ctes.reduce(final.composed.count + 8) { $0 + $1.name.utf8.count + $1.sql.composed.count + 8 }
        let binds = ctes.reduce(final.binds.count) { $0 + $1.sql.binds.count }
        var statement = SQL.StringInterpolation(literalCapacity: length, interpolationCount: binds)
        statement.appendLiteral("WITH ")
        for (i, cte) in ctes.enumerated() {
            if i > 0 { statement.appendLiteral(",\n") }
            statement.appendInterpolation(unsafeRaw: cte.name)
            statement.appendLiteral(" AS (")
            statement.appendInterpolation(fragment: cte.sql)
            statement.appendLiteral(")")
        }
        statement.appendLiteral("\n")
        statement.appendInterpolation(fragment: final)
        return SQL(stringInterpolation: statement)
    }
}

/// A column that could not be read as what the schema promises; becomes `.unavailable`.
struct ColumnDecodeError: Error, CustomStringConvertible {
    let column: String
    let reason: String
    var description: String { "column \(column): \(reason)" }
}

extension Row {
    /// A text column holding one of `Value`'s raw values (the schema's CHECK keeps it so): decoded at
    /// the storage edge like `CeremonyKind`, anything else is an error naming the column.
    func value<Value: RawRepresentable>(_ column: String, as _: Value.Type = Value.self) throws -> Value where Value.RawValue == String {
        let raw = try string(column)
        guard let value = Value(rawValue: raw) else { throw ColumnDecodeError(column: column, reason: "unknown value \(raw)") }
        return value
    }

    /// `value`, or nil for NULL.
    func optionalValue<Value: RawRepresentable>(_ column: String, as _: Value.Type = Value.self) throws -> Value? where Value.RawValue == String {
        try isNull(column) ? nil : try value(column, as: Value.self)
    }

    /// A json/jsonb column selected as `::text`.
    func jsonValue(_ column: String) throws -> JSONValue {
        do { return try JSONParser.parse(try string(column)) } catch let error as JSONError {
            throw ColumnDecodeError(column: column, reason: error.description)
        }
    }

    /// A jsonb array of strings selected as `::text` (transports, fingerprints).
    func stringArray(_ column: String) throws -> [String] {
        guard let array = try jsonValue(column).arrayValue else { throw ColumnDecodeError(column: column, reason: "not a JSON array") }
        return array.compactMap(\.stringValue)
    }
}
