import Foundation
import Synchronization
import Crypto
import Testing

@Suite struct CryptoTests {
    /// A new key of the kind `alg` signs with (P-256 for ECDSA, RSA-2048 for both RSA schemes).
    static func generateKey(for alg: SignatureAlgorithm) -> PrivateKey {
        switch alg {
        case .ecdsa: .generateEC(.p256)
        case .ed25519: .generateEd25519()
        default: .generateRSA(bits: 2048)
        }
    }

    @Test func sha256KnownAnswer() {
        // FIPS 180-2 "abc".
        #expect(Digest.sha256(Array("abc".utf8)).map { String(format: $0) }.joined()
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test(arguments: [SignatureAlgorithm.ecdsa(.sha256), .ed25519, .rsaPKCS1(.sha256), .rsaPSS(.sha256)])
    func signVerifyRoundTrip(_ alg: SignatureAlgorithm) throws {
        let key = Self.generateKey(for: alg)
        let message = Array("latchkey".utf8)
        var sig = try key.sign(message, algorithm: alg)
        #expect(key.publicKey.verify(signature: sig, message: message, algorithm: alg))
        sig[sig.count / 2] ^= 0x80
        #expect(!key.publicKey.verify(signature: sig, message: message, algorithm: alg))
        #expect(!key.publicKey.verify(signature: [], message: message, algorithm: alg))
    }

    /// Keys that sign or verify many times copy a context set up once (a verifying key from its
    /// second use): every use must still answer for its own message and signature, on one key and
    /// from several threads at once, and a key that signs with two algorithms keeps them apart.
    @Test(arguments: [SignatureAlgorithm.ecdsa(.sha256), .ed25519, .rsaPKCS1(.sha256), .rsaPSS(.sha256)])
    func reusedKeysAnswerEveryUse(_ alg: SignatureAlgorithm) throws {
        let key = Self.generateKey(for: alg)
        let publicKey = key.publicKey
        for round in 0..<5 {
            let message = Array("latchkey \(round)".utf8)
            var signature = try key.sign(message, algorithm: alg)
            #expect(publicKey.verify(signature: signature, message: message, algorithm: alg))
            #expect(!publicKey.verify(signature: signature, message: message + [0], algorithm: alg))
            signature[signature.count / 2] ^= 0x80
            #expect(!publicKey.verify(signature: signature, message: message, algorithm: alg))
        }
        if case .rsaPKCS1 = alg {
            let pss = try key.sign([7], algorithm: .rsaPSS(.sha256))
            #expect(publicKey.verify(signature: pss, message: [7], algorithm: .rsaPSS(.sha256)))
            #expect(!publicKey.verify(signature: pss, message: [7], algorithm: .rsaPKCS1(.sha256)))
            let pkcs1 = try key.sign([7], algorithm: .rsaPKCS1(.sha256))
            #expect(publicKey.verify(signature: pkcs1, message: [7], algorithm: .rsaPKCS1(.sha256)))
        }
        let signatures = try (0..<8).map { try key.sign([UInt8($0)], algorithm: alg) }
        let results = Mutex([Bool](repeating: false, count: 64))
        DispatchQueue.concurrentPerform(iterations: 64) { i in
            let ok = publicKey.verify(signature: signatures[i % 8], message: [UInt8(i % 8)], algorithm: alg)
                && !publicKey.verify(signature: signatures[i % 8], message: [UInt8((i + 1) % 8)], algorithm: alg)
            results.withLock { $0[i] = ok }
        }
        #expect(results.withLock { $0.allSatisfy { $0 } })
    }

    @Test func algorithmMustFitKey() throws {
        let ec = PrivateKey.generateEC(.p256)
        let sig = try ec.sign([1], algorithm: .ecdsa(.sha256))
        #expect(!ec.publicKey.verify(signature: sig, message: [1], algorithm: .rsaPKCS1(.sha256)))
    }

    @Test func pointMustBeOnCurve() throws {
        let key = PrivateKey.generateEC(.p256).publicKey
        var point = try #require(key.x963Point)
        #expect(try PublicKey.ec(curve: .p256, x963: point).isSameKey(as: key))
        point[64] ^= 1
        #expect(throws: CryptoError.self) { try PublicKey.ec(curve: .p256, x963: point) }
        #expect(throws: CryptoError.self) { try PublicKey.ec(curve: .p256, x: [1], y: [2]) }
    }

    /// Points are imported by copying the curve from a parameters-only key: for every curve the
    /// key must be the one its SPKI gives, verify that key's signatures, keep its curve and refuse a
    /// point off the curve (and the 0x04 prefix's siblings).
    @Test(arguments: [(EllipticCurve.p256, HashFunction.sha256), (.p384, .sha384), (.p521, .sha512)])
    func pointImportOnEveryCurve(curve: EllipticCurve, hash: HashFunction) throws {
        for _ in 0..<8 {
            let privateKey = PrivateKey.generateEC(curve)
            let key = privateKey.publicKey
            var point = try #require(key.x963Point)
            let imported = try PublicKey.ec(curve: curve, x963: point)
            #expect(imported.isSameKey(as: key))
            #expect(imported.type == .ec(curve))
            #expect(imported.spkiDER == key.spkiDER)
            let signature = try privateKey.sign([1, 2, 3], algorithm: .ecdsa(hash))
            #expect(imported.verify(signature: signature, message: [1, 2, 3], algorithm: .ecdsa(hash)))
            #expect(!imported.verify(signature: signature, message: [1, 2, 4], algorithm: .ecdsa(hash)))
            point[point.count - 1] ^= 1
            #expect(throws: CryptoError.self) { try PublicKey.ec(curve: curve, x963: point) }
            point[point.count - 1] ^= 1
            point[0] = 0x02
            #expect(throws: CryptoError.self) { try PublicKey.ec(curve: curve, x963: point) }
        }
    }

    @Test func spkiRoundTripRefusesTrailingBytes() throws {
        let key = PrivateKey.generateEC(.p256).publicKey
        #expect(try PublicKey(spkiDER: key.spkiDER).isSameKey(as: key))
        #expect(throws: CryptoError.self) { try PublicKey(spkiDER: key.spkiDER + [0]) }
        #expect(throws: CryptoError.self) { try PublicKey(spkiDER: [0x30, 0x03, 0x02, 0x01]) }
    }

    @Test func ecdsaSignatureConversions() throws {
        let key = PrivateKey.generateEC(.p256)
        let der = try key.sign([7], algorithm: .ecdsa(.sha256))
        let raw = try ECDSASignature.rawFromDER(der, coordinateLength: 32)
        #expect(raw.count == 64)
        #expect(try ECDSASignature.derFromRaw(raw) == der)
    }

    @Test func derReaderBoundsChecked() throws {
        #expect(throws: CryptoError.self) { try DERNode.parse([0x30, 0x05, 0x02]) }
        #expect(throws: CryptoError.self) { try DERNode.parse([0x30, 0x80, 0x00, 0x00]) }
        #expect(throws: CryptoError.self) { try DERNode.parse([0x02, 0x01, 0x00, 0x00]) }
        #expect(try DERNode.parse([0x06, 0x03, 0x55, 0x04, 0x03]).oidString == "2.5.4.3")
        // High tag number form: [709] as used by Android key descriptions.
        let node = try? DERNode.parse([0xBF, 0x85, 0x45, 0x02, 0x05, 0x00])
        #expect(node?.tagNumber == 709)
    }

    @Test func base64Standard() {
        #expect(Base64.encodeStandard(Array("foob".utf8)) == "Zm9vYg==")
        #expect(Base64.decodeStandard("Zm9vYg==") == Array("foob".utf8))
        #expect(Base64.decodeStandard("Zm9v-g==") == nil)
    }
}

func String(format byte: UInt8) -> String {
    let s = String(byte, radix: 16)
    return s.count == 1 ? "0" + s : s
}

@Suite struct ECDSACurveRuleTests {
    /// RFC 9053 §2.1: ES256 goes with P-256, ES384 with P-384, ES512 with P-521; PublicKey.verify
    /// refuses a valid signature made with another hash than its curve's.
    @Test func hashMustMatchCurve() throws {
        let key = PrivateKey.generateEC(.p256)
        let sig384 = try key.sign([9], algorithm: .ecdsa(.sha384))
        #expect(!key.publicKey.verify(signature: sig384, message: [9], algorithm: .ecdsa(.sha384)))
        let sig256 = try key.sign([9], algorithm: .ecdsa(.sha256))
        #expect(key.publicKey.verify(signature: sig256, message: [9], algorithm: .ecdsa(.sha256)))
    }
}

/// `SecureRandom` serves small requests from a block: every size, across block boundaries and from
/// many threads, must still give fresh random bytes (never the erased zeros, never a repeat).
@Suite struct SecureRandomTests {
    @Test func everySizeIsServedInFull() {
        for count in [0, 1, 2, 15, 16, 31, 32, 33, 63, 64, 65, 100, 1024, 1025, 4096] {
            #expect(SecureRandom.bytes(count).count == count)
        }
    }

    /// 200 k bytes drawn in sizes that straddle the block's end: about 1/256 of them are zero (a
    /// block handed out after erasing would make them all zero), and no 32-byte draw repeats.
    @Test func drawsAcrossBlocksAreFreshAndDistinct() {
        var zeros = 0, total = 0
        var seen = Set<[UInt8]>()
        for i in 0..<6_000 {
            let draw = SecureRandom.bytes(i % 3 == 0 ? 32 : (i % 3 == 1 ? 63 : 7))
            zeros += draw.count { $0 == 0 }
            total += draw.count
            if draw.count == 32 { #expect(seen.insert(draw).inserted) }
        }
        let expected = Double(total) / 256
        #expect(Double(zeros) > expected * 0.8 && Double(zeros) < expected * 1.2, "\(zeros) zero bytes of \(total)")
    }

    @Test func concurrentDrawsNeverRepeat() async {
        let draws = await withTaskGroup(of: [[UInt8]].self) { group in
            for _ in 0..<8 { group.addTask { (0..<2_000).map { _ in SecureRandom.bytes(16) } } }
            return await group.reduce(into: [[UInt8]]()) { $0 += $1 }
        }
        #expect(Set(draws).count == draws.count)
    }
}
