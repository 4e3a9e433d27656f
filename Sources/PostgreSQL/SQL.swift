import Glibc

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
    /// The statement text as UTF-8, with `$1…$N` placeholders: built and spliced as bytes (a
    /// login's statements are composed from fragments per request; String appends cost several
    /// times more), and the prepared-statement cache key.
    public private(set) var utf8: [UInt8]
    public private(set) var binds: [PostgresValue]

    /// The statement text, with `$1…$N` placeholders.
    public var text: String { String(decoding: utf8, as: UTF8.self) }

    /// A statement from a literal with explicit `$N` placeholders.
    public init(_ text: StaticString, binds: [PostgresValue] = []) {
        self.utf8 = Array(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
        self.binds = binds
    }

    /// A statement whose text was assembled at run time. The label is the warning: no client
    /// input may reach `text`; values go in `binds`.
    public init(unsafeRaw text: String, binds: [PostgresValue] = []) {
        self.utf8 = Array(text.utf8)
        self.binds = binds
    }

    public init(stringLiteral value: String) {
        self.utf8 = Array(value.utf8)
        self.binds = []
    }

    public init(stringInterpolation: StringInterpolation) {
        self.utf8 = stringInterpolation.bytes
        self.binds = stringInterpolation.binds
    }

    /// Shows the text only; bind values may be secrets.
    public var description: String { "SQL(\(text), \(binds.count) binds)" }

    public struct StringInterpolation: StringInterpolationProtocol, Sendable {
        var bytes: [UInt8] = []
        var binds: [PostgresValue] = []

        public init(literalCapacity: Int, interpolationCount: Int) {
            bytes.reserveCapacity(literalCapacity + interpolationCount * 3)
            binds.reserveCapacity(interpolationCount)
        }

        public mutating func appendLiteral(_ literal: String) { Self.append(literal, to: &bytes) }

        /// A String's UTF-8 through `withUTF8`: appending a short (inline) string's `utf8` view
        /// walked it byte by byte, ~300 instructions per CTE name or literal piece.
        @inline(__always)
        static func append(_ text: String, to bytes: inout [UInt8]) {
            var text = text
            text.withUTF8 { bytes.append(contentsOf: $0) }
        }

        /// A bind parameter: appends `$N`.
        public mutating func appendInterpolation(_ value: some PostgresBindable) {
            binds.append(value.postgresValue)
            appendPlaceholder()
        }

        /// A bind parameter that is NULL when the value is nil.
        public mutating func appendInterpolation<Value: PostgresBindable>(_ value: Value?) {
            binds.append(value?.postgresValue ?? .null)
            appendPlaceholder()
        }

        private mutating func appendPlaceholder() {
            bytes.append(UInt8(ascii: "$"))
            Self.appendDecimal(binds.count, to: &bytes)
        }

        /// Spliced verbatim into the statement text. Never pass client input.
        public mutating func appendInterpolation(unsafeRaw raw: String) { Self.append(raw, to: &bytes) }

        /// Splices another statement: its binds follow this one's, and each `$N` in its text becomes
        /// `$(M+N)` where M is the number of binds before it, so values still never reach the text.
        /// One pass over the fragment's UTF-8, copying the runs between placeholders. Fragments are
        /// code's own SQL: no dollar-quoted strings and no `$` followed by a digit inside literals.
        public mutating func appendInterpolation(fragment: SQL) {
            let offset = binds.count
            let count = fragment.binds.count
            Self.reserve(&binds, adding: count)
            binds.append(contentsOf: fragment.binds)
            // Renumbering may lengthen a placeholder by a few digits; 3 per bind covers any statement
            // of under a million binds whose placeholders each appear at most once or twice.
            Self.reserve(&bytes, adding: fragment.utf8.count + 3 * count)
            guard offset > 0, count > 0 else {
                bytes.append(contentsOf: fragment.utf8)
                return
            }
            fragment.utf8.withUnsafeBufferPointer { source in
                guard let base = source.baseAddress else { return }
                var runStart = 0, i = 0
                while i < source.count {
                    // memchr finds the next `$` many bytes at a time; most of a fragment is text.
                    guard let dollar = memchr(base + i, Int32(UInt8(ascii: "$")), source.count - i) else { break }
                    i = UnsafeRawPointer(dollar) - UnsafeRawPointer(base)
                    guard i + 1 < source.count, Self.isDigit(source[i + 1]) else {
                        i += 1
                        continue
                    }
                    bytes.append(contentsOf: UnsafeBufferPointer(rebasing: source[runStart...i]))  // up to and with the `$`
                    var n = 0
                    i += 1
                    while i < source.count, Self.isDigit(source[i]) {
                        n = n * 10 + Int(source[i] &- 0x30)
                        i += 1
                    }
                    precondition(n >= 1 && n <= count, "fragment placeholder $\(n) has no bind")
                    Self.appendDecimal(offset + n, to: &bytes)
                    runStart = i
                }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: source[runStart..<source.count]))
            }
        }

        /// Room for `count` more elements, growing geometrically: reserving exactly `count + n` on
        /// every splice reallocated (and copied) the whole statement each time.
        @inline(__always)
        private static func reserve<Element>(_ array: inout [Element], adding count: Int) {
            let needed = array.count + count
            if array.capacity < needed { array.reserveCapacity(Swift.max(needed, 2 * array.capacity)) }
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
        var result = StringInterpolation(literalCapacity: parts.reduce(0) { $0 + $1.utf8.count + separator.utf8.count },
                                         interpolationCount: parts.reduce(0) { $0 + $1.binds.count })
        for (i, part) in parts.enumerated() {
            if i > 0 { result.appendLiteral(separator) }
            result.appendInterpolation(fragment: part)
        }
        return SQL(stringInterpolation: result)
    }
}
