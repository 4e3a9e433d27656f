/// base64url (RFC 4648 §5). Encoding never pads; decoding tolerates trailing `=` padding (some
/// clients send it) but refuses any character outside the URL-safe alphabet, so standard base64
/// (`+`, `/`) is an error rather than silently different bytes.
public enum Base64URL {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    static let reverse: [UInt8] = {
        var t = [UInt8](repeating: 0xFF, count: 256)
        for (i, c) in alphabet.enumerated() { t[Int(c)] = UInt8(i) }
        return t
    }()

    public static func encode(_ bytes: [UInt8]) -> String {
        let length = (bytes.count * 4 + 2) / 3
        guard length > 0 else { return "" }
        // Written straight into the string's storage through the alphabet's buffer: this runs for
        // every token, id and challenge the server hands out.
        return alphabet.withUnsafeBufferPointer { table in
            bytes.withUnsafeBufferPointer { input in
                String(unsafeUninitializedCapacity: length) { out in
                    var i = 0, o = 0
                    while i + 3 <= input.count {
                        let n = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8 | UInt32(input[i + 2])
                        out[o] = table[Int(n >> 18)]
                        out[o + 1] = table[Int(n >> 12 & 63)]
                        out[o + 2] = table[Int(n >> 6 & 63)]
                        out[o + 3] = table[Int(n & 63)]
                        i += 3
                        o += 4
                    }
                    switch input.count - i {
                    case 1:
                        let n = UInt32(input[i]) << 16
                        out[o] = table[Int(n >> 18)]
                        out[o + 1] = table[Int(n >> 12 & 63)]
                        o += 2
                    case 2:
                        let n = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8
                        out[o] = table[Int(n >> 18)]
                        out[o + 1] = table[Int(n >> 12 & 63)]
                        out[o + 2] = table[Int(n >> 6 & 63)]
                        o += 3
                    default: break
                    }
                    return o
                }
            }
        }
    }

    public static func decode(_ text: String) -> [UInt8]? {
        var text = text
        // Native Swift strings are contiguous UTF-8: decode in place, without copying the text.
        return text.withUTF8 { decode(utf8: $0) }
    }

    public static func decode(utf8 input: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        var count = input.count
        var padding = 0
        while count > 0, input[count - 1] == UInt8(ascii: "=") { count -= 1; padding += 1 }
        guard padding <= 2, count % 4 != 1 else { return nil }
        if padding > 0, (count + padding) % 4 != 0 { return nil }
        var ok = true
        let output = reverse.withUnsafeBufferPointer { t in
            [UInt8](unsafeUninitializedCapacity: count * 3 / 4) { out, written in
                var o = 0
                var i = 0
                defer { written = o }
                while i + 4 <= count {
                    let a = t[Int(input[i])], b = t[Int(input[i + 1])], c = t[Int(input[i + 2])], d = t[Int(input[i + 3])]
                    guard (a | b | c | d) & 0xC0 == 0 else { ok = false; return }
                    out[o] = a << 2 | b >> 4
                    out[o + 1] = (b & 0x0F) << 4 | c >> 2
                    out[o + 2] = (c & 0x03) << 6 | d
                    o += 3
                    i += 4
                }
                switch count - i {
                case 2:
                    let a = t[Int(input[i])], b = t[Int(input[i + 1])]
                    // Non-zero leftover bits mean a non-canonical encoding of the last byte.
                    guard (a | b) & 0xC0 == 0, b & 0x0F == 0 else { ok = false; return }
                    out[o] = a << 2 | b >> 4
                    o += 1
                case 3:
                    let a = t[Int(input[i])], b = t[Int(input[i + 1])], c = t[Int(input[i + 2])]
                    guard (a | b | c) & 0xC0 == 0, c & 0x03 == 0 else { ok = false; return }
                    out[o] = a << 2 | b >> 4
                    out[o + 1] = (b & 0x0F) << 4 | c >> 2
                    o += 2
                default: break
                }
            }
        }
        return ok ? output : nil
    }
}
