import Foundation
import JSON
import Testing

@Suite struct JSONParserTests {
    @Test func parsesClientDataWithEscapedSlashes() throws {
        let v = try JSONParser.parse(#"{"type":"webauthn.get","origin":"https:\/\/example.com","n":1.5e2,"a":[true,null]}"#)
        #expect(v["origin"]?.stringValue == "https://example.com")
        #expect(v["n"]?.doubleValue == 150)
        #expect(v["a"] == [true, nil])
    }

    @Test(arguments: [
        "", "{", "{\"a\":1,}", "{\"a\":1}x", "[1,]", "{\"a\":1,\"a\":2}", "\"\\ud800\"", "\"a\nb\"",
        "01", "1.", "-", "tru", "{\"a\" 1}", "\"\\x\"", String(repeating: "[", count: 100) + String(repeating: "]", count: 100),
    ])
    func rejectsMalformed(_ text: String) {
        #expect(throws: JSONError.self) { try JSONParser.parse(text) }
    }

    @Test func rejectsInvalidUTF8() {
        #expect(throws: JSONError.self) { try JSONParser.parse([0x22, 0xFF, 0x22]) }
    }

    /// The ASCII fast path (issue 24) hands ASCII straight to String; anything else is still
    /// validated: an overlong encoding, a lone continuation byte, a truncated sequence are refused
    /// after ASCII text, and valid multi-byte text comes through unchanged.
    @Test func nonASCIIAfterASCIIIsStillValidated() throws {
        for bad: [UInt8] in [[0xC0, 0xAF], [0x80], [0xE2, 0x82], [0xED, 0xA0, 0x80]] {
            #expect(throws: JSONError.self) { try JSONParser.parse([0x22, 0x61, 0x62] + bad + [0x22]) }
        }
        #expect(try JSONParser.parse(Array(#""abc é €""#.utf8)) == .string("abc é €"))
        #expect(try JSONParser.parse(Array(#""plain-base64url_AZ09""#.utf8)) == .string("plain-base64url_AZ09"))
    }

    /// The eight-bytes-at-a-time scan finds a quote, a backslash, a control character or a
    /// non-ASCII byte at every position of a word, and strings of every length around the word size.
    @Test func theWordScanStopsAtEverySpecialByte() throws {
        for length in 0..<40 {
            let plain = String(repeating: "x", count: length)
            #expect(try JSONParser.parse(Array("\"\(plain)\"".utf8)) == .string(plain))
            for position in 0...length {
                let head = String(repeating: "a", count: position), tail = String(repeating: "b", count: length - position)
                #expect(try JSONParser.parse(Array("\"\(head)\\n\(tail)\"".utf8)) == .string(head + "\n" + tail))
                #expect(try JSONParser.parse(Array("\"\(head)é\(tail)\"".utf8)) == .string(head + "é" + tail))
                #expect(throws: JSONError.self) { try JSONParser.parse(Array("\"\(head)".utf8) + [0x01] + Array("\(tail)\"".utf8)) }
                #expect(throws: JSONError.self) { try JSONParser.parse(Array("\"\(head)".utf8) + [0xFF] + Array("\(tail)\"".utf8)) }
                #expect(throws: JSONError.self) { try JSONParser.parse(Array("\"\(head)\(tail)".utf8)) }
            }
        }
    }

    /// Small objects find duplicates by a scan, large ones by a set: both refuse, at every size
    /// around the switch-over, and compare names as Strings do (é precomposed = e + combining acute).
    @Test func duplicatesAreFoundAtEverySize() {
        for count in [1, 2, 15, 16, 17, 40] {
            let members = (0..<count).map { #""k\#($0)":0"# }
            let text = "{" + (members + [#""k\#(count - 1)":1"#]).joined(separator: ",") + "}"
            #expect(throws: JSONError.self) { try JSONParser.parse(text) }
        }
        #expect(throws: JSONError.self) { try JSONParser.parse("{\"\u{E9}\":1,\"e\u{301}\":2}") }
    }

    @Test func decodesSurrogatePairs() throws {
        #expect(try JSONParser.parse(#""\ud83d\ude00""#) == .string("😀"))
    }
}

@Suite struct CanonicalJSONTests {
    // RFC 8785 §3.2.2.3 / Appendix B number samples.
    @Test(arguments: [
        (0.0, "0"), (-0.0, "0"), (1.0, "1"), (-1.5, "-1.5"), (1e21, "1e+21"), (1e20, "100000000000000000000"),
        (0.000001, "0.000001"), (1e-7, "1e-7"), (333333333.33333329, "333333333.3333333"),
        (9007199254740992, "9007199254740992"), (4.35, "4.35"), (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"), (295147905179352830000, "295147905179352830000"),
    ])
    func ecmaScriptNumbers(_ value: Double, _ expected: String) {
        #expect(JSONValue.ecmaScriptString(value) == expected)
    }

    @Test func sortsMembersByUTF16() throws {
        let v = try JSONParser.parse(#"{"b":1,"a":{"z":true,"\u20ac":"x","\ud83d\ude00":0},"é":[]}"#)
        let text = String(decoding: v.canonicalized(), as: UTF8.self)
        // "z" (U+007A) < "€" (U+20AC) < "😀" (surrogates D83D DE00) by UTF-16 code units.
        #expect(text == #"{"a":{"z":true,"€":"x","😀":0},"b":1,"é":[]}"#)
    }
}

extension CanonicalJSONTests {
    /// Where UTF-8 byte order and UTF-16 order disagree (U+FF61 is EF BD A1 but 0xFF61; 😀 is F0 … but
    /// 0xD83D), the UTF-16 order wins; ASCII names and prefixes sort as before (issue 24's byte compare).
    @Test func byteComparisonKeepsUTF16OrderWhereTheyDiffer() {
        let value: JSONValue = .object([("\u{FF61}", 1), ("😀", 2), ("ab", 3), ("a", 4), ("B", 5), ("aé", 6)])
        #expect(String(decoding: value.canonicalized(), as: UTF8.self) == #"{"B":5,"a":4,"ab":3,"aé":6,"😀":2,"｡":1}"#)
    }

    /// Members already in order are written as they are (no sort); every other order, and an
    /// order that only looks sorted up to a duplicate name, still gets the one canonical text.
    @Test func everyMemberOrderGivesOneText() {
        let members: [(key: String, value: JSONValue)] = [("B", 5), ("a", .object([("y", 1), ("x", 2)])), ("ab", 3), ("aé", 6), ("😀", 2), ("\u{FF61}", 1)]
        let expected = #"{"B":5,"a":{"x":2,"y":1},"ab":3,"aé":6,"😀":2,"｡":1}"#
        var random = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            #expect(String(decoding: JSONValue.object(members.shuffled(using: &random)).canonicalized(), as: UTF8.self) == expected)
        }
        let duplicated: JSONValue = .object([("a", 1), ("b", 2), ("b", 3), ("a", 4)])
        #expect(String(decoding: duplicated.canonicalized(), as: UTF8.self) == #"{"a":1,"a":4,"b":2,"b":3}"#)
    }
}

@Suite struct JSONWriterTests {
    @Test func escapesOnlyWhatRFC8785Requires() throws {
        let value = JSONValue.string("a\"b\\c\n\u{01}é/😀\t")
        #expect(value.text == #""a\"b\\c\n\u0001é/😀\t""#)
        #expect(try JSONParser.parse(value.text) == value)
        #expect(JSONValue.string("").text == #""""#)
        #expect(JSONValue.string("\u{1F}").text == #""\u001f""#)
    }
}

/// Issue 13, defect 9: objects are bounded by member count and duplicates are found with a set, so a
/// 64 KiB body with thousands of members is refused at member 1025, not after millions of comparisons.
@Suite struct JSONObjectLimitTests {
    static func object(members count: Int, duplicateLast: Bool = false) -> [UInt8] {
        var keys = (0..<count).map { "k\($0)" }
        if duplicateLast, count > 1 { keys[count - 1] = keys[0] }
        return Array(("{" + keys.map { "\"\($0)\":0" }.joined(separator: ",") + "}").utf8)
    }

    @Test func theCapIs1024Members() {
        #expect(JSONParser.defaultMaxMembers == 1024)
    }

    @Test func anObjectOfExactlyTheCapParses() throws {
        let value = try JSONParser.parse(Self.object(members: JSONParser.defaultMaxMembers))
        #expect(value.objectValue?.count == JSONParser.defaultMaxMembers)
        #expect(value["k1023"] == 0)
    }

    @Test func oneMemberMoreIsRefused() {
        #expect(throws: JSONError.self) { try JSONParser.parse(Self.object(members: JSONParser.defaultMaxMembers + 1)) }
    }

    @Test func aDuplicateAtTheEndOfAFullObjectIsStillFound() {
        do {
            _ = try JSONParser.parse(Self.object(members: JSONParser.defaultMaxMembers, duplicateLast: true))
            Issue.record("a duplicate member was accepted")
        } catch {
            #expect(error.reason.contains("duplicate"))
        }
    }

    @Test func a64KiBBodyOfThousandsOfMembersIsRefusedByCount() throws {
        var body = Self.object(members: 6500)
        #expect(body.count > 60_000 && body.count <= 65_536)
        do {
            _ = try JSONParser.parse(body)
            Issue.record("an object of 6500 members was accepted")
        } catch {
            // Refused at the member over the cap: the offset is where member 1025 begins, long before the end.
            #expect(error.reason.contains("more than 1024 members"), "\(error)")
            let prefix = Self.object(members: JSONParser.defaultMaxMembers).dropLast()  // "{…,"k1023":0"
            #expect(error.offset <= prefix.count + 2, "\(error)")
        }
        // Nested objects are each bounded too (a member cap is per object).
        body = Array(#"{"a":"#.utf8) + Self.object(members: 2000) + Array("}".utf8)
        #expect(throws: JSONError.self) { try JSONParser.parse(body) }
        // A caller that parses its own files may allow more.
        #expect(try JSONParser.parse(Self.object(members: 2000), maxMembers: 4096).objectValue?.count == 2000)
    }
}

@Suite struct JSONNumberWritingTests {
    /// Integers are written digit by digit (not through `ecmaScriptString`); both spellings must be
    /// the same text, serialized and canonical, at the edges of the exact-integer range too.
    @Test(arguments: [1.0, -1, 7, 10, 99, 100, -1_000_000, 1_764_633_600, 4_294_967_296,
                      9_007_199_254_740_991, -9_007_199_254_740_991, 9_007_199_254_740_992, 1e21, 1e22,
                      0, -0.0, 0.5, -2.5, 1e-7, 123_456_789.125])
    func integersMatchECMAScript(value: Double) {
        let expected = Array(JSONValue.ecmaScriptString(value).utf8)
        #expect(JSONValue.number(value).serialized() == expected)
        #expect(JSONValue.array([.number(value)]).canonicalized() == Array("[".utf8) + expected + Array("]".utf8))
    }
}

@Suite struct JSONStringEscapingTests {
    /// The eight-bytes-at-a-time scan must find every byte that needs escaping wherever it sits:
    /// random strings dense in control characters, quotes, backslashes and multi-byte UTF-8, against
    /// an escaper that looks at one scalar at a time.
    @Test func wordScanFindsEveryEscape() throws {
        let pieces = ["a", "bc", "\"", "\\", "\n", "\u{1}", "\u{1f}", " ", "~", "é", "🔑", "\u{7f}", "0123456789", "\t", "/"]
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<2000 {
            var s = ""
            state = state &* 6364136223846793005 &+ 1442695040888963407
            let length = Int(state >> 58)
            for _ in 0..<length {
                state = state &* 6364136223846793005 &+ 1442695040888963407
                s += pieces[Int(state >> 33) % pieces.count]
            }
            var reference = "\""
            for scalar in s.unicodeScalars {
                switch scalar {
                case "\"": reference += "\\\""
                case "\\": reference += "\\\\"
                case "\u{8}": reference += "\\b"
                case "\u{c}": reference += "\\f"
                case "\n": reference += "\\n"
                case "\r": reference += "\\r"
                case "\t": reference += "\\t"
                case _ where scalar.value < 0x20: reference += String(format: "\\u%04x", scalar.value)
                default: reference.unicodeScalars.append(scalar)
                }
            }
            reference += "\""
            #expect(JSONValue.string(s).serialized() == Array(reference.utf8), "\(Array(s.utf8))")
            #expect(try JSONParser.parse(JSONValue.string(s).serialized()).stringValue == s)
        }
    }
}

/// `JSONObjectWriter` writes what `JSONValue.serialized()` writes for the same members: flat,
/// nested objects (including an empty one), arrays of objects, and strings that need escaping.
@Suite struct JSONObjectWriterTests {
    @Test func nestedObjectsAndArraysOfObjectsMatchTheTree() throws {
        var writer = JSONObjectWriter(capacity: 8)  // small: the nested writers grow the shared buffer
        writer.member("user") { user in
            user.member("id", string: "u\"1\\")
            user.member("n", integer: -42)
        }
        writer.member("empty") { _ in }
        writer.member("list", objects: 3) { i, item in
            item.member("i", integer: Int64(i))
            if i == 1 { item.member("inner") { $0.member("s", strings: ["a", "\n"]) } }
            item.member("b", bool: i == 2)
        }
        writer.member("none", objects: 0) { _, _ in }
        writer.member("after", optionalString: nil)
        let tree: JSONValue = .object([
            ("user", .object([("id", "u\"1\\"), ("n", -42)])), ("empty", .object([])),
            ("list", .array([.object([("i", 0), ("b", false)]),
                             .object([("i", 1), ("inner", .object([("s", ["a", "\n"])])), ("b", false)]),
                             .object([("i", 2), ("b", true)])])),
            ("none", .array([])), ("after", .null),
        ])
        let written = writer.finish()
        #expect(written == tree.serialized())
        #expect(try JSONParser.parse(written) == tree)
    }

    @Test func finishedValueIsTheTreeOfTheText() {
        var writer = JSONObjectWriter()
        writer.member("a", string: "x")
        writer.member("o") { $0.member("n", integer: 7) }
        #expect(writer.finishedValue() == .object([("a", "x"), ("o", .object([("n", 7)]))]))
    }
}
