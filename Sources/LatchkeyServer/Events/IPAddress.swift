/// An IPv4 or IPv6 address, parsed from text the way an HTTP client reads a URL's host, and the
/// special-purpose range it falls in (SPEC "Assurance": webhook URLs must not point inside).
///
/// Parsing follows the WHATWG URL Standard's host parser, which is at least as lenient as libcurl's
/// (curl 7.88 normalises `127.1`, `0x7f000001`, `0177.0.0.1` and `2130706433` to `127.0.0.1` before it
/// connects) and glibc's `inet_aton`: whatever either would take as an IPv4 address, this does too.
public enum IPAddress: Hashable, Sendable, CustomStringConvertible {
    case v4(UInt32)
    /// The 128 bits, most significant half first.
    case v6(UInt64, UInt64)

    /// The address in network byte order (4 or 16 bytes), as `sockaddr_in`/`sockaddr_in6` hold it.
    public var bytes: [UInt8] {
        switch self {
        case .v4(let a): return (0..<4).map { UInt8(truncatingIfNeeded: a >> (24 - 8 * $0)) }
        case .v6(let hi, let lo): return (0..<8).map { UInt8(truncatingIfNeeded: hi >> (56 - 8 * $0)) }
            + (0..<8).map { UInt8(truncatingIfNeeded: lo >> (56 - 8 * $0)) }
        }
    }

    /// From 4 or 16 bytes in network order.
    public init?(bytes: [UInt8]) {
        switch bytes.count {
        case 4: self = .v4(bytes.reduce(0) { $0 << 8 | UInt32($1) })
        case 16:
            self = .v6(bytes[0..<8].reduce(0) { $0 << 8 | UInt64($1) }, bytes[8..<16].reduce(0) { $0 << 8 | UInt64($1) })
        default: return nil
        }
    }

    // MARK: Text

    /// What a URL host (without brackets) that *ends in a number* means, WHATWG URL §3.5 "IPv4 parser".
    public enum IPv4Host: Equatable, Sendable {
        /// The last label is not a number: a domain name.
        case name
        case address(UInt32)
        /// It ends in a number but is no IPv4 address (`1.2.3.256`, `example.0x1`, five parts): an invalid host.
        case invalid
    }

    /// `host` (ASCII, no brackets) read as WHATWG's host parser reads it: `127.0.0.1`, `127.0.0.1.`,
    /// `127.1`, `2130706433`, `0x7f000001`, `0x7f.1`, `0177.0.0.1` are all 127.0.0.1.
    public static func ipv4(host: Substring) -> IPv4Host {
        var parts = host.split(separator: ".", omittingEmptySubsequences: false)
        // One trailing dot is allowed (`127.0.0.1.`): the empty last label is dropped.
        if parts.count > 1, parts.last?.isEmpty == true { parts.removeLast() }
        guard let last = parts.last, endsInANumber(last) else { return .name }
        guard parts.count <= 4 else { return .invalid }
        var numbers: [UInt64] = []
        for part in parts {
            guard let n = ipv4Number(part) else { return .invalid }
            numbers.append(n)
        }
        // Every part but the last is one byte; the last fills the bytes that remain.
        guard numbers.dropLast().allSatisfy({ $0 <= 255 }), numbers[numbers.count - 1] < (1 << (8 * UInt64(5 - numbers.count))) else {
            return .invalid
        }
        var value = numbers[numbers.count - 1]
        for (i, n) in numbers.dropLast().enumerated() { value += n << (8 * UInt64(3 - i)) }
        return .address(UInt32(value))
    }

    /// WHATWG "ends in a number checker": the last label is all decimal digits, or `0x` + hex digits.
    private static func endsInANumber(_ label: Substring) -> Bool {
        let u = label.utf8
        if !u.isEmpty, u.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) { return true }
        return label.hasPrefix("0x") || label.hasPrefix("0X") ? u.dropFirst(2).allSatisfy({ hexValue($0) != nil }) : false
    }

    /// WHATWG "IPv4 number parser": `0x…` hexadecimal, a leading `0` octal, else decimal; nil when not
    /// a number (or past 2^32, which no part can be).
    private static func ipv4Number(_ text: Substring) -> UInt64? {
        guard !text.isEmpty else { return nil }
        var digits = text.utf8[...]
        var radix: UInt64 = 10
        if digits.count >= 2, digits.first == 0x30, digits.dropFirst().first == 0x78 || digits.dropFirst().first == 0x58 {
            radix = 16
            digits = digits.dropFirst(2)
        } else if digits.count >= 2, digits.first == 0x30 {
            radix = 8
            digits = digits.dropFirst()
        }
        var value: UInt64 = 0
        for c in digits {
            guard let d = hexValue(c), UInt64(d) < radix else { return nil }
            value = value * radix + UInt64(d)
            if value > UInt64(UInt32.max) + 1 { return nil }
        }
        return value
    }

    private static func hexValue(_ c: UInt8) -> Int? {
        switch c {
        case 0x30...0x39: Int(c - 0x30)
        case 0x41...0x46: Int(c - 0x41 + 10)
        case 0x61...0x66: Int(c - 0x61 + 10)
        default: nil
        }
    }

    /// RFC 4291 §2.2 text (what goes between a URL's brackets): up to eight groups of one to four hex
    /// digits, one `::`, optionally a dotted-decimal IPv4 address in the last 32 bits. No zone
    /// (`%eth0`): nothing that is not an address.
    public init?(ipv6 text: Substring) {
        let s = Array(text.utf8)
        guard !s.isEmpty else { return nil }
        var pieces: [UInt16] = []
        var compressAt: Int? = nil
        var i = 0
        if s.count >= 2, s[0] == 0x3A, s[1] == 0x3A {
            compressAt = 0
            i = 2
        } else if s[0] == 0x3A {
            return nil
        }
        while i < s.count {
            guard pieces.count < 8 else { return nil }
            let start = i
            var value = 0
            while i < s.count, i - start < 4, let h = Self.hexValue(s[i]) { value = value * 16 + h; i += 1 }
            if i < s.count, s[i] == 0x2E {
                // The dotted IPv4 tail: exactly four decimal bytes, no leading zeros, at the end.
                guard i > start, pieces.count <= 6, let v4 = Self.dottedDecimal(s[start...]) else { return nil }
                pieces.append(UInt16(v4 >> 16))
                pieces.append(UInt16(v4 & 0xFFFF))
                i = s.count
                break
            }
            guard i > start else { return nil }
            pieces.append(UInt16(value))
            if i == s.count { break }
            guard s[i] == 0x3A else { return nil }  // a fifth hex digit or any other character
            i += 1
            if i < s.count, s[i] == 0x3A {
                guard compressAt == nil else { return nil }
                compressAt = pieces.count
                i += 1
            } else if i == s.count {
                return nil  // a trailing single colon
            }
        }
        if let at = compressAt {
            // `::` stands for at least one group of zeros.
            guard pieces.count <= 7 else { return nil }
            pieces.insert(contentsOf: [UInt16](repeating: 0, count: 8 - pieces.count), at: at)
        } else {
            guard pieces.count == 8 else { return nil }
        }
        let hi = pieces[0..<4].reduce(UInt64(0)) { $0 << 16 | UInt64($1) }
        let lo = pieces[4..<8].reduce(UInt64(0)) { $0 << 16 | UInt64($1) }
        self = .v6(hi, lo)
    }

    /// `a.b.c.d`, each 0…255 in decimal without leading zeros (inet_pton's IPv4, as inside IPv6).
    private static func dottedDecimal(_ s: ArraySlice<UInt8>) -> UInt32? {
        let parts = s.split(separator: 0x2E, omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var value: UInt32 = 0
        for p in parts {
            guard (1...3).contains(p.count), p.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), p.count == 1 || p.first != 0x30 else { return nil }
            let n = p.reduce(0) { $0 * 10 + Int($1 - 0x30) }
            guard n <= 255 else { return nil }
            value = value << 8 | UInt32(n)
        }
        return value
    }

    /// A numeric address as getaddrinfo returns it or a user writes it: dotted decimal IPv4 or IPv6 text.
    public init?(numeric text: String) {
        if text.contains(":") {
            self.init(ipv6: text[...])
        } else if let v4 = Self.dottedDecimal(Array(text.utf8)[...]) {
            self = .v4(v4)
        } else {
            return nil
        }
    }

    /// Dotted decimal, or RFC 5952 IPv6 (lower case, the longest run of zero groups as `::`, an
    /// IPv4-mapped address with its IPv4 part dotted). Also the form libcurl's CURLOPT_RESOLVE takes.
    public var description: String {
        switch self {
        case .v4(let a):
            return "\(a >> 24).\(a >> 16 & 0xFF).\(a >> 8 & 0xFF).\(a & 0xFF)"
        case .v6(let hi, let lo):
            if hi == 0, lo >> 32 == 0xFFFF { return "::ffff:" + IPAddress.v4(UInt32(truncatingIfNeeded: lo)).description }
            let groups = (0..<4).map { UInt16(truncatingIfNeeded: hi >> (48 - 16 * $0)) }
                + (0..<4).map { UInt16(truncatingIfNeeded: lo >> (48 - 16 * $0)) }
            var best = (start: -1, length: 0)
            var i = 0
            while i < 8 {
                guard groups[i] == 0 else { i += 1; continue }
                var j = i
                while j < 8, groups[j] == 0 { j += 1 }
                if j - i > best.length, j - i >= 2 { best = (i, j - i) }
                i = j
            }
            func hex(_ range: Range<Int>) -> String { groups[range].map { String($0, radix: 16) }.joined(separator: ":") }
            guard best.start >= 0 else { return hex(0..<8) }
            return hex(0..<best.start) + "::" + hex((best.start + best.length)..<8)
        }
    }
}

// MARK: Special-purpose ranges

extension IPAddress {
    /// A range of addresses that is not the public Internet (IANA's IPv4 and IPv6 Special-Purpose
    /// Address Registries), named for error messages.
    public struct SpecialRange: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        public let prefix: String
        public var description: String { "\(name) (\(prefix))" }
        /// Loopback: what development mode's `http://` may reach.
        public var isLoopback: Bool { name == "loopback" }
    }

    /// IPv4 (RFC 6890 and successors) — every block IANA marks as not globally reachable.
    private static let ipv4Ranges: [(UInt32, Int, SpecialRange)] = [
        (0x0000_0000, 8, SpecialRange(name: "this network / unspecified", prefix: "0.0.0.0/8")),
        (0x0A00_0000, 8, SpecialRange(name: "private", prefix: "10.0.0.0/8")),
        (0x6440_0000, 10, SpecialRange(name: "shared address space (CGNAT)", prefix: "100.64.0.0/10")),
        (0x7F00_0000, 8, SpecialRange(name: "loopback", prefix: "127.0.0.0/8")),
        (0xA9FE_0000, 16, SpecialRange(name: "link-local (cloud metadata)", prefix: "169.254.0.0/16")),
        (0xAC10_0000, 12, SpecialRange(name: "private", prefix: "172.16.0.0/12")),
        (0xC000_0000, 24, SpecialRange(name: "IETF protocol assignments", prefix: "192.0.0.0/24")),
        (0xC000_0200, 24, SpecialRange(name: "documentation", prefix: "192.0.2.0/24")),
        (0xC058_6300, 24, SpecialRange(name: "6to4 relay anycast", prefix: "192.88.99.0/24")),
        (0xC0A8_0000, 16, SpecialRange(name: "private", prefix: "192.168.0.0/16")),
        (0xC612_0000, 15, SpecialRange(name: "benchmarking", prefix: "198.18.0.0/15")),
        (0xC633_6400, 24, SpecialRange(name: "documentation", prefix: "198.51.100.0/24")),
        (0xCB00_7100, 24, SpecialRange(name: "documentation", prefix: "203.0.113.0/24")),
        (0xE000_0000, 4, SpecialRange(name: "multicast", prefix: "224.0.0.0/4")),
        (0xFFFF_FFFF, 32, SpecialRange(name: "broadcast", prefix: "255.255.255.255/32")),
        (0xF000_0000, 4, SpecialRange(name: "reserved", prefix: "240.0.0.0/4")),
    ]

    /// The special range this address is in, nil for a public (globally reachable) address.
    ///
    /// IPv6 is judged by what the packets reach: an IPv4-mapped (`::ffff:0:0/96`), NAT64
    /// (`64:ff9b::/96`) or 6to4 (`2002::/16`) address by the IPv4 address it carries; any other
    /// address outside global unicast `2000::/3` (loopback, unspecified, IPv4-compatible `::/96`,
    /// unique-local `fc00::/7`, link-local `fe80::/10`, multicast `ff00::/8`, …) is refused, and so are
    /// the non-global blocks inside it.
    public var specialRange: SpecialRange? {
        switch self {
        case .v4(let a):
            return Self.ipv4Ranges.first { base, length, _ in a >> (32 - length) == base >> (32 - length) }?.2
        case .v6(let hi, let lo):
            if hi == 0, lo >> 32 == 0xFFFF { return Self.embedded(lo, "IPv4-mapped", "::ffff:0:0/96") }
            if hi == 0x0064_FF9B_0000_0000, lo >> 32 == 0 { return Self.embedded(lo, "NAT64", "64:ff9b::/96") }
            if hi >> 48 == 0x2002 { return Self.embedded(hi >> 16, "6to4", "2002::/16") }
            if hi == 0, lo == 0 { return SpecialRange(name: "unspecified", prefix: "::/128") }
            if hi == 0, lo == 1 { return SpecialRange(name: "loopback", prefix: "::1/128") }
            if hi == 0, lo >> 32 == 0 { return SpecialRange(name: "IPv4-compatible", prefix: "::/96") }
            let top = hi >> 48
            if top & 0xFE00 == 0xFC00 { return SpecialRange(name: "unique local", prefix: "fc00::/7") }
            if top & 0xFFC0 == 0xFE80 { return SpecialRange(name: "link-local", prefix: "fe80::/10") }
            if top & 0xFFC0 == 0xFEC0 { return SpecialRange(name: "site-local", prefix: "fec0::/10") }
            if top & 0xFF00 == 0xFF00 { return SpecialRange(name: "multicast", prefix: "ff00::/8") }
            if top & 0xE000 != 0x2000 { return SpecialRange(name: "not global unicast", prefix: "outside 2000::/3") }
            if hi >> 41 == 0x2001_0000_0000_0000 >> 41 {
                return SpecialRange(name: "IETF protocol assignments (Teredo, benchmarking, ORCHID)", prefix: "2001::/23")
            }
            if hi >> 32 == 0x2001_0DB8 { return SpecialRange(name: "documentation", prefix: "2001:db8::/32") }
            if hi >> 44 == 0x3FFF0 { return SpecialRange(name: "documentation", prefix: "3fff::/20") }
            return nil
        }
    }

    /// The range of the IPv4 address in the low 32 bits of `bits`, named after the IPv6 form carrying it.
    private static func embedded(_ bits: UInt64, _ form: String, _ prefix: String) -> SpecialRange? {
        let v4 = IPAddress.v4(UInt32(truncatingIfNeeded: bits))
        guard let inner = v4.specialRange else { return nil }
        return SpecialRange(name: "\(form) \(v4): \(inner.name)", prefix: "\(prefix), \(inner.prefix)")
    }
}
