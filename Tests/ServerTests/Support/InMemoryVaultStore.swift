import Foundation
@testable import LatchkeyServer
@testable import Storage
import Synchronization

/// `VaultStore` in memory, with `VaultRepository`'s rules: one vault per account, a wrap only for a
/// live passkey of the account while its vault exists, the step-up redeemed once and only by a
/// change that happens, a revoked passkey's wrap gone with it (migration 28's trigger), and the
/// read's session as it stands (nil once revoked).
final class InMemoryVaultStore: VaultStore {
    struct Passkey {
        let userId: String
        var revoked = false
        var approvesFrom: Date? = nil
    }

    struct Tables {
        var passkeys: [[UInt8]: Passkey] = [:]
        var sessions: [String: (userId: String, record: SessionRecord, revoked: Bool)] = [:]
        var vaults: [String: (salt: [UInt8], recovery: [UInt8]?)] = [:]
        /// Wraps in the order they were first stored (`updated_at` order for a never-replaced wrap).
        var wraps: [(credentialId: [UInt8], userId: String, key: [UInt8])] = []
        var redeemable: Set<String> = []
        var audit: [AuditRecord] = []
    }

    let tables = Mutex(Tables())
    var snapshot: Tables { tables.withLock { $0 } }

    func addPasskey(_ id: [UInt8], userId: String, approvesFrom: Date? = nil) {
        tables.withLock { $0.passkeys[id] = Passkey(userId: userId, approvesFrom: approvesFrom) }
    }

    /// Revokes a passkey; its wrap dies with it.
    func revoke(_ id: [UInt8]) {
        tables.withLock { t in
            t.passkeys[id]?.revoked = true
            t.wraps.removeAll { $0.credentialId == id }
        }
    }

    func addSession(_ id: String, userId: String, method: SessionMethod, credentialId: [UInt8]?, at: Date) {
        let record = SessionRecord(id: id, method: method, credentialId: credentialId, createdAt: at, lastUsedAt: at, authTime: at,
                                   browser: false, clientId: nil, clientName: nil)
        tables.withLock { $0.sessions[id] = (userId, record, false) }
    }

    func endSession(_ id: String) { tables.withLock { $0.sessions[id]?.revoked = true } }

    /// A step-up `userId` made for `actionHash`, stored unused.
    func stepUp(_ userId: String, _ actionHash: [UInt8], jti: String) -> StepUpRedemption {
        tables.withLock { _ = $0.redeemable.insert(jti) }
        return StepUpRedemption(jti: jti, userId: userId, actionHash: actionHash)
    }

    func read(userId: String, sessionId: String) throws(StorageError) -> VaultRead {
        tables.withLock { t in
            let vault = t.vaults[userId].map { v in
                VaultRecord(prfSalt: v.salt,
                            wrapped: t.wraps.filter { $0.userId == userId && t.passkeys[$0.credentialId]?.revoked == false }
                                .map { WrappedVaultKey(credentialId: $0.credentialId, wrappedKey: $0.key) },
                            recoveryWrappedKey: v.recovery)
            }
            guard let s = t.sessions[sessionId], s.userId == userId, !s.revoked else {
                return VaultRead(vault: vault, session: nil, passkeyApprovesFrom: nil)
            }
            return VaultRead(vault: vault, session: s.record, passkeyApprovesFrom: s.record.credentialId.flatMap { t.passkeys[$0]?.approvesFrom })
        }
    }

    func create(userId: String, prfSalt: [UInt8], audit: AuditRecord) throws(StorageError) -> Bool {
        tables.withLock { t in
            guard t.vaults[userId] == nil else { return false }
            t.vaults[userId] = (prfSalt, nil)
            t.audit.append(audit)
            return true
        }
    }

    func wrap(userId: String, credentialId: [UInt8], wrappedKey: [UInt8], audit: AuditRecord,
              redeeming: StepUpRedemption) throws(StorageError) -> VaultChange {
        tables.withLock { t in
            guard t.vaults[userId] != nil, let p = t.passkeys[credentialId], p.userId == userId, !p.revoked else { return .absent }
            guard redeeming.userId == userId, t.redeemable.remove(redeeming.jti) != nil else { return .stepUpUsed }
            if let i = t.wraps.firstIndex(where: { $0.credentialId == credentialId }) {
                t.wraps[i].key = wrappedKey
            } else {
                t.wraps.append((credentialId, userId, wrappedKey))
            }
            t.audit.append(audit)
            return .written
        }
    }

    func setRecovery(userId: String, wrappedKey: [UInt8], audit: AuditRecord, redeeming: StepUpRedemption) throws(StorageError) -> VaultChange {
        tables.withLock { t in
            guard t.vaults[userId] != nil else { return .absent }
            guard redeeming.userId == userId, t.redeemable.remove(redeeming.jti) != nil else { return .stepUpUsed }
            t.vaults[userId]?.recovery = wrappedKey
            t.audit.append(audit)
            return .written
        }
    }
}
