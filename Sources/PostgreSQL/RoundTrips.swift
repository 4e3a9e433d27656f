/// What one round trip to PostgreSQL was, for SPEC "Performance targets" → "Round trips" (at most
/// one read and one write a request): a statement that reads only, one that writes (it inserts,
/// updates or deletes, or notifies, in any part of it — a `WITH … UPDATE … SELECT` writes), or
/// transaction control (BEGIN, COMMIT, ROLLBACK, savepoints).
public enum RoundTripKind: Sendable {
    case read, write, control
}

/// The round trips one request made, by kind.
public struct RoundTripCounts: Sendable, Equatable, CustomStringConvertible {
    public var reads = 0
    public var writes = 0
    public var control = 0

    public init(reads: Int = 0, writes: Int = 0, control: Int = 0) {
        self.reads = reads
        self.writes = writes
        self.control = control
    }

    public var total: Int { reads + writes + control }
    public var description: String { "\(reads) read(s), \(writes) write(s), \(control) control" }

    mutating func add(_ kind: RoundTripKind) {
        switch kind {
        case .read: reads += 1
        case .write: writes += 1
        case .control: control += 1
        }
    }
}

extension SQL {
    /// What running this statement alone is: control, a write, or a read.
    public var roundTripKind: RoundTripKind { SQL.kind(composed) }

    /// What running `text` alone is: control, a write, or a read.
    static func kind(_ text: [UInt8]) -> RoundTripKind { isControl(text) ? .control : writes(text) ? .write : .read }

    /// What a pipeline of `statements` is as one round trip: a write if any of them writes, else a
    /// read if any reads, else control (`BEGIN` + a read is a read; a write + `COMMIT` a write).
    public static func roundTripKind(_ statements: [SQL]) -> RoundTripKind {
        let kinds = statements.map(\.roundTripKind)
        if kinds.contains(.write) { return .write }
        return kinds.contains(.read) ? .read : .control
    }

    /// Whether the statement writes: a data-changing keyword (INSERT, UPDATE, DELETE, MERGE,
    /// TRUNCATE, NOTIFY, `pg_notify`) as a word of its text, `FOR UPDATE` / `FOR NO KEY UPDATE`
    /// (row locks of a read) not counted. Case-insensitive; a scan of the bytes, no allocation.
    public var writes: Bool { SQL.writes(composed) }

    static func writes(_ text: [UInt8]) -> Bool {
        var i = 0
        var previous = 0..<0
        while i < text.count {
            guard isWordByte(text[i]) else { i += 1; continue }
            let start = i
            while i < text.count, isWordByte(text[i]) { i += 1 }
            let word = text[start..<i]
            if writingKeywords.contains(where: { matches(word, $0) }) { return true }
            // `FOR UPDATE`, `FOR NO KEY UPDATE`: a lock, not a write.
            if matches(word, update), !matches(text[previous], forKeyword), !matches(text[previous], key) { return true }
            previous = start..<i
        }
        return false
    }

    static let writingKeywords: [[UInt8]] = ["INSERT", "DELETE", "MERGE", "TRUNCATE", "NOTIFY", "PG_NOTIFY"].map { Array($0.utf8) }
    static let update = Array("UPDATE".utf8), forKeyword = Array("FOR".utf8), key = Array("KEY".utf8)
    static let control: [[UInt8]] = ["BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE"].map { Array($0.utf8) }

    static func isWordByte(_ b: UInt8) -> Bool { (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == 0x5F }

    /// `word` is `keyword` (upper-case ASCII), in any case.
    static func matches(_ word: ArraySlice<UInt8>, _ keyword: [UInt8]) -> Bool {
        guard word.count == keyword.count else { return false }
        return zip(word, keyword).allSatisfy { w, k in (w >= 0x61 && w <= 0x7A ? w - 0x20 : w) == k }
    }

    /// The first word of `text` is transaction control.
    static func isControl(_ text: [UInt8]) -> Bool {
        var end = text.startIndex
        while end < text.endIndex, isWordByte(text[end]) { end += 1 }
        return control.contains { matches(text[..<end], $0) }
    }

    /// Whether the statement begins with `keyword` (upper-case ASCII), in any case.
    func begins(with keyword: String) -> Bool {
        var end = composed.startIndex
        while end < composed.endIndex, SQL.isWordByte(composed[end]) { end += 1 }
        return SQL.matches(composed[..<end], Array(keyword.utf8))
    }
}
