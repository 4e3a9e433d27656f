#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// A result's column names, their index and type OIDs. A prepared statement's result always has
/// the same shape (PostgreSQL refuses to run one whose result type changed), so one layout is built
/// per prepared statement and shared by every result it returns.
final class ColumnLayout: Sendable {
    let columns: [String]
    let columnTypes: [UInt32]
    /// Per column, `fingerprint(of:)` its name: a lookup compares these integers and compares
    /// names only where one matches (hashing a name cost ~500 instructions, a String comparison
    /// that fails ~40, and a login reads ~26 columns of one wide row by name).
    let fingerprints: [UInt64]

    init(columns: [String], columnTypes: [UInt32]) {
        self.columns = columns
        self.columnTypes = columnTypes
        self.fingerprints = columns.map(ColumnLayout.fingerprint)
    }

    /// A name's length and first seven bytes in one integer. Equal names have equal fingerprints;
    /// different names may share one (the names are compared then).
    static func fingerprint(of name: String) -> UInt64 {
        var name = name
        return name.withUTF8 { bytes in
            var value = UInt64(truncatingIfNeeded: bytes.count) << 56
            for i in 0..<min(7, bytes.count) { value |= UInt64(bytes[i]) << (8 * UInt64(i)) }
            return value
        }
    }

    /// The first column with this name.
    func index(of column: String) -> Int? {
        let wanted = ColumnLayout.fingerprint(of: column)
        return fingerprints.withUnsafeBufferPointer { fingerprints in
            for i in fingerprints.indices where fingerprints[i] == wanted && columns[i] == column { return i }
            return nil
        }
    }
}

/// The rows of one result, copied out of libpq (text format) so no C memory outlives the call.
final class ResultStorage: Sendable {
    let layout: ColumnLayout
    var columns: [String] { layout.columns }
    var columnTypes: [UInt32] { layout.columnTypes }
    let rowCount: Int
    /// Per cell (row-major): start offset in `bytes` and length, or length -1 for NULL.
    let cells: [(start: Int, length: Int)]
    let bytes: [UInt8]

    init(layout: ColumnLayout, rowCount: Int, cells: [(start: Int, length: Int)], bytes: [UInt8]) {
        self.layout = layout
        self.rowCount = rowCount
        self.cells = cells
        self.bytes = bytes
    }
}

/// One result row. Accessors name the column; a NULL or unparsable value throws a `.decode`
/// `PostgresError` naming it. `optional…` variants return nil for NULL.
public struct Row: Sendable {
    let storage: ResultStorage
    let row: Int

    /// Column names, in result order.
    public var columns: [String] { storage.columns }

    // MARK: required values

    public func string(_ column: String) throws -> String { try required(column, decodeString) }
    public func int(_ column: String) throws -> Int { try required(column, decodeInt) }
    public func int64(_ column: String) throws -> Int64 { try required(column, decodeInt64) }
    public func bool(_ column: String) throws -> Bool { try required(column, decodeBool) }
    public func double(_ column: String) throws -> Double { try required(column, decodeDouble) }
    /// A `bytea` column's bytes.
    public func bytes(_ column: String) throws -> [UInt8] { try required(column, decodeBytes) }
    /// A `timestamptz`, `timestamp` (read as UTC) or `date` column.
    public func date(_ column: String) throws -> Date { try required(column, decodeDate) }
    /// A `json`/`jsonb` (or any) column's text.
    public func json(_ column: String) throws -> String { try required(column, decodeString) }

    // MARK: optional values (NULL → nil)

    public func optionalString(_ column: String) throws -> String? { try optional(column, decodeString) }
    public func optionalInt(_ column: String) throws -> Int? { try optional(column, decodeInt) }
    public func optionalInt64(_ column: String) throws -> Int64? { try optional(column, decodeInt64) }
    public func optionalBytes(_ column: String) throws -> [UInt8]? { try optional(column, decodeBytes) }
    public func optionalDate(_ column: String) throws -> Date? { try optional(column, decodeDate) }
    public func optionalDouble(_ column: String) throws -> Double? { try optional(column, decodeDouble) }
    /// A text column of comma-separated hex as `string_agg(encode(x, 'hex'), ',')` writes it: one
    /// byte string per piece; NULL (an aggregate over no rows) is the empty list.
    public func hexList(_ column: String) throws -> [[UInt8]] { try optional(column, decodeHexList) ?? [] }

    /// Whether the column is SQL NULL (throws when there is no such column).
    public func isNull(_ column: String) throws -> Bool {
        try storage.cells[row * storage.columns.count + index(column)].length < 0
    }

    // MARK: - decoding

    private typealias Decoder<T> = (_ bytes: ArraySlice<UInt8>, _ type: UInt32, _ column: String) throws -> T

    private func index(_ column: String) throws -> Int {
        guard let index = storage.layout.index(of: column) else {
            throw PostgresError(.decode, "no column named '\(column)' in the result", column: column)
        }
        return index
    }

    private func optional<T>(_ column: String, _ decode: Decoder<T>) throws -> T? {
        let index = try index(column)
        let c = storage.cells[row * storage.columns.count + index]
        guard c.length >= 0 else { return nil }
        return try decode(storage.bytes[c.start..<(c.start + c.length)], storage.columnTypes[index], column)
    }

    private func required<T>(_ column: String, _ decode: Decoder<T>) throws -> T {
        guard let value = try optional(column, decode) else {
            throw PostgresError(.decode, "column '\(column)' is NULL", column: column)
        }
        return value
    }
}

private func failure(_ column: String, _ type: UInt32, _ wanted: String) -> PostgresError {
    PostgresError(.decode, "column '\(column)' (type oid \(type)) is not a valid \(wanted)", column: column)
}

private func decodeString(_ bytes: ArraySlice<UInt8>, _ type: UInt32, _ column: String) throws -> String {
    String(decoding: bytes, as: UTF8.self)
}

private func decodeInt64(_ bytes: ArraySlice<UInt8>, _ type: UInt32, _ column: String) throws -> Int64 {
    guard let value = Int64(String(decoding: bytes, as: UTF8.self)) else {
        throw failure(column, type, "integer")
    }
    return value
}

private func decodeInt(_ bytes: ArraySlice<UInt8>, _ type: UInt32, _ column: String) throws -> Int {
    Int(try decodeInt64(bytes, type, column))
}

private func decodeBool(_ bytes: ArraySlice<UInt8>, _ type: UInt32, _ column: String) throws -> Bool {
    switch String(decoding: bytes, as: UTF8.self) {
    case "t", "true": return true
    case "f", "false": return false
    default: throw failure(column, type, "boolean")
    }
}

private func decodeDouble(_ bytes: ArraySlice<UInt8>, _ type: UInt32, _ column: String) throws -> Double {
    let text = String(decoding: bytes, as: UTF8.self)
    switch text {
    case "Infinity": return .infinity
    case "-Infinity": return -.infinity
    case "NaN": return .nan
    default:
        guard let value = Double(text) else { throw failure(column, type, "number") }
        return value
    }
}

/// bytea in text format: `\x` followed by hex (the default `bytea_output`), or the legacy
/// escape format.
private func decodeBytes(_ bytes: ArraySlice<UInt8>, _ type: UInt32, _ column: String) throws -> [UInt8] {
    guard type == 17 else { throw failure(column, type, "bytea") }
    if bytes.count >= 2, bytes[bytes.startIndex] == UInt8(ascii: "\\"), bytes[bytes.startIndex + 1] == UInt8(ascii: "x") {
        guard let out = hexDigits(bytes.dropFirst(2)) else { throw failure(column, type, "bytea") }
        return out
    }
    // Escape format: backslash + three octal digits, `\\` for a backslash, other bytes verbatim.
    var out = [UInt8]()
    var i = bytes.startIndex
    while i < bytes.endIndex {
        let b = bytes[i]
        if b != UInt8(ascii: "\\") { out.append(b); i += 1; continue }
        if i + 1 < bytes.endIndex, bytes[i + 1] == UInt8(ascii: "\\") { out.append(b); i += 2; continue }
        guard i + 3 < bytes.endIndex else { throw failure(column, type, "bytea") }
        var value: UInt16 = 0
        for j in 1...3 {
            let d = bytes[i + j]
            guard d >= UInt8(ascii: "0"), d <= UInt8(ascii: "7") else { throw failure(column, type, "bytea") }
            value = value * 8 + UInt16(d - UInt8(ascii: "0"))
        }
        guard value <= 255 else { throw failure(column, type, "bytea") }
        out.append(UInt8(value))
        i += 4
    }
    return out
}

/// Pairs of hex digits (either case) → bytes; nil for an odd count or any other character.
private func hexDigits(_ hex: ArraySlice<UInt8>) -> [UInt8]? {
    guard hex.count % 2 == 0 else { return nil }
    let count = hex.count / 2
    var valid = true
    let out = hex.withUnsafeBufferPointer { source in
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            for i in 0..<count {
                guard let hi = hexValue(source[2 * i]), let lo = hexValue(source[2 * i + 1]) else { valid = false; break }
                buffer[i] = hi << 4 | lo
            }
            initialized = valid ? count : 0
        }
    }
    return valid ? out : nil
}

/// `string_agg(encode(x, 'hex'), ',')`: comma-separated hex, each piece one value's bytes.
private func decodeHexList(_ bytes: ArraySlice<UInt8>, _ type: UInt32, _ column: String) throws -> [[UInt8]] {
    try bytes.split(separator: UInt8(ascii: ",")).map { piece in
        guard let value = hexDigits(piece) else { throw failure(column, type, "comma-separated hex list") }
        return value
    }
}

private func hexValue(_ c: UInt8) -> UInt8? {
    switch c {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
    default: nil
    }
}

/// `timestamptz` text in `DateStyle=ISO`: `2024-05-06 07:08:09.123456+00`. The offset is the
/// session's `TimeZone` at that instant and is applied, so any zone decodes to the same `Date`:
/// `+01`, `+05:30`, `-08`, and local mean time's seconds (`+05:53:28`, Kolkata before 1942);
/// ` BC` may follow. Connections without transaction pooling run in UTC, pooled ones in whatever
/// the server says. `timestamp` without an offset is read as UTC; `date` is midnight UTC;
/// `infinity` maps to `Date.distantFuture`.
private func decodeDate(_ bytes: ArraySlice<UInt8>, _ type: UInt32, _ column: String) throws -> Date {
    guard type == 1184 || type == 1114 || type == 1082 else { throw failure(column, type, "timestamp") }
    var text = Array(bytes)
    if text == Array("infinity".utf8) { return .distantFuture }
    if text == Array("-infinity".utf8) { return .distantPast }
    var bc = false
    if text.count > 3, text.suffix(3) == Array(" BC".utf8)[...] { bc = true; text.removeLast(3) }
    var p = 0
    func number(_ minDigits: Int, _ maxDigits: Int) -> Int? {
        var value = 0, count = 0
        while p < text.count, count < maxDigits, text[p] >= 48, text[p] <= 57 {
            value = value * 10 + Int(text[p] - 48); p += 1; count += 1
        }
        return count >= minDigits ? value : nil
    }
    func expect(_ c: Character) -> Bool {
        guard p < text.count, text[p] == c.asciiValue! else { return false }
        p += 1
        return true
    }
    guard var year = number(4, 9), expect("-"), let month = number(2, 2), expect("-"),
          let day = number(2, 2), (1...12).contains(month), (1...31).contains(day)
    else { throw failure(column, type, "timestamp") }
    if bc { year = 1 - year }
    var seconds = 0, micros = 0, offset = 0
    if p < text.count {
        guard expect(" "), let h = number(2, 2), expect(":"), let m = number(2, 2), expect(":"),
              let s = number(2, 2) else { throw failure(column, type, "timestamp") }
        seconds = h * 3600 + m * 60 + s
        if expect(".") {
            let start = p
            guard let fraction = number(1, 6) else { throw failure(column, type, "timestamp") }
            micros = fraction
            for _ in (p - start)..<6 { micros *= 10 }
        }
        if p < text.count {
            let sign: Int
            if expect("+") { sign = 1 } else if expect("-") { sign = -1 } else { throw failure(column, type, "timestamp") }
            guard let oh = number(2, 2) else { throw failure(column, type, "timestamp") }
            var off = oh * 3600
            if expect(":") {
                guard let om = number(2, 2) else { throw failure(column, type, "timestamp") }
                off += om * 60
                if expect(":") {
                    guard let os = number(2, 2) else { throw failure(column, type, "timestamp") }
                    off += os
                }
            }
            offset = sign * off
        }
        guard p == text.count else { throw failure(column, type, "timestamp") }
    }
    let days = daysFromCivil(year: year, month: month, day: day)
    let unixSeconds = days * 86_400 + seconds - offset
    return Date(timeIntervalSince1970: Double(unixSeconds) + Double(micros) / 1_000_000)
}

/// Days since 1970-01-01 in the proleptic Gregorian calendar (Howard Hinnant's algorithm).
private func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yoe = y - era * 400
    let mp = (month + 9) % 12
    let doy = (153 * mp + 2) / 5 + day - 1
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
    return era * 146_097 + doe - 719_468
}
