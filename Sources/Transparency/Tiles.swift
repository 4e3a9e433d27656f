/// C2SP tlog-tiles: tile paths `tile/<L>/<N>[.p/<W>]`, entry bundles `tile/entries/<N>[.p/<W>]`.
public struct TilePath: Sendable, Hashable, CustomStringConvertible {
    /// Nil for an entry bundle.
    public let level: Int?
    public let index: UInt64
    /// Nil for a full tile (256 wide).
    public let width: Int?

    public static let fullWidth = 256

    public init(level: Int?, index: UInt64, width: Int? = nil) {
        self.level = level; self.index = index; self.width = width
    }

    public var isEntryBundle: Bool { level == nil }
    public var count: Int { width ?? Self.fullWidth }

    /// The path below the log's prefix, `tile/…`.
    public var description: String {
        let head = level.map { "tile/\($0)/" } ?? "tile/entries/"
        return head + Self.encode(index: index) + (width.map { ".p/\($0)" } ?? "")
    }

    /// `<N>`: zero-padded 3-digit elements, all but the last prefixed with `x` (1234067 → x001/x234/067).
    public static func encode(index: UInt64) -> String {
        var groups: [String] = []
        var n = index
        repeat {
            let g = String(n % 1000)
            groups.append(String(repeating: "0", count: 3 - g.count) + g)
            n /= 1000
        } while n > 0
        return groups.reversed().enumerated().map { $0.offset == groups.count - 1 ? $0.element : "x" + $0.element }.joined(separator: "/")
    }

    /// Parses the path after the log's prefix (`tile/…`); only the canonical form is accepted (so one
    /// resource has one path).
    public init(parsing path: String) throws(TransparencyError) {
        var parts = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 3, parts.count <= 12, parts[0] == "tile" else { throw TransparencyError("a tile path is tile/<L>/<N>[.p/<W>]") }
        parts.removeFirst()
        let level: Int?
        if parts[0] == "entries" {
            level = nil
        } else {
            guard let l = parseDecimal(parts[0]), l <= 63 else { throw TransparencyError("a tile level is a decimal from 0 to 63") }
            level = Int(l)
        }
        parts.removeFirst()
        var width: Int?
        if parts.count >= 2, parts[parts.count - 2].hasSuffix(".p") {
            guard let w = parseDecimal(parts[parts.count - 1]), w >= 1, w <= 255 else { throw TransparencyError("a partial tile's width is a decimal from 1 to 255") }
            width = Int(w)
            parts.removeLast()
            parts[parts.count - 1] = String(parts[parts.count - 1].dropLast(2))
        }
        guard !parts.isEmpty else { throw TransparencyError("a tile path names an index") }
        var index: UInt64 = 0
        for (i, part) in parts.enumerated() {
            let last = i == parts.count - 1
            var digits = Substring(part)
            if !last {
                guard digits.hasPrefix("x") else { throw TransparencyError("all but the last element of a tile index start with x") }
                digits = digits.dropFirst()
            }
            guard digits.utf8.count == 3, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let g = UInt64(digits) else {
                throw TransparencyError("a tile index element is three digits")
            }
            let (m, o1) = index.multipliedReportingOverflow(by: 1000)
            let (s, o2) = m.addingReportingOverflow(g)
            guard !o1, !o2 else { throw TransparencyError("the tile index is too large") }
            index = s
        }
        let tile = TilePath(level: level, index: index, width: width)
        guard tile.description == path else { throw TransparencyError("the tile path is not in its canonical form") }
        self = tile
    }

    /// The tree level of the hashes in a tile at tile level `L`: 8·L.
    public var treeLevel: Int { (level ?? 0) * 8 }

    /// The node indices (at `treeLevel`) the tile holds: `index·256 ..< index·256 + width`; nil when
    /// the range leaves UInt64.
    public var nodeRange: Range<UInt64>? {
        let (start, o) = index.multipliedReportingOverflow(by: 256)
        guard !o, start <= UInt64.max - 256 else { return nil }
        return start ..< start + UInt64(count)
    }

    /// Does a tree of `size` leaves hold every hash of this tile? (Its last node is complete.)
    public func isContained(inTreeOf size: UInt64) -> Bool {
        guard let range = nodeRange else { return false }
        let level = treeLevel
        guard level < 64 else { return false }
        // The node (level, range.upperBound - 1) ends at range.upperBound << level.
        let (end, o) = range.upperBound.multipliedReportingOverflow(by: UInt64(1) << level)
        return !o && (level == 0 || range.upperBound <= UInt64.max >> level) && end <= size
    }
}

/// tlog-tiles entry bundles: big-endian uint16 length-prefixed entries.
public enum EntryBundle {
    public static func encode(_ entries: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = []
        for entry in entries {
            precondition(entry.count <= 0xFFFF)
            out += [UInt8(entry.count >> 8), UInt8(entry.count & 0xFF)] + entry
        }
        return out
    }

    public static func decode(_ bytes: [UInt8]) throws(TransparencyError) -> [[UInt8]] {
        var entries: [[UInt8]] = []
        var i = 0
        while i < bytes.count {
            guard i + 2 <= bytes.count else { throw TransparencyError("an entry bundle ends inside a length") }
            let n = Int(bytes[i]) << 8 | Int(bytes[i + 1])
            guard i + 2 + n <= bytes.count else { throw TransparencyError("an entry bundle ends inside an entry") }
            entries.append(Array(bytes[(i + 2)..<(i + 2 + n)]))
            i += 2 + n
        }
        return entries
    }
}
