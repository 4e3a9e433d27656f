import Foundation
import LatchkeyClient
import Testing

/// RFC 8785 as the client computes it, on its own (these run on any platform, without a server).
@Suite("RFC 8785 canonical JSON and the action hash")
struct CanonicalJSONTests {
    /// RFC 8785 §3.2.2.3 and Appendix B: ECMAScript number formatting.
    @Test(arguments: [
        ("0", "0"), ("-0", "0"), ("1", "1"), ("1.0", "1"), ("1e2", "100"), ("1E2", "100"), ("100.00", "100"),
        ("4.50", "4.5"), ("2e-3", "0.002"), ("0.000001", "0.000001"), ("0.0000001", "1e-7"), ("1e21", "1e+21"),
        ("1e20", "100000000000000000000"), ("123456789012345678901", "123456789012345680000"), ("1e30", "1e+30"),
        ("0.000000000000000000000000001", "1e-27"), ("333333333.33333329", "333333333.3333333"),
        ("-1.5e-10", "-1.5e-10"), ("9007199254740993", "9007199254740992"), ("1.7976931348623157e308", "1.7976931348623157e+308"),
        ("5e-324", "5e-324"), ("-5e-324", "-5e-324"), ("0.1", "0.1"), ("295147905179352830000", "295147905179352830000"),
    ])
    func numbers(text: String, expected: String) throws {
        let value = try LatchkeyJSON(parsing: text)
        #expect(String(decoding: value.canonicalized(), as: UTF8.self) == expected)
    }

    /// RFC 8785 §3.2.3: names sorted by UTF-16 code units (so U+1F600, a surrogate pair D83D DE00,
    /// sorts before U+FB33), nested objects too, arrays keep their order; §3.2.2.2: only `"`, `\`
    /// and control characters are escaped, and `\u` escapes in the input become the characters.
    @Test func orderAndStrings() throws {
        let text = #"{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis","b":[3,{"z":1,"a":2}]}"#
        let expected = "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"b\":[3,{\"a\":2,\"z\":1}],\"\u{80}\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"דּ\":\"Hebrew Letter Dalet With Dagesh\"}"
        #expect(String(decoding: try LatchkeyJSON(parsing: text).canonicalized(), as: UTF8.self) == expected)
        let escapes = try LatchkeyJSON(parsing: #"{"s":"\u0000\u001f\b\f\n\t\"\\\/\u007f\u2028"}"#)
        #expect(String(decoding: escapes.canonicalized(), as: UTF8.self) == "{\"s\":\"\\u0000\\u001f\\b\\f\\n\\t\\\"\\\\/\u{7F}\u{2028}\"}")
    }

    @Test func sha256() {
        #expect(Base64URL.encode(SHA256Digest.hash(Array("abc".utf8))) == "ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0")
        #expect(Base64URL.encode(SHA256Digest.hash([])) == "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU")
        let million = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(Base64URL.encode(SHA256Digest.hash(million)) == "zcduXJkU-5KBocfihNc-Z_GAmkiklyAOBG05zMcRLNA")
        // 55 and 56 bytes: the padding boundary.
        #expect(Base64URL.encode(SHA256Digest.hash([UInt8](repeating: 0x61, count: 55))) == "n0OQ-NMMLdkuyfCVtl4rmumwqSWlJY4kHJ8ekQ9zQxg")
        #expect(Base64URL.encode(SHA256Digest.hash([UInt8](repeating: 0x61, count: 56))) == "s1Q5pKxvCUi21vnjxq8PX1kM4g8b3nCQ73lwaG7Gc4o")
    }

    @Test func base64url() {
        #expect(Base64URL.encode(Data([0xFB, 0xFF, 0xFE])) == "-__-")
        #expect(Base64URL.decode("-__-") == Data([0xFB, 0xFF, 0xFE]))
        #expect(Base64URL.decode("+//+") == nil)
        #expect(Base64URL.decode("AA==") == nil)
        #expect(Base64URL.decode("A") == nil)
        #expect(Base64URL.decode("AA") == Data([0]))
    }

    /// What the server refuses to hash, the client refuses too (and says so before any request).
    @Test(arguments: [
        #"[1]"#, #"{}"#, #""x""#, #"{"a":1,"a":2}"#, #"{"é":1,"e\u0301":2}"#, #"{"a":"\ud800"}"#, #"{"a":1e400}"#, #"{"a":01}"#,
        #"{"a":1}x"#, "{\"a\":\"\u{1}\"}", #"{"a":NaN}"#,
    ])
    func refused(text: String) {
        #expect(throws: LatchkeyError.self) { try StepUpAction(jsonText: text) }
    }

    @Test func gatedActions() throws {
        #expect(String(decoding: try StepUpAction.deviceKeyEnrolment(deviceId: "iPhone-1").canonical, as: UTF8.self)
                == #"{"deviceId":"iPhone-1","type":"latchkey.device-key.enrol"}"#)
        struct Payment: Encodable { let type = "payment"; let amount = "200.00"; let currency = "EUR"; let to = "DE89 3704 0044 0532 0130 00" }
        let a = try StepUpAction(encoding: Payment())
        let b = try StepUpAction(jsonText: #"{"to":"DE89 3704 0044 0532 0130 00","currency":"EUR","amount":"200.00","type":"payment"}"#)
        #expect(a.hashBase64URL == b.hashBase64URL)
    }
}
