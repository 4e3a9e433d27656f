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

@Suite struct JSONWriterTests {
    @Test func escapesOnlyWhatRFC8785Requires() throws {
        let value = JSONValue.string("a\"b\\c\n\u{01}é/😀\t")
        #expect(value.text == #""a\"b\\c\n\u0001é/😀\t""#)
        #expect(try JSONParser.parse(value.text) == value)
        #expect(JSONValue.string("").text == #""""#)
        #expect(JSONValue.string("\u{1F}").text == #""\u001f""#)
    }
}
