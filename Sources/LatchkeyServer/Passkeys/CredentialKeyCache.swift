import Storage
import Synchronization
import WebAuthn

/// Parsed credential keys by credential id: a login skips COSE parsing and key import. Keys never
/// change for a credential id; revocation is checked in the database on every login regardless.
final class CredentialKeyCache: Sendable {
    private let entries = Mutex<[[UInt8]: COSEKey]>([:])
    static let limit = 50_000

    func key(for credential: CredentialRecord) throws(WebAuthnError) -> COSEKey {
        if let hit = entries.withLock({ $0[credential.id] }) { return hit }
        let key = try COSEKey(bytes: credential.publicKey)
        entries.withLock { e in
            if e.count >= Self.limit { e.removeAll(keepingCapacity: true) }
            e[credential.id] = key
        }
        return key
    }

    func forget(_ id: [UInt8]) { entries.withLock { _ = $0.removeValue(forKey: id) } }
}
