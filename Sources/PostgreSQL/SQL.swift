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
    /// The statement as composed, as UTF-8. In a statement built by interpolation each bind's
    /// place is the byte `bindMarker`, in the order of `binds`: splicing one statement into another
    /// is then a copy of bytes and binds, and the markers are numbered `$1…$N` only when the text
    /// is needed (a statement's first prepare). A statement written with explicit `$N`
    /// placeholders (`init(_:binds:)`, `init(unsafeRaw:binds:)`, a plain literal) keeps its text
    /// as written (`explicitPlaceholders`). Also the prepared-statement cache key.
    package private(set) var composed: [UInt8]
    public private(set) var binds: [PostgresValue]
    package let explicitPlaceholders: Bool

    /// Where a bind goes in `composed`: a control byte no SQL the code writes contains (values
    /// never reach the text; `unsafeRaw:` text is checked for it).
    static let bindMarker: UInt8 = 0x01

    /// The statement text as UTF-8, with `$1…$N` placeholders.
    public var utf8: [UInt8] { explicitPlaceholders ? composed : SQL.numbered(composed) }

    /// The statement text, with `$1…$N` placeholders.
    public var text: String { String(decoding: utf8, as: UTF8.self) }

    /// A statement from a literal with explicit `$N` placeholders.
    public init(_ text: StaticString, binds: [PostgresValue] = []) {
        self.composed = Array(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
        self.binds = binds
        self.explicitPlaceholders = true
    }

    /// A statement whose text was assembled at run time. The label is the warning: no client
    /// input may reach `text`; values go in `binds`.
    public init(unsafeRaw text: String, binds: [PostgresValue] = []) {
        self.composed = Array(text.utf8)
        self.binds = binds
        self.explicitPlaceholders = true
    }

    public init(stringLiteral value: String) {
        self.composed = Array(value.utf8)
        self.binds = []
        self.explicitPlaceholders = true
    }

    public init(stringInterpolation: StringInterpolation) {
        self.composed = stringInterpolation.bytes
        self.binds = stringInterpolation.binds
        self.explicitPlaceholders = false
    }

    /// Two statements are equal when they send the same text and values, however they were composed.
    public static func == (a: SQL, b: SQL) -> Bool { a.utf8 == b.utf8 && a.binds == b.binds }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(utf8)
        hasher.combine(binds)
    }

    /// Shows the text only; bind values may be secrets.
    public var description: String { "SQL(\(text), \(binds.count) binds)" }

    /// `composed` with its markers numbered `$1…$N` in order (memchr finds each; most is text).
    static func numbered(_ composed: [UInt8]) -> [UInt8] {
        composed.withUnsafeBufferPointer { source in
            guard let base = source.baseAddress,
                  var marker = memchr(base, Int32(bindMarker), source.count).map({ UnsafeRawPointer($0) - UnsafeRawPointer(base) })
            else { return composed }
            var out: [UInt8] = []
            out.reserveCapacity(source.count + 32)
            var runStart = 0, n = 0
            while true {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: source[runStart..<marker]))
                n += 1
                out.append(UInt8(ascii: "$"))
                StringInterpolation.appendDecimal(n, to: &out)
                runStart = marker + 1
                guard runStart < source.count, let next = memchr(base + runStart, Int32(bindMarker), source.count - runStart) else { break }
                marker = UnsafeRawPointer(next) - UnsafeRawPointer(base)
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: source[runStart..<source.count]))
            return out
        }
    }

    public struct StringInterpolation: StringInterpolationProtocol, Sendable {
        var bytes: [UInt8] = []
        var binds: [PostgresValue] = []

        public init(literalCapacity: Int, interpolationCount: Int) {
            bytes.reserveCapacity(literalCapacity + interpolationCount)
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

        /// A bind parameter: its marker goes in the text (`$N` once numbered).
        public mutating func appendInterpolation(_ value: some PostgresBindable) {
            binds.append(value.postgresValue)
            bytes.append(SQL.bindMarker)
        }

        /// A bind parameter that is NULL when the value is nil.
        public mutating func appendInterpolation<Value: PostgresBindable>(_ value: Value?) {
            binds.append(value?.postgresValue ?? .null)
            bytes.append(SQL.bindMarker)
        }

        /// Spliced verbatim into the statement text. Never pass client input.
        public mutating func appendInterpolation(unsafeRaw raw: String) {
            var raw = raw
            raw.withUTF8 { text in
                precondition(text.isEmpty || memchr(text.baseAddress!, Int32(SQL.bindMarker), text.count) == nil,
                             "raw SQL text contains the bind marker byte")
                bytes.append(contentsOf: text)
            }
        }

        /// Splices another statement: its binds follow this one's, in place, so values still never
        /// reach the text. A composed statement is copied as it is (its markers stay in bind
        /// order). One written with explicit `$N` has each placeholder turned into a marker, its
        /// bind appended once per use; such fragments are code's own SQL: no dollar-quoted strings
        /// and no `$` followed by a digit inside literals.
        public mutating func appendInterpolation(fragment: SQL) {
            Self.reserve(&binds, adding: fragment.binds.count)
            Self.reserve(&bytes, adding: fragment.composed.count)
            guard fragment.explicitPlaceholders, !fragment.binds.isEmpty else {
                binds.append(contentsOf: fragment.binds)
                bytes.append(contentsOf: fragment.composed)
                return
            }
            fragment.composed.withUnsafeBufferPointer { source in
                guard let base = source.baseAddress else { return }
                var runStart = 0, i = 0
                while i < source.count {
                    guard let dollar = memchr(base + i, Int32(UInt8(ascii: "$")), source.count - i) else { break }
                    i = UnsafeRawPointer(dollar) - UnsafeRawPointer(base)
                    guard i + 1 < source.count, Self.isDigit(source[i + 1]) else {
                        i += 1
                        continue
                    }
                    bytes.append(contentsOf: UnsafeBufferPointer(rebasing: source[runStart..<i]))  // up to the `$`
                    var n = 0
                    i += 1
                    while i < source.count, Self.isDigit(source[i]) {
                        n = n * 10 + Int(source[i] &- 0x30)
                        i += 1
                    }
                    precondition(n >= 1 && n <= fragment.binds.count, "fragment placeholder $\(n) has no bind")
                    binds.append(fragment.binds[n - 1])
                    bytes.append(SQL.bindMarker)
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

        static func appendDecimal(_ value: Int, to out: inout [UInt8]) {
            if value >= 10 { appendDecimal(value / 10, to: &out) }
            out.append(UInt8(truncatingIfNeeded: 0x30 + value % 10))
        }
    }

    /// This statement with `cte` as the first entry of its WITH list, named `name` (a WITH added
    /// when it has none); nil when the statement is not one a CTE may lead (it begins with neither
    /// WITH, INSERT, UPDATE, DELETE nor SELECT).
    func leading(cte name: String, _ cte: SQL) -> SQL? {
        var spliced = StringInterpolation(literalCapacity: 0, interpolationCount: 0)
        spliced.appendInterpolation(fragment: self)
        let text = spliced.bytes
        var start = 0
        while start < text.count, text[start] == 0x20 || text[start] == 0x0A || text[start] == 0x09 || text[start] == 0x0D { start += 1 }
        var end = start
        while end < text.count, Self.isWordByte(text[end]) { end += 1 }
        let first = text[start..<end]
        var out = StringInterpolation(literalCapacity: text.count + cte.composed.count + name.utf8.count + 16,
                                      interpolationCount: binds.count + cte.binds.count)
        if Self.matches(first, Array("WITH".utf8)) {
            // After WITH (and RECURSIVE, which a plain CTE may follow): `name AS (cte), ` and the rest.
            var afterWith = end
            var probe = end
            while probe < text.count, text[probe] == 0x20 || text[probe] == 0x0A || text[probe] == 0x09 || text[probe] == 0x0D { probe += 1 }
            var probeEnd = probe
            while probeEnd < text.count, Self.isWordByte(text[probeEnd]) { probeEnd += 1 }
            if Self.matches(text[probe..<probeEnd], Array("RECURSIVE".utf8)) { afterWith = probeEnd }
            out.bytes.append(contentsOf: text[..<afterWith])
            out.appendLiteral(" \(name) AS (")
            out.appendInterpolation(fragment: cte)
            out.appendLiteral("),")
            out.bytes.append(contentsOf: text[afterWith...])
        } else if ["INSERT", "UPDATE", "DELETE", "SELECT"].contains(where: { Self.matches(first, Array($0.utf8)) }) {
            out.appendLiteral("WITH \(name) AS (")
            out.appendInterpolation(fragment: cte)
            out.appendLiteral(") ")
            out.bytes.append(contentsOf: text)
        } else {
            return nil
        }
        // The markers are in text order, and the CTE's come first: its binds, then the statement's.
        out.binds.append(contentsOf: spliced.binds)
        return SQL(stringInterpolation: out)
    }

    /// `parts` one after the other, with `separator` (plain SQL text) between them; linear in the
    /// total length (each part is spliced once).
    public static func joined(_ parts: [SQL], separator: String) -> SQL {
        var result = StringInterpolation(literalCapacity: parts.reduce(0) { $0 + $1.composed.count + separator.utf8.count },
                                         interpolationCount: parts.reduce(0) { $0 + $1.binds.count })
        for (i, part) in parts.enumerated() {
            if i > 0 { result.appendLiteral(separator) }
            result.appendInterpolation(fragment: part)
        }
        return SQL(stringInterpolation: result)
    }
}
