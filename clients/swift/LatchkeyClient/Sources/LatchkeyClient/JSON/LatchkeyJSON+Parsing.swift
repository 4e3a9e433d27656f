import Foundation

/// A strict RFC 8259 parser, refusing what the server refuses, so that an action the client hashes
/// is one the server can hash too: duplicate member names (compared as Swift strings, as the server
/// compares them, so `"é"` and `"e\u0301"` are the same name), unpaired surrogates, control characters
/// in strings, invalid UTF-8, trailing bytes, nesting deeper than 32, numbers out of Double's range.
extension LatchkeyJSON {
    public static let maxDepth = 32

    public init(parsing text: String) throws(LatchkeyError) { try self.init(parsing: Array(text.utf8)) }
    public init(parsing data: Data) throws(LatchkeyError) { try self.init(parsing: [UInt8](data)) }

    public init(parsing bytes: [UInt8]) throws(LatchkeyError) {
        var cursor = JSONCursor(bytes: bytes)
        cursor.skipWhitespace()
        let value = try cursor.value(depth: 0)
        cursor.skipWhitespace()
        guard cursor.index == bytes.count else { throw cursor.error("trailing bytes after the document") }
        self = value
    }

    /// The JSON of an `Encodable` value (through `JSONEncoder`, then this parser): for actions an app
    /// already models as a struct. Member order does not matter for the hash (RFC 8785 sorts).
    public init(encoding value: some Encodable) throws(LatchkeyError) {
        let data: Data
        do { data = try JSONEncoder().encode(value) } catch {
            throw LatchkeyError(.invalidJSON, "the value could not be encoded as JSON: \(error)")
        }
        try self.init(parsing: data)
    }
}

struct JSONCursor {
    let bytes: [UInt8]
    var index = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    func error(_ reason: String) -> LatchkeyError { LatchkeyError(.invalidJSON, "invalid JSON at byte \(index): \(reason)") }

    mutating func skipWhitespace() {
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    mutating func literal(_ word: String, _ value: LatchkeyJSON) throws(LatchkeyError) -> LatchkeyJSON {
        let w = Array(word.utf8)
        guard index + w.count <= bytes.count, Array(bytes[index..<index + w.count]) == w else { throw error("unexpected character") }
        index += w.count
        return value
    }

    mutating func value(depth: Int) throws(LatchkeyError) -> LatchkeyJSON {
        guard index < bytes.count else { throw error("unexpected end") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try object(depth: depth + 1)
        case UInt8(ascii: "["): return try array(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): return try literal("true", .bool(true))
        case UInt8(ascii: "f"): return try literal("false", .bool(false))
        case UInt8(ascii: "n"): return try literal("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw error("unexpected character")
        }
    }

    mutating func object(depth: Int) throws(LatchkeyError) -> LatchkeyJSON {
        guard depth <= LatchkeyJSON.maxDepth else { throw error("nesting too deep") }
        index += 1
        var members: [(key: String, value: LatchkeyJSON)] = []
        var names = Set<String>()
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a member name") }
            let key = try string()
            guard names.insert(key).inserted else { throw error("duplicate member \"\(key)\"") }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
            index += 1
            skipWhitespace()
            members.append((key, try value(depth: depth)))
            skipWhitespace()
            guard index < bytes.count else { throw error("unterminated object") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
            throw error("expected ',' or '}'")
        }
    }

    mutating func array(depth: Int) throws(LatchkeyError) -> LatchkeyJSON {
        guard depth <= LatchkeyJSON.maxDepth else { throw error("nesting too deep") }
        index += 1
        var elements: [LatchkeyJSON] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(elements) }
        while true {
            skipWhitespace()
            elements.append(try value(depth: depth))
            skipWhitespace()
            guard index < bytes.count else { throw error("unterminated array") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(elements) }
            throw error("expected ',' or ']'")
        }
    }

    mutating func hex4() throws(LatchkeyError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("truncated \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let d: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw error("bad hex digit in \\u escape")
            }
            v = v << 4 | d
            index += 1
        }
        return v
    }

    mutating func string() throws(LatchkeyError) -> String {
        index += 1
        var out: [UInt8] = []
        while index < bytes.count {
            let c = bytes[index]
            if c == UInt8(ascii: "\"") {
                index += 1
                guard let s = String(validating: out, as: UTF8.self) else { throw error("invalid UTF-8") }
                return s
            }
            if c < 0x20 { throw error("control character in string") }
            index += 1
            if c != UInt8(ascii: "\\") { out.append(c); continue }
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
                var scalar = try hex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    guard index + 6 <= bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                        throw error("unpaired surrogate")
                    }
                    index += 2
                    let low = try hex4()
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

    mutating func number() throws(LatchkeyError) -> LatchkeyJSON {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        func digits(_ c: inout JSONCursor) -> Int {
            let s = c.index
            while c.index < c.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c.bytes[c.index]) { c.index += 1 }
            return c.index - s
        }
        guard index < bytes.count else { throw error("truncated number") }
        if bytes[index] == UInt8(ascii: "0") { index += 1 } else if digits(&self) == 0 { throw error("expected digit") }
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
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        guard let d = Double(text), d.isFinite else { throw error("number out of range") }
        return .number(d)
    }
}
