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

    /// The parameter's bytes; text values get a terminating NUL (libpq reads them as C strings).
    /// `nil` is SQL NULL.
    var wireBytes: [UInt8]? {
        switch self {
        case .null:
            return nil
        case .text(let s), .json(let s):
            var bytes = Array(s.utf8)
            // A NUL inside text is not representable in PostgreSQL; libpq would silently
            // truncate at it, so the encoder rejects it earlier (see SQL binding).
            bytes.append(0)
            return bytes
        case .int64(let v):
            return bigEndianBytes(UInt64(bitPattern: v))
        case .bool(let b):
            return [b ? 1 : 0]
        case .bytea(let bytes):
            return bytes
        case .double(let d):
            return bigEndianBytes(d.bitPattern)
        case .timestamptz(let date):
            // Binary timestamptz: int64 microseconds since 2000-01-01 UTC.
            let micros = (date.timeIntervalSince1970 - Double(postgresEpochUnixSeconds)) * 1_000_000
            let clamped = max(-9.2e18, min(9.2e18, micros.rounded()))
            return bigEndianBytes(UInt64(bitPattern: Int64(clamped)))
        }
    }

    var containsNUL: Bool {
        switch self {
        case .text(let s), .json(let s): s.utf8.contains(0)
        default: false
        }
    }
}

private func bigEndianBytes(_ value: UInt64) -> [UInt8] {
    (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * UInt64($0))) }
}
