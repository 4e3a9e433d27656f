/// A statement plus its bind parameters.
///
/// Interpolated values become `$N` parameters, so this is safe:
/// ```swift
/// let rows = try conn.query("SELECT id FROM users WHERE username = \(name) AND active = \(true)")
/// // text: "SELECT id FROM users WHERE username = $1 AND active = $2"
/// ```
/// Explicit placeholders work too: `SQL("SELECT $1::int8 + $2", binds: [.int64(1), .int64(2)])`.
/// Text that must be spliced into the statement (an identifier chosen by code, never by a client)
/// needs the visible label `unsafeRaw:`.
public struct SQL: Sendable, Hashable, ExpressibleByStringInterpolation, CustomStringConvertible {
    /// The statement text, with `$1…$N` placeholders. Also the prepared-statement cache key.
    public private(set) var text: String
    public private(set) var binds: [PostgresValue]

    /// A statement from a literal with explicit `$N` placeholders.
    public init(_ text: StaticString, binds: [PostgresValue] = []) {
        self.text = text.description
        self.binds = binds
    }

    /// A statement whose text was assembled at run time. The label is the warning: no client
    /// input may reach `text`; values go in `binds`.
    public init(unsafeRaw text: String, binds: [PostgresValue] = []) {
        self.text = text
        self.binds = binds
    }

    public init(stringLiteral value: String) {
        self.text = value
        self.binds = []
    }

    public init(stringInterpolation: StringInterpolation) {
        self.text = stringInterpolation.text
        self.binds = stringInterpolation.binds
    }

    /// Shows the text only; bind values may be secrets.
    public var description: String { "SQL(\(text), \(binds.count) binds)" }

    public struct StringInterpolation: StringInterpolationProtocol, Sendable {
        var text = ""
        var binds: [PostgresValue] = []

        public init(literalCapacity: Int, interpolationCount: Int) {
            text.reserveCapacity(literalCapacity + interpolationCount * 3)
            binds.reserveCapacity(interpolationCount)
        }

        public mutating func appendLiteral(_ literal: String) { text += literal }

        /// A bind parameter: appends `$N`.
        public mutating func appendInterpolation(_ value: some PostgresBindable) {
            binds.append(value.postgresValue)
            text += "$\(binds.count)"
        }

        /// A bind parameter that is NULL when the value is nil.
        public mutating func appendInterpolation<Value: PostgresBindable>(_ value: Value?) {
            binds.append(value?.postgresValue ?? .null)
            text += "$\(binds.count)"
        }

        /// Spliced verbatim into the statement text. Never pass client input.
        public mutating func appendInterpolation(unsafeRaw raw: String) { text += raw }

        /// Splices another statement: its binds follow this one's, and each `$N` in its text becomes
        /// `$(M+N)` where M is the number of binds before it, so values still never reach the text.
        /// One pass over the fragment's text, copying the runs between placeholders. Fragments are
        /// code's own SQL: no dollar-quoted strings and no `$` followed by a digit inside literals.
        public mutating func appendInterpolation(fragment: SQL) {
            let offset = binds.count
            binds.append(contentsOf: fragment.binds)
            guard offset > 0, !fragment.binds.isEmpty else {
                text += fragment.text
                return
            }
            let source = fragment.text
            let utf8 = source.utf8
            var runStart = utf8.startIndex
            var i = runStart
            while i != utf8.endIndex {
                guard utf8[i] == UInt8(ascii: "$") else {
                    i = utf8.index(after: i)
                    continue
                }
                var j = utf8.index(after: i)
                var n = 0
                while j != utf8.endIndex, (0x30...0x39).contains(utf8[j]) {
                    n = n * 10 + Int(utf8[j] - 0x30)
                    j = utf8.index(after: j)
                }
                if j != utf8.index(after: i) {
                    precondition((1...fragment.binds.count).contains(n), "fragment placeholder $\(n) has no bind")
                    text += source[runStart..<i]
                    text += "$"
                    text += String(offset + n)
                    runStart = j
                }
                i = j
            }
            text += source[runStart...]
        }
    }

    /// `parts` one after the other, with `separator` (plain SQL text) between them; linear in the
    /// total length (each part is spliced once).
    public static func joined(_ parts: [SQL], separator: String) -> SQL {
        var result = StringInterpolation(literalCapacity: 0, interpolationCount: 0)
        for (i, part) in parts.enumerated() {
            if i > 0 { result.appendLiteral(separator) }
            result.appendInterpolation(fragment: part)
        }
        return SQL(stringInterpolation: result)
    }
}
