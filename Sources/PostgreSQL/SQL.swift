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
    }
}
