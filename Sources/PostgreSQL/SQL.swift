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
            text += "$"
            text += String(binds.count)
        }

        /// A bind parameter that is NULL when the value is nil.
        public mutating func appendInterpolation<Value: PostgresBindable>(_ value: Value?) {
            binds.append(value?.postgresValue ?? .null)
            text += "$"
            text += String(binds.count)
        }

        /// Spliced verbatim into the statement text. Never pass client input.
        public mutating func appendInterpolation(unsafeRaw raw: String) { text += raw }

        /// Splices another statement: its binds follow this one's, and each `$N` in its text becomes
        /// `$(M+N)` where M is the number of binds before it, so values still never reach the text.
        /// One pass over the fragment's UTF-8, copying the runs between placeholders. Fragments are
        /// code's own SQL: no dollar-quoted strings and no `$` followed by a digit inside literals.
        public mutating func appendInterpolation(fragment: SQL) {
            let offset = binds.count
            let count = fragment.binds.count
            binds.append(contentsOf: fragment.binds)
            guard offset > 0, count > 0 else {
                text += fragment.text
                return
            }
            var source = fragment.text
            let spliced = source.withUTF8 { bytes -> String in
                var out: [UInt8] = []
                out.reserveCapacity(bytes.count + 2 * count)
                var runStart = 0, i = 0
                while i < bytes.count {
                    guard bytes[i] == UInt8(ascii: "$"), i + 1 < bytes.count, Self.isDigit(bytes[i + 1]) else {
                        i += 1
                        continue
                    }
                    out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...i]))  // up to and with the `$`
                    var n = 0
                    i += 1
                    while i < bytes.count, Self.isDigit(bytes[i]) {
                        n = n * 10 + Int(bytes[i] &- 0x30)
                        i += 1
                    }
                    precondition(n >= 1 && n <= count, "fragment placeholder $\(n) has no bind")
                    Self.appendDecimal(offset + n, to: &out)
                    runStart = i
                }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<bytes.count]))
                return String(decoding: out, as: UTF8.self)
            }
            text += spliced
        }

        private static func isDigit(_ byte: UInt8) -> Bool { byte &- 0x30 < 10 }

        private static func appendDecimal(_ value: Int, to out: inout [UInt8]) {
            if value >= 10 { appendDecimal(value / 10, to: &out) }
            out.append(UInt8(truncatingIfNeeded: 0x30 + value % 10))
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
