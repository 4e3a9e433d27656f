import CBOR
import Testing

@Suite struct CBORDecoderTests {
    @Test func roundTripsEveryKind() throws {
        let value: CBORValue = .map([
            CBORPair(.int(1), .int(2)), CBORPair(.int(-1), .negative(0)), CBORPair(.text("b"), .bytes([0, 1, 2])),
            CBORPair(.text("a"), .array([.bool(true), .bool(false), .null, .undefined, .float(1.5), .unsigned(UInt64.max)])),
            CBORPair(.text("t"), .tagged(24, .init(.bytes([0xA0])))),
        ])
        let bytes = CBOREncoder.encode(value)
        #expect(try CBORDecoder.decode(bytes) == value)
    }

    @Test func decodePrefixReportsLength() throws {
        let first = CBOREncoder.encode(.map([CBORPair(.int(1), .int(2))]))
        let (value, used) = try CBORDecoder.decodePrefix((first + [0xA0])[...])
        #expect(used == first.count)
        #expect(value[int: 1] == .int(2))
    }

    @Test(arguments: [
        ([0xA1, 0x01], CBORError.Code.truncated),
        ([0xA0, 0x00], .trailingBytes),
        ([0x5F, 0x41, 0x00, 0xFF], .indefiniteLength),
        ([0x9F, 0xFF], .indefiniteLength),
        ([0xBF, 0xFF], .indefiniteLength),
        ([0xA2, 0x01, 0x02, 0x01, 0x03], .duplicateMapKey),
        ([0x9B, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], .truncated),
        ([0x5A, 0xFF, 0xFF, 0xFF, 0xF0, 0x00], .truncated),
        ([0x1C], .malformed),
        ([0xFF], .malformed),
        ([0x62, 0xC3, 0x28], .malformed),  // libcbor 0.8 validates UTF-8 itself
        ([], .truncated),
    ] as [([UInt8], CBORError.Code)])
    func rejects(_ bytes: [UInt8], _ code: CBORError.Code) {
        #expect(throws: CBORError(code, "")) { try CBORDecoder.decode(bytes) }
    }

    @Test func rejectsDeepNesting() throws {
        let ok = [UInt8](repeating: 0x81, count: 8) + [0x00]
        _ = try CBORDecoder.decode(ok)
        let deep = [UInt8](repeating: 0x81, count: 9) + [0x00]
        #expect(throws: CBORError(.tooDeep, "")) { try CBORDecoder.decode(deep) }
        let veryDeep = [UInt8](repeating: 0x81, count: 100_000) + [0x00]
        #expect(throws: CBORError(.tooDeep, "")) { try CBORDecoder.decode(veryDeep) }
    }

    @Test func neverCrashesOnRandomBytes() {
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<5000 {
            let n = Int.random(in: 0..<40, using: &rng)
            let bytes = (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
            _ = try? CBORDecoder.decode(bytes)
        }
    }
}

/// Issue 13, defect 9: maps are bounded by entry count before libcbor sees them, and duplicate keys
/// are found with a set. WebAuthn's maps (attestation objects, statements, COSE keys) have a handful.
@Suite struct CBORMapLimitTests {
    /// A map header for `count` entries, then `count` unsigned keys (or the first key again last) → 0.
    static func map(entries count: Int, duplicateLast: Bool = false) -> [UInt8] {
        let pairs = (0..<count).map { CBORPair(.unsigned(UInt64(duplicateLast && $0 == count - 1 ? 0 : $0)), .unsigned(0)) }
        return CBOREncoder.encode(.map(pairs))
    }

    @Test func theCapIs256Entries() { #expect(CBORDecoder.defaultMaxMapEntries == 256) }

    @Test func aMapOfExactlyTheCapDecodes() throws {
        #expect(try CBORDecoder.decode(Self.map(entries: 256)).mapValue?.count == 256)
    }

    @Test func oneEntryMoreIsTooLarge() {
        #expect(throws: CBORError(.tooLarge, "")) { try CBORDecoder.decode(Self.map(entries: 257)) }
    }

    @Test func aDuplicateAtTheEndOfAFullMapIsStillFound() {
        #expect(throws: CBORError(.duplicateMapKey, "")) { try CBORDecoder.decode(Self.map(entries: 256, duplicateLast: true)) }
    }

    @Test func a64KiBMapOfThousandsOfEntriesIsRefusedByCount() {
        let bytes = Self.map(entries: 16_000)
        #expect(bytes.count > 60_000 && bytes.count <= 65_536)
        #expect(throws: CBORError(.tooLarge, "")) { try CBORDecoder.decode(bytes) }
        // Nested inside another map, too: {"att": <the big map>}.
        let wrapped: [UInt8] = [0xA1, 0x63] + Array("att".utf8) + bytes
        #expect(throws: CBORError(.tooLarge, "")) { try CBORDecoder.decode(wrapped) }
    }
}
