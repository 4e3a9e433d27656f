/// RFC 3986 percent-decoding. Malformed escapes ("%zz", a trailing "%") are kept literally rather
/// than rejected: a path or query value is data for the handlers, which validate it themselves.
enum PercentDecoding {
    static func decode(_ text: Substring, plusAsSpace: Bool) -> String {
        let utf8 = text.utf8
        guard utf8.contains(where: { $0 == UInt8(ascii: "%") || (plusAsSpace && $0 == UInt8(ascii: "+")) }) else {
            return String(text)
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count)
        var index = utf8.startIndex
        while index != utf8.endIndex {
            let byte = utf8[index]
            if byte == UInt8(ascii: "%") {
                let first = utf8.index(after: index)
                if first != utf8.endIndex {
                    let second = utf8.index(after: first)
                    if second != utf8.endIndex, let high = hexValue(utf8[first]), let low = hexValue(utf8[second]) {
                        bytes.append(high << 4 | low)
                        index = utf8.index(after: second)
                        continue
                    }
                }
                bytes.append(byte)
            } else if plusAsSpace && byte == UInt8(ascii: "+") {
                bytes.append(UInt8(ascii: " "))
            } else {
                bytes.append(byte)
            }
            index = utf8.index(after: index)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Parses `a=1&b=x%20y&flag` into ordered, decoded pairs (`+` is a space, as in forms).
    static func queryPairs(_ query: Substring) -> [(String, String)] {
        var pairs: [(String, String)] = []
        for item in query.split(separator: "&", omittingEmptySubsequences: true) {
            if let equals = item.firstIndex(of: "=") {
                pairs.append((decode(item[..<equals], plusAsSpace: true),
                              decode(item[item.index(after: equals)...], plusAsSpace: true)))
            } else {
                pairs.append((decode(item, plusAsSpace: true), ""))
            }
        }
        return pairs
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// ASCII case-insensitive comparison for header names (no allocation, no Unicode folding).
func asciiCaseInsensitiveEquals(_ lhs: String, _ rhs: String) -> Bool {
    guard lhs.utf8.count == rhs.utf8.count else { return false }
    var left = lhs.utf8.makeIterator()
    var right = rhs.utf8.makeIterator()
    while true {
        switch (left.next(), right.next()) {
        case (nil, nil):
            return true
        case let (a?, b?):
            if a != b && asciiLower(a) != asciiLower(b) { return false }
        default:
            return false
        }
    }
}

@inline(__always)
func asciiLower(_ byte: UInt8) -> UInt8 {
    byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
}

func asciiLowercased(_ text: some StringProtocol) -> String {
    String(decoding: text.utf8.map(asciiLower), as: UTF8.self)
}

func trimmingWhitespace(_ text: Substring) -> Substring {
    var result = text
    while let first = result.first, first == " " || first == "\t" { result = result.dropFirst() }
    while let last = result.last, last == " " || last == "\t" { result = result.dropLast() }
    return result
}
