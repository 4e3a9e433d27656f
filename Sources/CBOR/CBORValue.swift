/// A decoded CBOR data item (RFC 8949). Maps keep their pairs in encoded order.
public enum CBORValue: Sendable, Hashable {
    case unsigned(UInt64)
    /// The negative integer `-1 - n`.
    case negative(UInt64)
    case bytes([UInt8])
    case text(String)
    case array([CBORValue])
    case map([CBORPair])
    case tagged(UInt64, Box)
    case bool(Bool)
    case null
    case undefined
    case simple(UInt8)
    case float(Double)

    /// Indirection for the recursive tagged case.
    public final class Box: Sendable, Hashable {
        public let value: CBORValue
        public init(_ value: CBORValue) { self.value = value }
        public static func == (l: Box, r: Box) -> Bool { l.value == r.value }
        public func hash(into h: inout Hasher) { h.combine(value) }
    }

    public static func int(_ v: Int) -> CBORValue { v >= 0 ? .unsigned(UInt64(v)) : .negative(UInt64(-1 - v)) }

    /// The integer value when it fits in `Int`.
    public var intValue: Int? {
        switch self {
        case .unsigned(let u): return u <= UInt64(Int.max) ? Int(u) : nil
        case .negative(let n): return n <= UInt64(Int.max) ? -1 - Int(n) : nil
        default: return nil
        }
    }
    public var bytesValue: [UInt8]? { if case .bytes(let b) = self { return b } else { return nil } }
    public var textValue: String? { if case .text(let s) = self { return s } else { return nil } }
    public var arrayValue: [CBORValue]? { if case .array(let a) = self { return a } else { return nil } }
    public var mapValue: [CBORPair]? { if case .map(let m) = self { return m } else { return nil } }
    public var boolValue: Bool? { if case .bool(let b) = self { return b } else { return nil } }

    /// Value of the map entry with this key (maps only; keys are unique after strict decoding).
    public subscript(key: CBORValue) -> CBORValue? {
        guard case .map(let pairs) = self else { return nil }
        for pair in pairs where pair.key == key { return pair.value }
        return nil
    }
    public subscript(text key: String) -> CBORValue? { self[.text(key)] }
    public subscript(int key: Int) -> CBORValue? { self[.int(key)] }
}

public struct CBORPair: Sendable, Hashable {
    public let key: CBORValue
    public let value: CBORValue
    public init(_ key: CBORValue, _ value: CBORValue) { self.key = key; self.value = value }
}

/// Why CBOR bytes were refused. `code` is stable; `reason` is safe to show.
public struct CBORError: Error, Hashable, CustomStringConvertible, Sendable {
    public enum Code: String, Sendable { case malformed, truncated, trailingBytes, indefiniteLength,
        duplicateMapKey, tooDeep, tooLarge, invalidUTF8 }
    public let code: Code
    public let reason: String
    public init(_ code: Code, _ reason: String) { self.code = code; self.reason = reason }
    public var description: String { "CBOR \(code.rawValue): \(reason)" }
    public static func == (l: CBORError, r: CBORError) -> Bool { l.code == r.code }
    public func hash(into h: inout Hasher) { h.combine(code) }
}
