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

@Suite struct AESGCMTests {
    /// McGrew & Viega, "The Galois/Counter Mode of Operation", test cases 13 and 14 (AES-256, zero key and IV).
    @Test func publishedVectors() throws {
        let key = [UInt8](repeating: 0, count: 32), nonce = [UInt8](repeating: 0, count: 12)
        let empty = try AESGCM.seal([], key: key, associatedData: [], nonce: nonce)
        #expect(empty.ciphertext.isEmpty)
        #expect(empty.tag == hex("530f8afbc74536b9a963b4f1c4cb738b"))
        let block = try AESGCM.seal([UInt8](repeating: 0, count: 16), key: key, associatedData: [], nonce: nonce)
        #expect(block.ciphertext == hex("cea7403d4d606b6e074ec5d3baf39d18"))
        #expect(block.tag == hex("d0d1c8a799996bf0265b98b5d48ab919"))
        #expect(try AESGCM.open(block, key: key, associatedData: []) == [UInt8](repeating: 0, count: 16))
    }

    @Test func roundTripWithAssociatedDataAndFreshNonces() throws {
        let key = SecureRandom.bytes(32)
        let message = Array("a private key".utf8)
        let a = try AESGCM.seal(message, key: key, associatedData: Array("kid-1".utf8))
        let b = try AESGCM.seal(message, key: key, associatedData: Array("kid-1".utf8))
        #expect(a.nonce != b.nonce)
        #expect(a.ciphertext != b.ciphertext)
        #expect(try AESGCM.open(a, key: key, associatedData: Array("kid-1".utf8)) == message)
    }

    @Test func anyChangeFailsAuthentication() throws {
        let key = SecureRandom.bytes(32)
        let sealed = try AESGCM.seal(Array("secret".utf8), key: key, associatedData: Array("kid-1".utf8))
        var flipped = sealed.ciphertext
        flipped[0] ^= 1
        var tag = sealed.tag
        tag[15] ^= 0x80
        let cases: [(AESGCM.Sealed, [UInt8], [UInt8])] = [
            (sealed, SecureRandom.bytes(32), Array("kid-1".utf8)),  // another key
            (sealed, key, Array("kid-2".utf8)),  // another row
            (AESGCM.Sealed(nonce: sealed.nonce, ciphertext: flipped, tag: sealed.tag), key, Array("kid-1".utf8)),
            (AESGCM.Sealed(nonce: sealed.nonce, ciphertext: sealed.ciphertext, tag: tag), key, Array("kid-1".utf8)),
            (AESGCM.Sealed(nonce: SecureRandom.bytes(12), ciphertext: sealed.ciphertext, tag: sealed.tag), key, Array("kid-1".utf8)),
        ]
        for (s, k, ad) in cases {
            #expect(throws: CryptoError(.invalidSignature, "")) { try AESGCM.open(s, key: k, associatedData: ad) }
        }
        #expect(throws: CryptoError(.invalidKey, "")) { try AESGCM.seal([], key: [1, 2, 3], associatedData: []) }
    }
}
