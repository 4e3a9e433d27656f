/// Why a JSON text was refused. Positions are byte offsets into the input.
public struct JSONError: Error, Hashable, CustomStringConvertible, Sendable {
    public let reason: String
    public let offset: Int
    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

/// A strict RFC 8259 parser over UTF-8 bytes.
///
/// Strict where leniency has caused parser-differential bugs in authentication code: duplicate
/// object members, unpaired surrogates, control characters in strings, trailing bytes, nesting
/// deeper than `maxDepth` and objects of more than `maxMembers` members are all refused.
///
/// Duplicate members are found with a hash set (linear in the member count), and the member cap
/// refuses a body of thousands of members at the first one over it, before anything else looks at
/// it. 1024 members per object is far above any request Latchkey takes (a credential JSON has under
/// ten per level); callers that parse their own, larger files pass a higher cap.
public struct JSONParser {
    public static let defaultMaxDepth = 32
    public static let defaultMaxMembers = 1024

    public static func parse(_ bytes: [UInt8], maxDepth: Int = defaultMaxDepth,
                             maxMembers: Int = defaultMaxMembers) throws(JSONError) -> JSONValue {
        try bytes.withUnsafeBufferPointer { buffer throws(JSONError) in
            var parser = Cursor(bytes: buffer, maxDepth: maxDepth, maxMembers: maxMembers)
            parser.skipWhitespace()
            let value = try parser.parseValue(depth: 0)
            parser.skipWhitespace()
            guard parser.index == buffer.count else { throw parser.error("trailing bytes after the document") }
            return value
        }
    }

    public static func parse(_ text: String, maxDepth: Int = defaultMaxDepth,
                             maxMembers: Int = defaultMaxMembers) throws(JSONError) -> JSONValue {
        try parse(Array(text.utf8), maxDepth: maxDepth, maxMembers: maxMembers)
    }

    private struct Cursor {
        let bytes: UnsafeBufferPointer<UInt8>
        let maxDepth: Int
        let maxMembers: Int
        var index = 0

        init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int, maxMembers: Int) {
            self.bytes = bytes
            self.maxDepth = maxDepth
            self.maxMembers = maxMembers
        }

        func error(_ reason: String) -> JSONError { JSONError(reason: reason, offset: index) }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func expect(_ literal: StaticString, _ value: JSONValue) throws(JSONError) -> JSONValue {
            let count = literal.utf8CodeUnitCount
            guard index + count <= bytes.count else { throw error("truncated literal") }
            let base = literal.utf8Start
            for i in 0..<count where bytes[index + i] != base[i] { throw error("unexpected literal") }
            index += count
            return value
        }

        mutating func parseValue(depth: Int) throws(JSONError) -> JSONValue {
            guard index < bytes.count else { throw error("unexpected end of input") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
            case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try parseString())
            case UInt8(ascii: "t"): return try expect("true", .bool(true))
            case UInt8(ascii: "f"): return try expect("false", .bool(false))
            case UInt8(ascii: "n"): return try expect("null", .null)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
            default: throw error("unexpected byte")
            }
        }

        mutating func parseObject(depth: Int) throws(JSONError) -> JSONValue {
            guard depth <= maxDepth else { throw error("nesting too deep") }
            index += 1
            var members: [(key: String, value: JSONValue)] = []
            // Duplicate names: a linear scan while the object is small (no hashing, no set to
            // allocate: a credential JSON's objects have under ten members), then a hash set, the
            // same equality as `==` on member names, so a large object stays linear overall.
            var names: Set<String>? = nil
            let linearLimit = 16
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
            members.reserveCapacity(8)
            while true {
                skipWhitespace()
                guard members.count < maxMembers else { throw error("object has more than \(maxMembers) members") }
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected member name") }
                let key = try parseString()
                if members.count < linearLimit {
                    for m in members where m.key == key { throw error("duplicate member \"\(key)\"") }
                } else {
                    if names == nil { names = Set(members.map(\.key)) }
                    guard names!.insert(key).inserted else { throw error("duplicate member \"\(key)\"") }
                }
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
                index += 1
                skipWhitespace()
                let value = try parseValue(depth: depth)
                members.append((key: key, value: value))
                skipWhitespace()
                guard index < bytes.count else { throw error("unterminated object") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
                throw error("expected ',' or '}'")
            }
        }

        mutating func parseArray(depth: Int) throws(JSONError) -> JSONValue {
            guard depth <= maxDepth else { throw error("nesting too deep") }
            index += 1
            var elements: [JSONValue] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(elements) }
            while true {
                skipWhitespace()
                elements.append(try parseValue(depth: depth))
                skipWhitespace()
                guard index < bytes.count else { throw error("unterminated array") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(elements) }
                throw error("expected ',' or ']'")
            }
        }

        mutating func parseHex4() throws(JSONError) -> UInt32 {
            guard index + 4 <= bytes.count else { throw error("truncated \\u escape") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let c = bytes[index]
                let digit: UInt32
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(c - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(c - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(c - UInt8(ascii: "A") + 10)
                default: throw error("bad hex digit in \\u escape")
                }
                value = value << 4 | digit
                index += 1
            }
            return value
        }

        mutating func parseString() throws(JSONError) -> String {
            index += 1  // opening quote
            let start = index
            // Fast path: no escapes. `seen` collects every byte's bits: below 0x80 means ASCII,
            // which is valid UTF-8 as it stands, and String(decoding:) takes it without the generic
            // validating initializer's per-scalar walk (most of a credential JSON's parse time).
            var seen: UInt8 = 0
            while index < bytes.count {
                // Eight bytes at a time while none is a quote, a backslash, a control character or
                // non-ASCII (base64url runs: most of a credential JSON); a word holding any of them
                // is looked at byte by byte below.
                if index + 8 <= bytes.count {
                    let w = UnsafeRawPointer(bytes.baseAddress! + index).loadUnaligned(as: UInt64.self)
                    let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
                    func zeroByte(_ x: UInt64) -> UInt64 { (x &- ones) & ~x & highs }
                    let special = zeroByte(w ^ (ones &* 0x22)) | zeroByte(w ^ (ones &* 0x5C)) | ((w &- ones &* 0x20) & ~w & highs) | (w & highs)
                    if special == 0 { index += 8; continue }
                    for _ in 0..<8 {
                        let c = bytes[index]
                        if c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") || c < 0x20 || c >= 0x80 { break }
                        index += 1
                    }
                    guard index < bytes.count else { break }
                }
                let c = bytes[index]
                if c == UInt8(ascii: "\"") {
                    let slice = UnsafeBufferPointer(rebasing: bytes[start..<index])
                    index += 1
                    if seen < 0x80 { return String(decoding: slice, as: UTF8.self) }
                    guard let s = String(validating: slice, as: UTF8.self) else { throw error("invalid UTF-8") }
                    return s
                }
                if c == UInt8(ascii: "\\") { break }
                if c < 0x20 { throw error("control character in string") }
                seen |= c
                index += 1
            }
            var out = [UInt8](bytes[start..<index])
            while index < bytes.count {
                let c = bytes[index]
                if c == UInt8(ascii: "\"") {
                    index += 1
                    guard let s = String(validating: out, as: UTF8.self) else { throw error("invalid UTF-8") }
                    return s
                }
                if c < 0x20 { throw error("control character in string") }
                if c != UInt8(ascii: "\\") { out.append(c); index += 1; continue }
                index += 1
                guard index < bytes.count else { break }
                let e = bytes[index]
                index += 1
                switch e {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try parseHex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard index + 6 <= bytes.count, bytes[index] == UInt8(ascii: "\\"),
                              bytes[index + 1] == UInt8(ascii: "u") else { throw error("unpaired surrogate") }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw error("unpaired surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw error("unpaired surrogate")
                    }
                    guard let u = Unicode.Scalar(scalar) else { throw error("invalid code point") }
                    out.append(contentsOf: Array(String(Character(u)).utf8))
                default: throw error("bad escape")
                }
            }
            throw error("unterminated string")
        }

        mutating func parseNumber() throws(JSONError) -> JSONValue {
            let start = index
            if bytes[index] == UInt8(ascii: "-") { index += 1 }
            func digits(_ c: inout Cursor) -> Int {
                let s = c.index
                while c.index < c.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c.bytes[c.index]) { c.index += 1 }
                return c.index - s
            }
            guard index < bytes.count else { throw error("truncated number") }
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
            } else if digits(&self) == 0 {
                throw error("expected digit")
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                guard digits(&self) > 0 else { throw error("expected fraction digits") }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
                guard digits(&self) > 0 else { throw error("expected exponent digits") }
            }
            guard index - start <= 64 else { throw error("number too long") }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            guard let d = Double(text), d.isFinite else { throw error("number out of range") }
            return .number(d)
        }
    }
}
