import Crypto
import Testing

private func hex(_ s: String) -> [UInt8] {
    var out: [UInt8] = []
    var i = s.startIndex
    while i < s.endIndex {
        let j = s.index(i, offsetBy: 2)
        out.append(UInt8(s[i..<j], radix: 16)!)
        i = j
    }
    return out
}

@Suite struct HKDFTests {
    /// RFC 5869 appendix A, test cases 1 and 3 (SHA-256; case 3 without salt or info).
    @Test func rfc5869Vectors() {
        let one = HKDF.sha256(key: [UInt8](repeating: 0x0b, count: 22), salt: hex("000102030405060708090a0b0c"),
                              info: hex("f0f1f2f3f4f5f6f7f8f9"), length: 42)
        #expect(one == hex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"))
        let three = HKDF.sha256(key: [UInt8](repeating: 0x0b, count: 22), info: [], length: 42)
        #expect(three == hex("8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"))
    }

    @Test func infoSeparatesKeys() {
        let key = [UInt8](repeating: 7, count: 32)
        #expect(HKDF.sha256(key: key, info: Array("a".utf8)) != HKDF.sha256(key: key, info: Array("b".utf8)))
        #expect(HKDF.sha256(key: key, info: Array("a".utf8)).count == 32)
    }
}
