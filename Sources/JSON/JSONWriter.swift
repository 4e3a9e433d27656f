extension JSONValue {
    /// Compact JSON text, members in stored order.
    public func serialized() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(into: &out, canonical: false)
        return out
    }

    public var text: String { String(decoding: serialized(), as: UTF8.self) }

    /// Appends `string` as a JSON string (quoted, escaped), for writers that build a line without
    /// a `JSONValue` tree (the request log).
    public static func append(string: String, to out: inout [UInt8]) { writeString(string, into: &out) }

    /// Appends `number` as JSON (ECMAScript's spelling, as `serialized()` writes it).
    public static func append(number: Double, to out: inout [UInt8]) { JSONValue.number(number).write(into: &out, canonical: false) }

    /// RFC 8785 (JCS) canonical form: members sorted by their UTF-16 code units, ECMAScript number
    /// formatting, the minimal escaping of RFC 8785 §3.2.2.2, no whitespace.
    public func canonicalized() -> [UInt8] {
        var out: [UInt8] = []
        write(into: &out, canonical: true)
        return out
    }

    func write(into out: inout [UInt8], canonical: Bool) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let d):
            // Integers (timestamps, counts, statuses) are most numbers written: their digits go
            // straight into `out`; ECMAScript prints them the same way (see `ecmaScriptString`).
            if d.rounded(.towardZero) == d, abs(d) < 9_007_199_254_740_992, d != 0 {
                JSONValue.writeInteger(Int64(d), into: &out)
            } else {
                out.append(contentsOf: JSONValue.ecmaScriptString(d).utf8)
            }
        case .string(let s): JSONValue.writeString(s, into: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            // Through the buffer: elements are read in place, not copied (retained) one by one.
            elements.withUnsafeBufferPointer { elements in
                for i in elements.indices {
                    if i > 0 { out.append(UInt8(ascii: ",")) }
                    elements[i].write(into: &out, canonical: canonical)
                }
            }
            out.append(UInt8(ascii: "]"))
        case .object(let stored):
            // A parsed canonical text (a ceremony state's decode re-encodes it) is in order already:
            // one pass says so, and the sort and its copy are skipped.
            let members = canonical && !JSONValue.inCanonicalOrder(stored)
                ? stored.sorted { JSONValue.utf16Precedes($0.key, $1.key) } : stored
            out.append(UInt8(ascii: "{"))
            members.withUnsafeBufferPointer { members in
                for i in members.indices {
                    if i > 0 { out.append(UInt8(ascii: ",")) }
                    JSONValue.writeString(members[i].key, into: &out)
                    out.append(UInt8(ascii: ":"))
                    members[i].value.write(into: &out, canonical: canonical)
                }
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    static func inCanonicalOrder(_ members: [(key: String, value: JSONValue)]) -> Bool {
        var i = 1
        while i < members.count {
            guard utf16Precedes(members[i - 1].key, members[i].key) else { return false }
            i += 1
        }
        return true
    }

    /// Whether member name `a` comes before `b` in RFC 8785's order (UTF-16 code units).
    public static func canonicallyPrecedes(_ a: String, _ b: String) -> Bool { utf16Precedes(a, b) }

    /// RFC 8785's member order: by UTF-16 code units. Compared on the UTF-8 bytes up to the first
    /// difference: when both differing bytes are ASCII the orders agree (everything before them is
    /// the same text), and a string that is a prefix of the other comes first in both; only a
    /// difference at a non-ASCII byte takes the UTF-16 walk (where the two orders can disagree).
    static func utf16Precedes(_ a: String, _ b: String) -> Bool {
        var a = a, b = b
        let decided: Bool? = a.withUTF8 { x in
            b.withUTF8 { y in
                let n = min(x.count, y.count)
                var i = 0
                while i < n, x[i] == y[i] { i += 1 }
                if i == n { return x.count < y.count }
                if x[i] < 0x80, y[i] < 0x80 { return x[i] < y[i] }
                return nil
            }
        }
        return decided ?? a.utf16.lexicographicallyPrecedes(b.utf16)
    }

    /// Whether any of the eight bytes is below 0x20, `"` (0x22) or `\` (0x5C): exact for "no"
    /// (the usual answer), possibly a false "yes" after a byte that really is one.
    @inline(__always)
    static func mayNeedEscaping(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let high: UInt64 = 0x8080_8080_8080_8080
        let below0x20 = (word &- ones &* 0x20) & ~word & high
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        let hasQuote = (quote &- ones) & ~quote & high
        let hasBackslash = (backslash &- ones) & ~backslash & high
        return (below0x20 | hasQuote | hasBackslash) != 0
    }

    static func writeInteger(_ value: Int64, into out: inout [UInt8]) {
        if value < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var digits: (UInt64, UInt64) = (0, 0)  // up to 16 digits (|value| < 2^53), most significant last
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            } while magnitude > 0
            for i in stride(from: count - 1, through: 0, by: -1) { out.append(buffer[i]) }
        }
    }

    static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var text = s
        text.withUTF8 { bytes in
            // Copy runs that need no escaping in one go; most strings are one such run. Eight bytes
            // at a time are checked for a control character, `"` or `\` (the word test can only
            // say "maybe", never miss one: a maybe is looked at byte by byte).
            var runStart = 0
            var i = 0
            while i < bytes.count {
                if i + 8 <= bytes.count {
                    let word = UnsafeRawPointer(bytes.baseAddress! + i).loadUnaligned(as: UInt64.self)
                    if !Self.mayNeedEscaping(word) {
                        i += 8
                        continue
                    }
                }
                let byte = bytes[i]
                i += 1
                guard byte < 0x20 || byte == 0x22 || byte == 0x5C else { continue }
                let escapeAt = i - 1
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<escapeAt]))
                runStart = escapeAt + 1
                switch byte {
                case 0x22: out.append(contentsOf: [0x5C, 0x22])
                case 0x5C: out.append(contentsOf: [0x5C, 0x5C])
                case 0x08: out.append(contentsOf: [0x5C, UInt8(ascii: "b")])
                case 0x0C: out.append(contentsOf: [0x5C, UInt8(ascii: "f")])
                case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
                case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
                case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
                default:
                    let hex: StaticString = "0123456789abcdef"
                    let digits = hex.utf8Start
                    out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
                }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<bytes.count]))
        }
        out.append(UInt8(ascii: "\""))
    }

    /// ECMAScript Number::toString (ECMA-262 §7.1.12.1), as RFC 8785 §3.2.2.3 requires.
    public static func ecmaScriptString(_ value: Double) -> String {
        if value == 0 { return "0" }  // also -0
        if value.isNaN || value.isInfinite { return "null" }
        // Fast path: integers below 2^53 print as themselves (ECMAScript agrees up to 10^21).
        if value.rounded(.towardZero) == value, abs(value) < 9_007_199_254_740_992 { return String(Int64(value)) }
        if value < 0 { return "-" + ecmaScriptString(-value) }
        // Shortest round-trip digits from Swift's description, then ECMAScript's layout.
        let (digits, exponent) = shortestDigits(value)  // value = 0.d1d2… × 10^exponent
        let k = digits.count
        let n = exponent
        if k <= n && n <= 21 {
            return digits + String(repeating: "0", count: n - k)
        }
        if 0 < n && n <= 21 {
            let i = digits.index(digits.startIndex, offsetBy: n)
            return String(digits[..<i]) + "." + String(digits[i...])
        }
        if -6 < n && n <= 0 {
            return "0." + String(repeating: "0", count: -n) + digits
        }
        let e = n - 1
        let sign = e < 0 ? "-" : "+"
        let mantissa = k == 1 ? digits : String(digits.first!) + "." + String(digits.dropFirst())
        return mantissa + "e" + sign + String(abs(e))
    }

    /// Decimal digits (no leading/trailing zeros) and exponent n such that value = 0.digits × 10^n.
    static func shortestDigits(_ value: Double) -> (String, Int) {
        let text = "\(value)"  // Swift prints the shortest round-tripping representation
        var mantissa = text
        var exp = 0
        if let eIndex = text.firstIndex(where: { $0 == "e" || $0 == "E" }) {
            mantissa = String(text[..<eIndex])
            exp = Int(text[text.index(after: eIndex)...])!
        }
        var intPart = mantissa
        var fracPart = ""
        if let dot = mantissa.firstIndex(of: ".") {
            intPart = String(mantissa[..<dot])
            fracPart = String(mantissa[mantissa.index(after: dot)...])
        }
        var digits = intPart + fracPart
        var n = intPart.count + exp
        while digits.hasPrefix("0") { digits.removeFirst(); n -= 1 }
        while digits.hasSuffix("0") { digits.removeLast() }
        return (digits, n)
    }
}
