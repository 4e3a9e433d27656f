/// Just enough DER writing for the attestation builders' extensions (TPM SAN and EKU, Android key
/// descriptions). Definite lengths only; no validation: builders write what a test wants.
public enum DERWriter {
    public static func tlv(_ tag: [UInt8], _ content: [UInt8]) -> [UInt8] {
        let n = content.count
        let length: [UInt8] = n < 0x80 ? [UInt8(n)] : n < 0x100 ? [0x81, UInt8(n)] : [0x82, UInt8(n >> 8), UInt8(n & 0xFF)]
        return tag + length + content
    }
    public static func sequence(_ parts: [UInt8]...) -> [UInt8] { tlv([0x30], parts.flatMap { $0 }) }
    public static func set(_ parts: [UInt8]...) -> [UInt8] { tlv([0x31], parts.flatMap { $0 }) }
    public static func octetString(_ bytes: [UInt8]) -> [UInt8] { tlv([0x04], bytes) }
    public static func utf8String(_ text: String) -> [UInt8] { tlv([0x0C], Array(text.utf8)) }
    public static func integer(_ value: Int) -> [UInt8] { tlv([0x02], minimal(value)) }
    public static func enumerated(_ value: Int) -> [UInt8] { tlv([0x0A], minimal(value)) }
    public static let null: [UInt8] = [0x05, 0x00]

    /// `[number] EXPLICIT inner`, context-specific and constructed (high-tag-number form above 30).
    public static func explicit(_ number: Int, _ inner: [UInt8]) -> [UInt8] {
        if number < 31 { return tlv([0xA0 | UInt8(number)], inner) }
        var digits: [UInt8] = [UInt8(number & 0x7F)]
        var v = number >> 7
        while v > 0 { digits.insert(UInt8(v & 0x7F) | 0x80, at: 0); v >>= 7 }
        return tlv([0xBF] + digits, inner)
    }

    public static func oid(_ dotted: String) -> [UInt8] {
        let arcs = dotted.split(separator: ".").compactMap { UInt64($0) }
        var body: [UInt8] = [UInt8(arcs[0] * 40 + arcs[1])]
        for arc in arcs.dropFirst(2) {
            var chunk: [UInt8] = [UInt8(arc & 0x7F)]
            var v = arc >> 7
            while v > 0 { chunk.insert(UInt8(v & 0x7F) | 0x80, at: 0); v >>= 7 }
            body += chunk
        }
        return tlv([0x06], body)
    }

    static func minimal(_ value: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        var v = value
        repeat { bytes.insert(UInt8(truncatingIfNeeded: v & 0xFF), at: 0); v >>= 8 } while v != 0 && v != -1
        if value >= 0, let first = bytes.first, first & 0x80 != 0 { bytes.insert(0, at: 0) }
        return bytes
    }
}
