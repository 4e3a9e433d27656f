import CBOR
import Testing

/// `decodeFlatIntegerMap` (issue 24) must accept only what `decode` accepts and give the same value:
/// checked on COSE-shaped keys and on every one-byte change and every truncation of them.
@Suite struct CBORFlatMapTests {
    static let keys: [[UInt8]] = [
        // EC2 P-256: {1: 2, 3: -7, -1: 1, -2: x(32), -3: y(32)}
        [0xA5, 0x01, 0x02, 0x03, 0x26, 0x20, 0x01, 0x21, 0x58, 0x20] + [UInt8](repeating: 0x11, count: 32)
            + [0x22, 0x58, 0x20] + [UInt8](repeating: 0x22, count: 32),
        // OKP Ed25519: {1: 1, 3: -8, -1: 6, -2: x(32)}
        [0xA4, 0x01, 0x01, 0x03, 0x27, 0x20, 0x06, 0x21, 0x58, 0x20] + [UInt8](repeating: 0x33, count: 32),
        // RSA: {1: 3, 3: -257, -1: n(256), -2: e(3)}
        [0xA4, 0x01, 0x03, 0x03, 0x39, 0x01, 0x00, 0x20, 0x59, 0x01, 0x00] + [UInt8](repeating: 0xC5, count: 256)
            + [0x21, 0x43, 0x01, 0x00, 0x01],
    ]

    @Test func acceptsCOSEKeysAsDecodeDoes() throws {
        for key in Self.keys {
            let fast = try #require(CBORDecoder.decodeFlatIntegerMap(key))
            #expect(fast == (try CBORDecoder.decode(key, maxDepth: 2)))
        }
    }

    @Test func neverAcceptsWhatDecodeRefusesNorDiffers() {
        var checked = 0
        for key in Self.keys {
            var variants: [[UInt8]] = (0..<key.count).map { Array(key[..<$0]) } + [key + [0x00]]
            for i in 0..<min(key.count, 48) {
                for delta: UInt8 in [1, 0x20, 0x80, 0xFF] {
                    var v = key
                    v[i] = v[i] &+ delta
                    variants.append(v)
                }
            }
            // A duplicate label and a non-shortest head.
            variants.append([0xA2, 0x01, 0x02, 0x01, 0x03])
            variants.append([0xA1, 0x18, 0x01, 0x02])
            for v in variants {
                guard let fast = CBORDecoder.decodeFlatIntegerMap(v) else { continue }
                checked += 1
                #expect(fast == (try? CBORDecoder.decode(v, maxDepth: 2)), "variant \(v.prefix(12))")
            }
        }
        #expect(checked > 10)
        #expect(CBORDecoder.decodeFlatIntegerMap([0xA2, 0x01, 0x02, 0x01, 0x03]) == nil)
        #expect(CBORDecoder.decodeFlatIntegerMap([0xA1, 0x18, 0x01, 0x02]) == nil)
    }
}
