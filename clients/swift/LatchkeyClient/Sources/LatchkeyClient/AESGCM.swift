import Foundation

/// AES-256-GCM (FIPS 197, NIST SP 800-38D) with a 12-byte IV and a 16-byte tag, in plain Swift: the
/// vault's wraps (VaultCrypto) are 32-byte keys, so this is small and unhurried. The tag is compared
/// in constant time; the S-box is a table (this runs on the owner's own device, over their own keys).
enum AESGCM {
    /// IV ‖ ciphertext ‖ tag.
    static func seal(_ plaintext: [UInt8], key: [UInt8], iv: [UInt8], aad: [UInt8]) -> [UInt8] {
        precondition(key.count == 32 && iv.count == 12, "AES-256-GCM takes a 32-byte key and a 12-byte IV")
        let aes = AES256(key: key)
        let ciphertext = ctr(plaintext, aes: aes, iv: iv)
        return iv + ciphertext + tag(aes: aes, iv: iv, aad: aad, ciphertext: ciphertext)
    }

    /// The plaintext of IV ‖ ciphertext ‖ tag, or nil when the tag does not verify.
    static func open(_ sealed: [UInt8], key: [UInt8], aad: [UInt8]) -> [UInt8]? {
        guard key.count == 32, sealed.count >= 28 else { return nil }
        let aes = AES256(key: key)
        let iv = Array(sealed[0..<12]), ciphertext = Array(sealed[12..<(sealed.count - 16)]), given = sealed.suffix(16)
        let expected = tag(aes: aes, iv: iv, aad: aad, ciphertext: ciphertext)
        var difference: UInt8 = 0
        for (a, b) in zip(expected, given) { difference |= a ^ b }
        return difference == 0 ? ctr(ciphertext, aes: aes, iv: iv) : nil
    }

    /// CTR mode from counter block IV ‖ 2 (block 1 masks the tag).
    static func ctr(_ input: [UInt8], aes: AES256, iv: [UInt8]) -> [UInt8] {
        var out = [UInt8](), counter: UInt32 = 2
        out.reserveCapacity(input.count)
        for start in stride(from: 0, to: input.count, by: 16) {
            let stream = aes.encrypt(iv + bigEndian(counter))
            for i in start..<min(start + 16, input.count) { out.append(input[i] ^ stream[i - start]) }
            counter &+= 1
        }
        return out
    }

    static func tag(aes: AES256, iv: [UInt8], aad: [UInt8], ciphertext: [UInt8]) -> [UInt8] {
        let h = aes.encrypt([UInt8](repeating: 0, count: 16))
        var y = [UInt8](repeating: 0, count: 16)
        func absorb(_ data: [UInt8]) {
            for start in stride(from: 0, to: data.count, by: 16) {
                for i in start..<min(start + 16, data.count) { y[i - start] ^= data[i] }
                y = multiply(y, h)
            }
        }
        absorb(aad)
        absorb(ciphertext)
        absorb(bigEndian64(UInt64(aad.count) * 8) + bigEndian64(UInt64(ciphertext.count) * 8))
        let mask = aes.encrypt(iv + bigEndian(1))
        return zip(y, mask).map { $0 ^ $1 }
    }

    /// GF(2^128) multiplication in GCM's bit order (SP 800-38D algorithm 1), bit by bit.
    static func multiply(_ x: [UInt8], _ y: [UInt8]) -> [UInt8] {
        var z = [UInt8](repeating: 0, count: 16), v = y
        for i in 0..<128 {
            let bit = (x[i / 8] >> (7 - UInt8(i % 8))) & 1
            let take = 0 &- bit  // 0xFF when the bit is set
            for j in 0..<16 { z[j] ^= v[j] & take }
            let carry = v[15] & 1
            for j in stride(from: 15, to: 0, by: -1) { v[j] = v[j] >> 1 | v[j - 1] << 7 }
            v[0] >>= 1
            v[0] ^= 0xE1 & (0 &- carry)
        }
        return z
    }

    static func bigEndian(_ n: UInt32) -> [UInt8] { [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] }
    static func bigEndian64(_ n: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: n >> (56 - 8 * UInt64($0))) } }
}

/// The AES-256 block cipher, encryption only (all GCM needs).
struct AES256 {
    let roundKeys: [UInt8]  // 15 round keys of 16 bytes

    init(key: [UInt8]) {
        var w = key
        var rcon: UInt8 = 1
        while w.count < 240 {
            var t = Array(w[(w.count - 4)...])
            let i = w.count / 4
            if i % 8 == 0 {
                t = [Self.sbox[Int(t[1])] ^ rcon, Self.sbox[Int(t[2])], Self.sbox[Int(t[3])], Self.sbox[Int(t[0])]]
                rcon = Self.xtime(rcon)
            } else if i % 8 == 4 {
                t = t.map { Self.sbox[Int($0)] }
            }
            for j in 0..<4 { w.append(w[w.count - 32] ^ t[j]) }
        }
        roundKeys = w
    }

    func encrypt(_ block: [UInt8]) -> [UInt8] {
        var s = zip(block, roundKeys[0..<16]).map { $0 ^ $1 }
        for round in 1...14 {
            s = s.map { Self.sbox[Int($0)] }
            // ShiftRows: row r (bytes r, r+4, r+8, r+12) rotates left by r.
            s = (0..<16).map { s[($0 + 4 * ($0 % 4)) % 16] }
            if round < 14 {
                for c in 0..<4 {
                    let a = Array(s[(4 * c)..<(4 * c + 4)])
                    let all = a[0] ^ a[1] ^ a[2] ^ a[3]
                    for r in 0..<4 { s[4 * c + r] = a[r] ^ all ^ Self.xtime(a[r] ^ a[(r + 1) % 4]) }
                }
            }
            for i in 0..<16 { s[i] ^= roundKeys[16 * round + i] }
        }
        return s
    }

    static func xtime(_ b: UInt8) -> UInt8 { b << 1 ^ (0x1B & (0 &- (b >> 7))) }

    static let sbox: [UInt8] = [
        0x63, 0x7c, 0x77, 0x7b, 0xf2, 0x6b, 0x6f, 0xc5, 0x30, 0x01, 0x67, 0x2b, 0xfe, 0xd7, 0xab, 0x76,
        0xca, 0x82, 0xc9, 0x7d, 0xfa, 0x59, 0x47, 0xf0, 0xad, 0xd4, 0xa2, 0xaf, 0x9c, 0xa4, 0x72, 0xc0,
        0xb7, 0xfd, 0x93, 0x26, 0x36, 0x3f, 0xf7, 0xcc, 0x34, 0xa5, 0xe5, 0xf1, 0x71, 0xd8, 0x31, 0x15,
        0x04, 0xc7, 0x23, 0xc3, 0x18, 0x96, 0x05, 0x9a, 0x07, 0x12, 0x80, 0xe2, 0xeb, 0x27, 0xb2, 0x75,
        0x09, 0x83, 0x2c, 0x1a, 0x1b, 0x6e, 0x5a, 0xa0, 0x52, 0x3b, 0xd6, 0xb3, 0x29, 0xe3, 0x2f, 0x84,
        0x53, 0xd1, 0x00, 0xed, 0x20, 0xfc, 0xb1, 0x5b, 0x6a, 0xcb, 0xbe, 0x39, 0x4a, 0x4c, 0x58, 0xcf,
        0xd0, 0xef, 0xaa, 0xfb, 0x43, 0x4d, 0x33, 0x85, 0x45, 0xf9, 0x02, 0x7f, 0x50, 0x3c, 0x9f, 0xa8,
        0x51, 0xa3, 0x40, 0x8f, 0x92, 0x9d, 0x38, 0xf5, 0xbc, 0xb6, 0xda, 0x21, 0x10, 0xff, 0xf3, 0xd2,
        0xcd, 0x0c, 0x13, 0xec, 0x5f, 0x97, 0x44, 0x17, 0xc4, 0xa7, 0x7e, 0x3d, 0x64, 0x5d, 0x19, 0x73,
        0x60, 0x81, 0x4f, 0xdc, 0x22, 0x2a, 0x90, 0x88, 0x46, 0xee, 0xb8, 0x14, 0xde, 0x5e, 0x0b, 0xdb,
        0xe0, 0x32, 0x3a, 0x0a, 0x49, 0x06, 0x24, 0x5c, 0xc2, 0xd3, 0xac, 0x62, 0x91, 0x95, 0xe4, 0x79,
        0xe7, 0xc8, 0x37, 0x6d, 0x8d, 0xd5, 0x4e, 0xa9, 0x6c, 0x56, 0xf4, 0xea, 0x65, 0x7a, 0xae, 0x08,
        0xba, 0x78, 0x25, 0x2e, 0x1c, 0xa6, 0xb4, 0xc6, 0xe8, 0xdd, 0x74, 0x1f, 0x4b, 0xbd, 0x8b, 0x8a,
        0x70, 0x3e, 0xb5, 0x66, 0x48, 0x03, 0xf6, 0x0e, 0x61, 0x35, 0x57, 0xb9, 0x86, 0xc1, 0x1d, 0x9e,
        0xe1, 0xf8, 0x98, 0x11, 0x69, 0xd9, 0x8e, 0x94, 0x9b, 0x1e, 0x87, 0xe9, 0xce, 0x55, 0x28, 0xdf,
        0x8c, 0xa1, 0x89, 0x0d, 0xbf, 0xe6, 0x42, 0x68, 0x41, 0x99, 0x2d, 0x0f, 0xb0, 0x54, 0xbb, 0x16,
    ]
}
