import Crypto
import Foundation
import JSON
@testable import LatchkeyServer
import Storage
import Synchronization

/// `StepUpStore` in memory, over tables shared with `InMemoryDeviceKeyStore` (as the PostgreSQL
/// stores share one database), keeping the SQL's rules: a challenge used once, expired by the
/// store's clock; a receipt only while its device key is live and its App Attest counter rises, a
/// passkey's use by compare-and-set on its counter; a token redeemed once, for its own action,
/// while the key that approved it is live. It also flags passkeys (`CredentialFlags`), as
/// `AccountRepository` does for `PasskeyAssertion`.
struct InMemoryStepUpStore: StepUpStore, CredentialFlags {
    let tables: InMemoryDeviceTables

    func insertChallenge(hash: [UInt8], userId: String, rpId: String, state: [UInt8], ttlSeconds: Int) throws(StorageError) {
        try tables.insertChallenge(hash: hash, kind: .stepUp, userId: userId, rpId: rpId, state: state, ttlSeconds: ttlSeconds)
    }

    func consumeChallenge(hash: [UInt8], userId: String) throws(StorageError) -> StoredChallenge? {
        try tables.consumeChallenge(hash: hash, kind: .stepUp, userId: userId)
    }

    /// `AccountRepository.credentials`: live, oldest first.
    func passkeys(userId: String) throws(StorageError) -> [CredentialRecord] {
        tables.rows.withLock { rows in
            rows.passkeys.values.filter { $0.record.userId == userId && $0.revokedAt == nil }.map(\.record).sorted { $0.createdAt < $1.createdAt }
        }
    }

    /// `AccountRepository.credentialForLogin`: live only, with its owner.
    func passkey(id: [UInt8]) throws(StorageError) -> (CredentialRecord, UserRecord)? {
        tables.rows.withLock { rows in
            guard let p = rows.passkeys[id], p.revokedAt == nil else { return nil }
            return (p.record, p.user)
        }
    }

    func deviceKey(id: String) throws(StorageError) -> DeviceKeyRecord? {
        tables.rows.withLock { rows in rows.deviceKeys.first { $0.key.id == id }?.record }
    }

    /// `DeviceKeyRepository.insertReceipt`.
    func insertReceipt(_ receipt: StepUpReceiptRecord, liveDeviceKeyId: String?, appAttestCounter: Int64?,
                       credentialUse: CredentialUse?, audit: [AuditRecord], events: [OutboxEvent]) throws(StorageError) -> Bool {
        try tables.statement { (rows: inout InMemoryDeviceTables.Rows, at: Date) throws(StorageError) -> Bool in
            var keyUsed = true
            if let liveDeviceKeyId {
                // `dk`: the key by id alone (its owner was checked before), live, its counter rising.
                if let i = rows.deviceKeys.firstIndex(where: { $0.key.id == liveDeviceKeyId && $0.revokedAt == nil }),
                   appAttestCounter == nil || rows.deviceKeys[i].appAttestCounter == nil || rows.deviceKeys[i].appAttestCounter! < appAttestCounter! {
                    rows.deviceKeys[i].lastUsedAt = at
                    if let appAttestCounter { rows.deviceKeys[i].appAttestCounter = appAttestCounter }
                } else {
                    keyUsed = false
                }
            }
            var useRecorded = true
            if let credentialUse {
                // `cred`, only after `dk` when both are there.
                useRecorded = keyUsed && InMemoryDeviceTables.record(credentialUse, in: &rows, at: at)
            }
            guard keyUsed, useRecorded else {
                if liveDeviceKeyId != nil { return false }
                // `recordedOrWhy`: no row updated → a known credential's counter was refused, else there is none.
                if let credentialUse { throw rows.passkeys[credentialUse.credentialId] != nil ? .conflict(.signCountRegression) : .notFound }
                return false
            }
            guard !rows.receipts.contains(where: { $0.record.id == receipt.id }) else { throw .conflict(.other("step_up_receipts_pkey")) }
            guard !rows.receipts.contains(where: { $0.record.tokenJTI == receipt.tokenJTI }) else {
                throw .conflict(.other("step_up_receipts_token_jti_key"))
            }
            rows.receipts.append(InMemoryDeviceTables.Receipt(record: receipt, createdAt: at))
            rows.audit += audit
            rows.events += events
            return true
        }
    }

    func receipt(id: String) throws(StorageError) -> StepUpReceiptRecord? { tables.receiptRow(id: id)?.stored }

    /// `DeviceKeyRepository.consumeStepUpToken`: the redemption, else why not.
    func redeemStepUpToken(jti: String, userId: String, actionHash: [UInt8]) throws(StorageError) -> ConsumeOutcome {
        try tables.statement { (rows: inout InMemoryDeviceTables.Rows, at: Date) throws(StorageError) -> ConsumeOutcome in
            if let i = InMemoryDeviceTables.redeem(jti: jti, userId: userId, actionHash: actionHash, in: &rows, at: at) {
                return .consumed(receiptId: rows.receipts[i].record.id, action: rows.receipts[i].record.action)
            }
            guard let r = rows.receipts.first(where: { $0.record.tokenJTI == jti && $0.record.userId == userId }) else { return .unknown }
            return r.consumedAt != nil || InMemoryDeviceTables.approverIsLive(r.record, in: rows) ? .alreadyUsed : .unknown
        }
    }

    /// `AccountRepository.flag`.
    func flag(credentialId: [UInt8], audit: AuditRecord, events: [OutboxEvent]) throws(StorageError) {
        try tables.statement { (rows: inout InMemoryDeviceTables.Rows, _: Date) throws(StorageError) in
            guard rows.passkeys[credentialId] != nil else { throw .notFound }
            rows.passkeys[credentialId]!.record.flagged = true
            rows.audit.append(audit)
            rows.events += events
        }
    }
}
