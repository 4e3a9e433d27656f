/// A JSON document as Latchkey reads it: objects keep their members in document order (so a body
/// is sent as built, and RFC 8785 sorts them itself), numbers are IEEE doubles (as RFC 8785 and the
/// server treat them).
///
/// The client has its own small JSON model rather than `JSONSerialization` so that what it hashes is
/// exactly what the server hashes: `JSONSerialization` turns `1.0` into an integer `NSNumber`,
/// `true` into `1` on some paths, and loses member order, and none of that may differ between the
/// two sides of an action hash.
public enum LatchkeyJSON: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([LatchkeyJSON])
    case object([(key: String, value: LatchkeyJSON)])

    public static func == (lhs: LatchkeyJSON, rhs: LatchkeyJSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.number(a), .number(b)): return a == b
        case let (.string(a), .string(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)):
            guard a.count == b.count else { return false }
            for (x, y) in zip(a, b) where x.key != y.key || x.value != y.value { return false }
            return true
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let b): hasher.combine(b)
        case .number(let d): hasher.combine(d)
        case .string(let s): hasher.combine(s)
        case .array(let a): hasher.combine(a)
        case .object(let o):
            hasher.combine(o.count)
            for member in o { hasher.combine(member.key); hasher.combine(member.value) }
        }
    }

    /// The member named `key` of an object (nil for a missing member and for non-objects).
    public subscript(key: String) -> LatchkeyJSON? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }

    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    public var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }
    public var doubleValue: Double? { if case .number(let d) = self { d } else { nil } }
    public var arrayValue: [LatchkeyJSON]? { if case .array(let a) = self { a } else { nil } }
    public var isNull: Bool { if case .null = self { true } else { false } }
    /// The number when it is integral and exactly representable.
    public var intValue: Int? {
        guard case .number(let d) = self, d.rounded() == d, abs(d) < 9.0e15 else { return nil }
        return Int(d)
    }

    /// This object with `key` set to `value` (replacing a member of that name, else appended).
    public func setting(_ key: String, _ value: LatchkeyJSON) -> LatchkeyJSON {
        guard case .object(var members) = self else { return self }
        if let i = members.firstIndex(where: { $0.key == key }) { members[i].value = value } else { members.append((key, value)) }
        return .object(members)
    }
}

extension LatchkeyJSON: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral, ExpressibleByFloatLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: LatchkeyJSON...) { self = .array(elements) }
    /// Members in the order written (a dictionary literal keeps its order here).
    public init(dictionaryLiteral elements: (String, LatchkeyJSON)...) { self = .object(elements.map { (key: $0.0, value: $0.1) }) }
    public init(nilLiteral: ()) { self = .null }
}

// MARK: Writing

extension LatchkeyJSON {
    /// Compact JSON text, members in stored order (what the client sends).
    public func serialized() -> [UInt8] {
        var out: [UInt8] = []
        write(into: &out, canonical: false)
        return out
    }

    public var text: String { String(decoding: serialized(), as: UTF8.self) }

    /// RFC 8785 (JSON Canonicalization Scheme): members sorted by the UTF-16 code units of their
    /// names (§3.2.3), numbers as ECMAScript prints them (§3.2.2.3), strings with only the escapes
    /// §3.2.2.2 requires (`"`, `\`, and control characters, the named ones as `\b \f \n \r \t`),
    /// everything else — non-ASCII, U+2028, DEL — as its UTF-8 bytes, and no whitespace.
    public func canonicalized() -> [UInt8] {
        var out: [UInt8] = []
        write(into: &out, canonical: true)
        return out
    }

    func write(into out: inout [UInt8], canonical: Bool) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let d): out.append(contentsOf: ECMAScriptNumber.string(d).utf8)
        case .string(let s): Self.writeString(s, into: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (i, e) in elements.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                e.write(into: &out, canonical: canonical)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let stored):
            // RFC 8785 §3.2.3: compare names as arrays of UTF-16 code units (not scalars, not bytes:
            // a non-BMP name sorts by its high surrogate, before U+E000…U+FFFF).
            let members = canonical ? stored.sorted { $0.key.utf16.lexicographicallyPrecedes($1.key.utf16) } : stored
            out.append(UInt8(ascii: "{"))
            for (i, m) in members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                Self.writeString(m.key, into: &out)
                out.append(UInt8(ascii: ":"))
                m.value.write(into: &out, canonical: canonical)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    static func writeString(_ s: String, into out: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        out.append(UInt8(ascii: "\""))
        for byte in s.utf8 {
            switch byte {
            case 0x22: out.append(contentsOf: [0x5C, 0x22])
            case 0x5C: out.append(contentsOf: [0x5C, 0x5C])
            case 0x08: out.append(contentsOf: [0x5C, UInt8(ascii: "b")])
            case 0x0C: out.append(contentsOf: [0x5C, UInt8(ascii: "f")])
            case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0..<0x20: out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

/// ECMAScript's Number::toString (ECMA-262 §7.1.12.1; RFC 8785 §3.2.2.3): the shortest digits that
/// round-trip, laid out as ECMAScript does (`1e+21`, `1e-7`, `0.000001`, `100`, `-0` → `0`).
enum ECMAScriptNumber {
    static func string(_ value: Double) -> String {
        if value == 0 { return "0" }  // -0 too
        if !value.isFinite { return "null" }  // never reached for an action: StepUpAction refuses them
        if value < 0 { return "-" + string(-value) }
        let (digits, n) = shortestDigits(value)  // value = 0.d1d2…dk × 10^n
        let k = digits.count
        if k <= n && n <= 21 { return digits + String(repeating: "0", count: n - k) }
        if 0 < n && n <= 21 {
            let i = digits.index(digits.startIndex, offsetBy: n)
            return String(digits[..<i]) + "." + String(digits[i...])
        }
        if -6 < n && n <= 0 { return "0." + String(repeating: "0", count: -n) + digits }
        let e = n - 1
        let mantissa = k == 1 ? digits : String(digits.first!) + "." + String(digits.dropFirst())
        return mantissa + "e" + (e < 0 ? "-" : "+") + String(abs(e))
    }

    /// The shortest round-tripping decimal digits (Swift's `description` gives them on every
    /// platform) without leading or trailing zeros, and n with value = 0.digits × 10^n.
    static func shortestDigits(_ value: Double) -> (String, Int) {
        let text = "\(value)"
        var mantissa = Substring(text)
        var exponent = 0
        if let e = text.firstIndex(where: { $0 == "e" || $0 == "E" }) {
            mantissa = text[..<e]
            exponent = Int(text[text.index(after: e)...])!
        }
        var integer = mantissa, fraction: Substring = ""
        if let dot = mantissa.firstIndex(of: ".") {
            integer = mantissa[..<dot]
            fraction = mantissa[mantissa.index(after: dot)...]
        }
        var digits = String(integer) + String(fraction)
        var n = integer.count + exponent
        while digits.hasPrefix("0") { digits.removeFirst(); n -= 1 }
        while digits.hasSuffix("0") { digits.removeLast() }
        return (digits, n)
    }
}
