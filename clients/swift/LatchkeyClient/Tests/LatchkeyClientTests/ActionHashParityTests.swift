#if canImport(WebAuthnTesting)
import DeviceKeys
import Foundation
import JSON
import LatchkeyClient
import Testing

/// The action hash, client against server: the same JSON text through the client's `StepUpAction`
/// and the server's (`DeviceKeys.StepUpAction`, what `POST /v1/step-up/challenges` computes) gives
/// the same canonical bytes and hash, and what one refuses the other refuses.
/// (LiveServerTests posts these texts to a running server and compares its `actionHash` too.)
@Suite("Action hash: client and server agree")
struct ActionHashParityTests {
    static let tricky: [String] = [
        // Numbers: exponents, trailing zeros, negative zero, the 2^53 edge, tiny and huge.
        #"{"amount":1e2}"#, #"{"amount":100}"#, #"{"amount":1.0}"#, #"{"amount":-0}"#, #"{"amount":-0.0}"#,
        #"{"a":1E+2,"b":1e-7,"c":0.000001,"d":1e21,"e":1e20,"f":123456789012345678901}"#,
        #"{"a":9007199254740993,"b":-9007199254740993,"c":4.50,"d":2e-3,"e":333333333.33333329}"#,
        #"{"a":5e-324,"b":1.7976931348623157e308,"c":0.1,"d":0.30000000000000004,"e":-1.5e-10}"#,
        // Strings: escapes of every kind, BMP and non-BMP characters written raw and as \u escapes.
        #"{"s":"\u00e9t\u00e9","t":"été"}"#, #"{"s":"\ud83d\ude00 and 😀"}"#, #"{"s":"\u0000\u001f\b\f\n\r\t\"\\\/"}"#,
        #"{"s":"\u007f\u0080\u2028\u2029\ufeff\uffff"}"#, #"{"s":"e\u0301","t":"\u00e9"}"#, #"{"\ud834\udd1e":"G clef","\uffff":1}"#,
        // Names: order by UTF-16 code units, not scalars or bytes; nesting; arrays keep their order.
        #"{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7}"#,
        #"{"b":{"z":[3,2,1],"a":{"y":null,"x":true}},"a":[{"d":false,"c":"x"}],"A":"upper"}"#,
        #"{"type":"payment","amount":"200.00","currency":"EUR","to":"DE89 3704 0044 0532 0130 00","memo":"Miete M\u00e4rz 💶"}"#,
        // Whitespace everywhere.
        " {\n\t\"b\" : [ 1 , 2 ] ,\r\n \"a\" : { } } ",
    ]

    static let refused: [String] = [
        #"[1]"#, #"{}"#, #"1"#, #"{"a":1,"a":2}"#, #"{"é":1,"e\u0301":2}"#, #"{"a":"\ud800"}"#, #"{"a":"\udc00x"}"#,
        #"{"a":1e400}"#, #"{"a":-1e400}"#, #"{"a":01}"#, #"{"a":.5}"#, #"{"a":1.}"#, #"{"a":+1}"#, #"{"a":1} x"#,
        "{\"a\":\"\u{1}\"}", #"{"a":"\x"}"#, "{\"a\":\"" + String(repeating: "x", count: 5000) + "\"}",
    ]

    @Test(arguments: tricky)
    func sameHash(text: String) throws {
        let client = try LatchkeyClient.StepUpAction(jsonText: text)
        let server = try DeviceKeys.StepUpAction(JSONParser.parse(Array(text.utf8)))
        #expect([UInt8](client.canonical) == server.canonical, "\(String(decoding: client.canonical, as: UTF8.self)) vs \(String(decoding: server.canonical, as: UTF8.self))")
        #expect([UInt8](client.hash) == server.hash)
    }

    @Test(arguments: refused)
    func bothRefuse(text: String) {
        #expect(throws: LatchkeyError.self) { try LatchkeyClient.StepUpAction(jsonText: text) }
        let serverAccepts = (try? JSONParser.parse(Array(text.utf8))).flatMap { try? DeviceKeys.StepUpAction($0) } != nil
        #expect(!serverAccepts)
    }

    /// Latchkey's own gated actions, built by each side's helper.
    @Test func gatedActions() throws {
        #expect([UInt8](try LatchkeyClient.StepUpAction.deviceKeyEnrolment(deviceId: "iPhone \u{1F4F1}").hash)
                == (try DeviceKeys.StepUpAction.deviceKeyEnrolment(deviceId: "iPhone \u{1F4F1}").hash))
        #expect([UInt8](LatchkeyClient.StepUpAction.passkeyAddition.hash) == (try DeviceKeys.StepUpAction.passkeyAddition().hash))
        #expect([UInt8](LatchkeyClient.StepUpAction.recoveryCodesCreation.hash) == (try DeviceKeys.StepUpAction.recoveryCodesCreation().hash))
        #expect([UInt8](try LatchkeyClient.StepUpAction.passkeyRevocation(credentialId: "AbC-_9").hash)
                == (try DeviceKeys.StepUpAction.passkeyRevocation(credentialId: "AbC-_9").hash))
        #expect([UInt8](try LatchkeyClient.StepUpAction.emailChange(email: "Ada@Example.org").hash)
                == (try DeviceKeys.StepUpAction.emailChange(email: "Ada@Example.org").hash))
    }

    /// Random documents (seeded, so a failure reproduces): both sides agree on every one.
    @Test func randomDocuments() throws {
        var rng = SeededGenerator(seed: 0x1a7c_4e11)
        for _ in 0..<500 {
            let text = "{" + (0..<Int.random(in: 1...5, using: &rng)).map { i in "\"\(randomString(&rng))\(i)\":\(randomValue(&rng, depth: 0))" }
                .joined(separator: ",") + "}"
            let client = try LatchkeyClient.StepUpAction(jsonText: text)
            let server = try DeviceKeys.StepUpAction(JSONParser.parse(Array(text.utf8)))
            #expect([UInt8](client.canonical) == server.canonical, "\(text)")
        }
    }

    func randomValue(_ rng: inout SeededGenerator, depth: Int) -> String {
        switch Int.random(in: 0..<(depth > 2 ? 4 : 6), using: &rng) {
        case 0: return ["true", "false", "null"][Int.random(in: 0..<3, using: &rng)]
        case 1: return "\"\(randomString(&rng))\""
        case 2:
            // A random double written the way Swift prints it, or with a random exponent spelling.
            let d = Double(bitPattern: UInt64.random(in: 0...UInt64.max, using: &rng))
            guard d.isFinite else { return "0" }
            return Bool.random(using: &rng) ? "\(d)" : "\(Int.random(in: -999...999, using: &rng))e\(Int.random(in: -30...30, using: &rng))"
        case 3: return "\(Int.random(in: -1_000_000...1_000_000, using: &rng))\(Bool.random(using: &rng) ? ".0" : "")"
        case 4: return "[" + (0..<Int.random(in: 0...3, using: &rng)).map { _ in randomValue(&rng, depth: depth + 1) }.joined(separator: ",") + "]"
        default:
            return "{" + (0..<Int.random(in: 0...3, using: &rng)).map { i in "\"\(randomString(&rng))_\(i)\":\(randomValue(&rng, depth: depth + 1))" }
                .joined(separator: ",") + "}"
        }
    }

    func randomString(_ rng: inout SeededGenerator) -> String {
        let pieces = ["a", "Z", "é", "e\\u0301", "\\u00e9", "€", "😀", "\\ud83d\\ude00", "\\n", "\\u0001", "\\\"", "\\\\", "דּ", "\\u2028", " ", "\u{7F}"]
        return (0..<Int.random(in: 0...4, using: &rng)).map { _ in pieces[Int.random(in: 0..<pieces.count, using: &rng)] }.joined()
    }
}

/// SplitMix64: a seeded generator for reproducible random documents.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
#endif
