import JSON
import PostgreSQL

// Statements here are built from shared fragments (the one credential-use UPDATE, the one
// refresh-family insert, the one audit insert) so that each thing is written in SQL exactly once.
// A fragment is an ordinary `SQL` value with its own `$1…$N`; splicing renumbers them as binds of
// the enclosing statement, so values still never reach the statement text.

extension SQL.StringInterpolation {
    /// Splices `fragment`, turning each of its `$N` placeholders into a bind of this statement.
    /// Fragments are Storage's own SQL: no dollar-quoted strings and no `$` inside literals.
    mutating func appendInterpolation(fragment: SQL) {
        let text = Array(fragment.text.utf8)
        var literal: [UInt8] = []
        var i = 0
        while i < text.count {
            if text[i] == UInt8(ascii: "$"), i + 1 < text.count, (0x30...0x39).contains(text[i + 1]) {
                var n = 0
                i += 1
                while i < text.count, (0x30...0x39).contains(text[i]) {
                    n = n * 10 + Int(text[i] - 0x30)
                    i += 1
                }
                appendLiteral(String(decoding: literal, as: UTF8.self))
                literal.removeAll(keepingCapacity: true)
                appendInterpolation(fragment.binds[n - 1])
            } else {
                literal.append(text[i])
                i += 1
            }
        }
        appendLiteral(String(decoding: literal, as: UTF8.self))
    }
}

extension SQL {
    /// `parts` one after the other, with `separator` (plain SQL text) between them.
    static func joined(_ parts: [SQL], separator: String) -> SQL {
        var result: SQL = ""
        for (i, part) in parts.enumerated() {
            result = i == 0 ? "\(fragment: part)" : "\(fragment: result)\(unsafeRaw: separator)\(fragment: part)"
        }
        return result
    }

    /// `WITH name AS (sql), … final`: a single statement whose data-modifying CTEs all run once,
    /// whether or not `final` reads them (PostgreSQL docs, "Data-Modifying Statements in WITH").
    static func with(_ ctes: [(name: String, sql: SQL)], _ final: SQL) -> SQL {
        guard !ctes.isEmpty else { return final }
        let list = SQL.joined(ctes.map { "\(unsafeRaw: $0.name) AS (\(fragment: $0.sql))" }, separator: ",\n")
        return "WITH \(fragment: list)\n\(fragment: final)"
    }
}

/// A column that could not be read as what the schema promises; becomes `.unavailable`.
struct ColumnDecodeError: Error, CustomStringConvertible {
    let column: String
    let reason: String
    var description: String { "column \(column): \(reason)" }
}

extension Row {
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
