import Storage
import Synchronization
import WebAuthn

/// Imported credential keys by credential id and key bytes: a login whose key is cached skips COSE
/// parsing and key import. Revocation is checked in the database on every login regardless.
///
/// A hit needs the stored key bytes to equal the cached ones, so a row whose key changed (a restore,
/// a credential id registered again after its row was deleted) is never verified with a stale key.
/// When full, the oldest insertion goes (first in, first out): one key freed per miss, where emptying
/// the whole cache at once paused every login behind the lock for 50,000 frees at a time.
final class CredentialKeyCache: Sendable {
    private struct Entry {
        let keyBytes: [UInt8]
        let key: COSEKey
    }

    private struct Store {
        let limit: Int
        var entries: [[UInt8]: Entry] = [:]
        /// Credential ids in insertion order, a ring once `limit` is reached; `oldest` is the next to go.
        var arrivals: [[UInt8]] = []
        var oldest = 0

        /// Adds or replaces `id`'s entry; returns what was evicted, so it is freed outside the lock.
        mutating func insert(_ id: [UInt8], _ entry: Entry) -> Entry? {
            if entries.updateValue(entry, forKey: id) != nil { return nil }
            guard arrivals.count >= limit else {
                arrivals.append(id)
                return nil
            }
            // A slot whose id was forgotten (or stored twice) evicts nothing, or an entry early:
            // either is only a later miss.
            let evicted = entries.removeValue(forKey: arrivals[oldest])
            arrivals[oldest] = id
            oldest = (oldest + 1) % limit
            return evicted
        }
    }

    private let store: Mutex<Store>

    /// 50,000 keys: a few MB of imported keys, the active passkeys of a large deployment's busy hour.
    init(limit: Int = 50_000) {
        precondition(limit > 0)
        store = Mutex(Store(limit: limit))
    }

    func key(for credential: CredentialRecord) throws(WebAuthnError) -> COSEKey {
        if let hit = store.withLock({ $0.entries[credential.id] }), hit.keyBytes == credential.publicKey { return hit.key }
        let key = try COSEKey(bytes: credential.publicKey)
        // The evicted entry is released here, after the lock.
        _ = store.withLock { $0.insert(credential.id, Entry(keyBytes: credential.publicKey, key: key)) }
        return key
    }

    func forget(_ id: [UInt8]) {
        _ = store.withLock { $0.entries.removeValue(forKey: id) }
    }

    /// Whether `id` has a cached key (for tests).
    func holds(_ id: [UInt8]) -> Bool { store.withLock { $0.entries[id] != nil } }

    var count: Int { store.withLock { $0.entries.count } }
}
