import Foundation
import LatchkeyClient
import Testing

/// The vault's byte formats in the Swift client (no server): the fixed vector latchkey.js's
/// `vaultCrypto` is held to (Tests/Browser/latchkey-vault.test.mjs; HKDF and AES-GCM from Python's
/// `cryptography`), so a wrap either client makes the other opens; AES-256-GCM against the GCM
/// specification's test cases.
@Suite("The vault's byte formats")
struct VaultCryptoTests {
    static func b(_ s: String) -> [UInt8] { [UInt8](Base64URL.decode(s)!) }
    static func hex(_ s: String) -> [UInt8] {
        stride(from: 0, to: s.count, by: 2).map { i in
            UInt8(s[s.index(s.startIndex, offsetBy: i)..<s.index(s.startIndex, offsetBy: i + 2)], radix: 16)!
        }
    }

    // The fixed vector of latchkey-vault.test.mjs.
    static let prf = b("YSKC2enbPGPVWz8qpXxzidiiCuTojPAPYIkbId9gx8k")
    static let userHandle = b("KjgQafJ82lXB5xkaMotUAZQ7VKN2rUXJIdWZJd6gCFw")
    static let credentialId = b("01F9NYjkEDlZeKHE8Sn8LQ")
    static let dataKey = b("Gwc7BParBenbni1xfFAe0AzaxchdgS-4CjLEc2y-7DY")
    static let recoveryKey = b("4iGqc9V5Y_882mAtCYyv9peA0Fmv3OWIsiT9ycv11zQ")
    static let kwk = "-UQRUPiU4FxV3W_49_Nml7mnRjrvbLQyoTMuikm6rzs"
    static let wrappedKey = "AAECAwQFBgcICQoLzadGCQUibJX4C8IwxKpqlxx_haRqBD_kJbVvTwicQRBrfLe14JCEToPH7Sqgt2C6"
    static let recoveryKWK = "PVdHAl1Clgb82dxIRXdU3-bILic8X0BHBYoUWio3adA"
    static let recoveryWrappedKey = "DA0ODxAREhMUFRYXgGkjDQg982QPUw2lHecim--D39vLs17taTjlLIiKs-TjTr8Uu0hPRVquhDX9keWT"

    @Test func unwrapsWhatLatchkeyJSWrapped() throws {
        #expect(try VaultCrypto.unwrapForPasskey(Self.wrappedKey, prfOutput: Self.prf, userHandle: Self.userHandle,
                                                 credentialId: Self.credentialId) == Self.dataKey)
        #expect(try VaultCrypto.unwrapForRecovery(Self.recoveryWrappedKey, recoveryKey: Self.recoveryKey) == Self.dataKey)
    }

    @Test func wrapsTheSameBytesAsLatchkeyJS() {
        #expect(Base64URL.encode(VaultCrypto.keyWrappingKey(prfOutput: Self.prf, userHandle: Self.userHandle,
                                                            credentialId: Self.credentialId)) == Self.kwk)
        #expect(Base64URL.encode(VaultCrypto.recoveryWrappingKey(Self.recoveryKey)) == Self.recoveryKWK)
        #expect(VaultCrypto.wrapForPasskey(dataKey: Self.dataKey, prfOutput: Self.prf, userHandle: Self.userHandle,
                                           credentialId: Self.credentialId, iv: Array(0..<12)) == Self.wrappedKey)
        #expect(VaultCrypto.wrapForRecovery(dataKey: Self.dataKey, recoveryKey: Self.recoveryKey, iv: Array(12..<24))
                == Self.recoveryWrappedKey)
    }

    @Test func aWrapOpensOnlyWithItsOwnKeyHandleAndIdAndUnchanged() {
        let other = [UInt8](repeating: 7, count: 32)
        #expect(throws: VaultCrypto.Locked.self) {
            try VaultCrypto.unwrapForPasskey(Self.wrappedKey, prfOutput: other, userHandle: Self.userHandle, credentialId: Self.credentialId)
        }
        #expect(throws: VaultCrypto.Locked.self) {
            try VaultCrypto.unwrapForPasskey(Self.wrappedKey, prfOutput: Self.prf, userHandle: other, credentialId: Self.credentialId)
        }
        #expect(throws: VaultCrypto.Locked.self) {
            try VaultCrypto.unwrapForPasskey(Self.wrappedKey, prfOutput: Self.prf, userHandle: Self.userHandle, credentialId: Array(other[0..<16]))
        }
        // The recovery wrap's associated data differs: a passkey wrap never opens as a recovery wrap.
        #expect(throws: VaultCrypto.Locked.self) { try VaultCrypto.unwrapForRecovery(Self.wrappedKey, recoveryKey: Self.recoveryKey) }
        var sealed = [UInt8](Base64URL.decode(Self.wrappedKey)!)
        for index in [0, 12, 43, 59] {
            sealed[index] ^= 1
            #expect(throws: VaultCrypto.Locked.self) {
                try VaultCrypto.unwrapForPasskey(Base64URL.encode(sealed), prfOutput: Self.prf, userHandle: Self.userHandle, credentialId: Self.credentialId)
            }
            sealed[index] ^= 1
        }
        #expect(throws: VaultCrypto.Locked.self) { try VaultCrypto.unwrapForRecovery("not base64url!", recoveryKey: Self.recoveryKey) }
        #expect(throws: VaultCrypto.Locked.self) { try VaultCrypto.unwrapForRecovery("AAEC", recoveryKey: Self.recoveryKey) }
    }

    @Test func theRecoveryCodeIs52Base32CharactersAsLatchkeyJSWritesIt() {
        let code = VaultCrypto.recoveryCode(Self.recoveryKey)
        // What latchkey.js's vaultCrypto.recoveryCode gives for the same key.
        #expect(code == "4IQ2U46VPFR76PG2MAWQTDFP62LYBUCZV7OOLCFSET64TS7V242A")
        #expect(VaultCrypto.parseRecoveryCode(code) == Self.recoveryKey)
        let grouped = stride(from: 0, to: 52, by: 4).map { i in
            String(code.dropFirst(i).prefix(4)).lowercased()
        }.joined(separator: " ")
        #expect(VaultCrypto.parseRecoveryCode(grouped) == Self.recoveryKey)
        #expect(VaultCrypto.parseRecoveryCode(String(code.dropLast())) == nil)
        #expect(VaultCrypto.parseRecoveryCode(String(code.dropLast()) + "1") == nil)  // not base32
        #expect(VaultCrypto.parseRecoveryCode(String(code.dropLast()) + "B") == nil)  // spare bits set
        for _ in 0..<20 {
            let key = VaultCrypto.randomBytes(32)
            #expect(VaultCrypto.parseRecoveryCode(VaultCrypto.recoveryCode(key)) == key)
        }
    }

    @Test func roundTripsWithRandomKeysAndIds() throws {
        for n in 1...16 {
            let dataKey = VaultCrypto.randomBytes(32), prf = VaultCrypto.randomBytes(32), handle = VaultCrypto.randomBytes(n * 4)
            let id = VaultCrypto.randomBytes(n * 5)
            let wrapped = VaultCrypto.wrapForPasskey(dataKey: dataKey, prfOutput: prf, userHandle: handle, credentialId: id)
            #expect(Base64URL.decode(wrapped)?.count == 60)
            #expect(try VaultCrypto.unwrapForPasskey(wrapped, prfOutput: prf, userHandle: handle, credentialId: id) == dataKey)
        }
    }

    /// The GCM specification's test cases 13 and 14 (AES-256, zero key and IV) and 16 (with AAD).
    @Test func aes256GCMKnownAnswers() {
        let key = [UInt8](repeating: 0, count: 32), iv = [UInt8](repeating: 0, count: 12)
        let k16 = Self.hex("feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308")
        let iv16 = Self.hex("cafebabefacedbaddecaf888")
        let p16 = Self.hex("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39")
        let a16 = Self.hex("feedfacedeadbeeffeedfacedeadbeefabaddad2")
        let c16 = Self.hex("522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662")
        let t16 = Self.hex("76fc6ece0f4e1768cddf8853bb2d551b")
        #expect(VaultCrypto.aesGCMSeal(p16, key: k16, iv: iv16, aad: a16) == iv16 + c16 + t16)
        #expect(VaultCrypto.aesGCMOpen(iv16 + c16 + t16, key: k16, aad: a16) == p16)
        #expect(VaultCrypto.aesGCMOpen(iv16 + c16 + t16, key: k16, aad: []) == nil)
        #expect(VaultCrypto.aesGCMSeal([UInt8](repeating: 0, count: 16), key: key, iv: iv, aad: [])
                == iv + Self.hex("cea7403d4d606b6e074ec5d3baf39d18d0d1c8a799996bf0265b98b5d48ab919"))
        #expect(VaultCrypto.aesGCMSeal([], key: key, iv: iv, aad: []) == iv + Self.hex("530f8afbc74536b9a963b4f1c4cb738b"))
    }
}
