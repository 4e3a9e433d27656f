import JSON
import Testing

/// RFC 8785 (JCS) against the RFC's own published examples: step-up binds actions by the SHA-256
/// of this canonical form, so a client in any language must get the same bytes.
@Suite("RFC 8785 canonical JSON")
struct CanonicalJSONRFC8785Tests {
    /// RFC 8785 §3.2.2 (the "Sample" input and its canonical output).
    @Test("§3.2.2 sample: numbers, string escaping, literals, member order")
    func section322Sample() throws {
        let input = #"""
            {
              "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
              "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
              "literals": [null, true, false]
            }
            """#
        let expected = #"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        let out = try JSONParser.parse(input).canonicalized()
        #expect(String(decoding: out, as: UTF8.self) == expected)
    }

    /// RFC 8785 §3.2.3: members sorted by UTF-16 code units, not by code points or UTF-8.
    @Test("§3.2.3 sorting: UTF-16 code unit order")
    func section323Sorting() throws {
        let input = #"""
            {
              "\u20ac": "Euro Sign",
              "\r": "Carriage Return",
              "\ufb33": "Hebrew Letter Dalet With Dagesh",
              "1": "One",
              "\ud83d\ude00": "Emoji: Grinning Face",
              "\u0080": "Control",
              "\u00f6": "Latin Small Letter O With Diaeresis"
            }
            """#
        let canonical = try JSONParser.parse(input).canonicalized()
        let keys = try #require(try JSONParser.parse(canonical).objectValue).map(\.key)
        #expect(keys == ["\r", "1", "\u{80}", "\u{f6}", "\u{20ac}", "\u{1F600}", "\u{fb33}"])
        // The values follow in the same order, in the RFC's expected property order.
        let values = try #require(try JSONParser.parse(canonical).objectValue).compactMap(\.value.stringValue)
        #expect(values == ["Carriage Return", "One", "Control", "Latin Small Letter O With Diaeresis", "Euro Sign",
                           "Emoji: Grinning Face", "Hebrew Letter Dalet With Dagesh"])
        #expect(String(decoding: canonical, as: UTF8.self).hasPrefix(#"{"\r":"Carriage Return","1":"One","#))
    }

    /// RFC 8785 Appendix B: IEEE 754 bit patterns and their ECMAScript serialisation.
    @Test("Appendix B number samples", arguments: [
        (0x0000000000000000, "0"), (0x8000000000000000, "0"),
        (0x0000000000000001, "5e-324"), (0x8000000000000001, "-5e-324"),
        (0x7fefffffffffffff, "1.7976931348623157e+308"), (0xffefffffffffffff, "-1.7976931348623157e+308"),
        (0x4340000000000000, "9007199254740992"), (0xc340000000000000, "-9007199254740992"),
        (0x4430000000000000, "295147905179352830000"),
        (0x44b52d02c7e14af5, "9.999999999999997e+22"), (0x44b52d02c7e14af6, "1e+23"), (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
        (0x444b1ae4d6e2ef4e, "999999999999999700000"), (0x444b1ae4d6e2ef4f, "999999999999999900000"), (0x444b1ae4d6e2ef50, "1e+21"),
        (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"), (0x3eb0c6f7a0b5ed8d, "0.000001"),
        (0x41b3de4355555553, "333333333.3333332"), (0x41b3de4355555554, "333333333.33333325"),
        (0x41b3de4355555555, "333333333.3333333"), (0x41b3de4355555556, "333333333.3333334"),
        (0x41b3de4355555557, "333333333.33333343"),
        (0xbecbf647612f3696, "-0.0000033333333333333333"), (0x43143ff3c1cb0959, "1424953923781206.2"),
    ] as [(UInt64, String)])
    func appendixB(_ bits: UInt64, _ expected: String) {
        #expect(JSONValue.ecmaScriptString(Double(bitPattern: bits)) == expected)
    }

    @Test("Canonical form does not depend on input order or whitespace")
    func orderIndependent() throws {
        let a = try JSONParser.parse(#"{"type":"transfer","amount":"200.00","currency":"EUR","to":{"iban":"DE89","name":"X"}}"#)
        let b = try JSONParser.parse(#"{ "to" : { "name":"X", "iban":"DE89" }, "currency":"EUR", "amount":"200.00", "type":"transfer" }"#)
        #expect(a.canonicalized() == b.canonicalized())
        #expect(String(decoding: a.canonicalized(), as: UTF8.self)
                == #"{"amount":"200.00","currency":"EUR","to":{"iban":"DE89","name":"X"},"type":"transfer"}"#)
    }
}
