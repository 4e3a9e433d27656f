import Glibc

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// A bind parameter. Every value reaches the server as a `$N` parameter, never as SQL text.
///
/// Parameter types sent to the server: `text` → text, `int64` → int8, `bool` → bool,
/// `bytea` → bytea (binary format, any bytes including zeros), `double` → float8,
/// `timestamptz` → timestamptz (binary, microsecond precision), `json` → json, `null` → unknown
/// (the server infers it). Other column types need an explicit cast in the SQL: `$1::uuid`,
/// `$1::jsonb`, `$1::my_enum`.
public enum PostgresValue: Sendable, Hashable {
    case null
    case text(String)
    case int64(Int64)
    case bool(Bool)
    case bytea([UInt8])
    case double(Double)
    case timestamptz(Date)
    case json(String)

    public static func int(_ value: Int) -> PostgresValue { .int64(Int64(value)) }
    /// A timestamp given as seconds since 1970-01-01T00:00:00Z.
    public static func timestamptz(epochSeconds: Double) -> PostgresValue {
        .timestamptz(Date(timeIntervalSince1970: epochSeconds))
    }
}

/// Types that convert to a bind parameter; used by `SQL` string interpolation.
public protocol PostgresBindable {
    var postgresValue: PostgresValue { get }
}

extension PostgresValue: PostgresBindable { public var postgresValue: PostgresValue { self } }
extension String: PostgresBindable { public var postgresValue: PostgresValue { .text(self) } }
extension Substring: PostgresBindable { public var postgresValue: PostgresValue { .text(String(self)) } }
extension Int: PostgresBindable { public var postgresValue: PostgresValue { .int64(Int64(self)) } }
extension Int64: PostgresBindable { public var postgresValue: PostgresValue { .int64(self) } }
extension Int32: PostgresBindable { public var postgresValue: PostgresValue { .int64(Int64(self)) } }
extension Bool: PostgresBindable { public var postgresValue: PostgresValue { .bool(self) } }
extension Double: PostgresBindable { public var postgresValue: PostgresValue { .double(self) } }
extension Date: PostgresBindable { public var postgresValue: PostgresValue { .timestamptz(self) } }
extension Array: PostgresBindable where Element == UInt8 {
    public var postgresValue: PostgresValue { .bytea(self) }
}
extension Optional: PostgresBindable where Wrapped: PostgresBindable {
    public var postgresValue: PostgresValue { self?.postgresValue ?? .null }
}

// MARK: - Wire encoding

/// PostgreSQL's epoch (2000-01-01T00:00:00Z) in Unix seconds.
let postgresEpochUnixSeconds: Int64 = 946_684_800

extension PostgresValue {
    /// Type OID sent with the parameter (0 lets the server infer it).
    var typeOID: UInt32 {
        switch self {
        case .null: 0
        case .text: 25
        case .int64: 20
        case .bool: 16
        case .bytea: 17
        case .double: 701
        case .timestamptz: 1184
        case .json: 114
        }
    }

    /// Whether the value is sent in binary format (1) or text (0).
    var format: Int32 {
        switch self {
        case .null, .text, .json: 0
        case .int64, .bool, .bytea, .double, .timestamptz: 1
        }
    }

    var containsNUL: Bool {
        switch self {
        case .text(let s), .json(let s):
            // memchr over the contiguous UTF-8 (every bind's text is scanned once per statement).
            { var text = s; return text.withUTF8 { $0.isEmpty ? false : memchr($0.baseAddress!, 0, $0.count) != nil } }()
        default: false
        }
    }
}

/// A statement's bind parameters as libpq's `PQsendQueryParams`/`PQsendQueryPrepared` take them,
/// built in one pass: every value's bytes in one buffer (text with a terminating NUL, since libpq
/// reads text values as C strings), beside each parameter's type OID, length and format. A login
/// binds ~40 values; one buffer instead of an array per value is ~1 k instructions per statement less.
struct WireParameters {
    private(set) var types: [UInt32] = []
    private(set) var formats: [Int32] = []
    private(set) var lengths: [Int32] = []
    /// Start of each value in `bytes`; -1 for SQL NULL.
    private var offsets: [Int] = []
    private var bytes: [UInt8] = []

    var count: Int { types.count }

    init(_ binds: [PostgresValue]) {
        types.reserveCapacity(binds.count)
        formats.reserveCapacity(binds.count)
        lengths.reserveCapacity(binds.count)
        offsets.reserveCapacity(binds.count)
        // The exact size (a String's UTF-8 count is stored), so the buffer is allocated once.
        bytes.reserveCapacity(binds.reduce(1) { total, value in
            switch value {
            case .null: total
            case .text(let s), .json(let s): total + s.utf8.count + 1
            case .bytea(let data): total + data.count
            case .bool: total + 1
            case .int64, .double, .timestamptz: total + 8
            }
        })
        for value in binds { append(value) }
        bytes.append(0)  // past the last value: a zero-length value still gets a valid pointer
    }

    private mutating func append(_ value: PostgresValue) {
        let start = bytes.count
        switch value {
        case .null:
            types.append(0); formats.append(0); lengths.append(0); offsets.append(-1)
            return
        case .text(let s), .json(let s):
            // A NUL inside text is not representable in PostgreSQL; libpq would silently truncate
            // at it, so the encoder rejects it earlier (see SQL binding).
            SQL.StringInterpolation.append(s, to: &bytes)
            bytes.append(0)
        case .int64(let v):
            appendBigEndian(UInt64(bitPattern: v))
        case .bool(let b):
            bytes.append(b ? 1 : 0)
        case .bytea(let data):
            bytes.append(contentsOf: data)
        case .double(let d):
            appendBigEndian(d.bitPattern)
        case .timestamptz(let date):
            // Binary timestamptz: int64 microseconds since 2000-01-01 UTC.
            let micros = (date.timeIntervalSince1970 - Double(postgresEpochUnixSeconds)) * 1_000_000
            let clamped = max(-9.2e18, min(9.2e18, micros.rounded()))
            appendBigEndian(UInt64(bitPattern: Int64(clamped)))
        }
        types.append(value.typeOID)
        formats.append(value.format)
        lengths.append(Int32(bytes.count - start))
        offsets.append(start)
    }

    private mutating func appendBigEndian(_ value: UInt64) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    /// Calls `body` with the C array of value pointers (NULL for SQL NULL), valid during the call.
    func withValuePointers<R>(_ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R) -> R {
        bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { chars in
                let base = chars.baseAddress!
                let pointers = offsets.map { $0 < 0 ? nil : UnsafePointer(base + $0) }
                return pointers.withUnsafeBufferPointer { body($0.baseAddress) }
            }
        }
    }
}
