import Foundation
@testable import LatchkeyServer
import Storage
import Testing
import WebAuthn
import WebAuthnTesting

/// The imported-key cache a login reads before importing a passkey's key (issue 24).
@Suite("Credential key cache")
struct CredentialKeyCacheTests {
    static func credential(_ id: [UInt8], key: [UInt8]) -> CredentialRecord {
        CredentialRecord(id: id, userId: "user", publicKey: key, alg: -7, signCount: 0, aaguid: [UInt8](repeating: 0, count: 16),
                         transports: [], backupEligible: false, backedUp: false, attestationFormat: "none",
                         attestationType: "none", name: "Passkey", createdAt: Date())
    }

    @Test("a row whose key bytes changed is never verified with the cached key")
    func keyBytesArePartOfTheKey() throws {
        let cache = CredentialKeyCache()
        let id: [UInt8] = [1, 2, 3]
        let p256 = SoftAuthenticator(algorithm: .es256), ed25519 = SoftAuthenticator(algorithm: .edDSA)
        #expect(try cache.key(for: Self.credential(id, key: p256.publicKeyCOSE)).algorithm == .es256)
        #expect(try cache.key(for: Self.credential(id, key: p256.publicKeyCOSE)).algorithm == .es256)
        // Same credential id, other key: imported afresh, and the cache now holds the new one.
        #expect(try cache.key(for: Self.credential(id, key: ed25519.publicKeyCOSE)).algorithm == .edDSA)
        #expect(cache.count == 1)
        #expect(try cache.key(for: Self.credential(id, key: ed25519.publicKeyCOSE)).algorithm == .edDSA)
    }

    @Test("a full cache lets its oldest key go, one per new key")
    func evictsOldestFirst() throws {
        let cache = CredentialKeyCache(limit: 3)
        let key = SoftAuthenticator(algorithm: .es256).publicKeyCOSE
        for i in 0..<5 { _ = try cache.key(for: Self.credential([UInt8(i)], key: key)) }
        #expect(cache.count == 3)
        #expect(!cache.holds([0]) && !cache.holds([1]))
        #expect(cache.holds([2]) && cache.holds([3]) && cache.holds([4]))
        // A hit does not take a slot; a forgotten key's slot evicts nothing when its turn comes.
        _ = try cache.key(for: Self.credential([3], key: key))
        cache.forget([2])
        _ = try cache.key(for: Self.credential([5], key: key))
        #expect(cache.count == 3)
        #expect(cache.holds([3]) && cache.holds([4]) && cache.holds([5]))
    }

    @Test("a key that does not parse is refused and not cached")
    func malformedKeyIsNotCached() {
        let cache = CredentialKeyCache()
        #expect(throws: WebAuthnError.self) { _ = try cache.key(for: Self.credential([9], key: [0xA0])) }
        #expect(cache.count == 0)
    }
}
