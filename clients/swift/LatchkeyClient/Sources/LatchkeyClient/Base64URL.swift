import Foundation

/// Base64url without padding (RFC 4648 §5), the encoding of every binary field in Latchkey's JSON.
public enum Base64URL {
    public static func encode(_ data: some Sequence<UInt8>) -> String {
        Data(data).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Strict: the base64url alphabet only, no padding, no whitespace, and no length that cannot be
    /// base64 (a remainder of one character). Standard base64 (`+`, `/`, `=`) is refused.
    public static func decode(_ text: String) -> Data? {
        guard text.utf8.allSatisfy({ isAlphabet($0) }), text.utf8.count % 4 != 1 else { return nil }
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        standard += String(repeating: "=", count: (4 - standard.utf8.count % 4) % 4)
        return Data(base64Encoded: standard)
    }

    /// Standard base64 (what App Attest's key ids come as) to base64url.
    public static func fromStandardBase64(_ text: String) -> String? { Data(base64Encoded: text).map { encode($0) } }

    static func isAlphabet(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "_"): true
        default: false
        }
    }
}
