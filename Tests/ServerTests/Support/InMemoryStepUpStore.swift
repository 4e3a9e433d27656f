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

    /// `DeviceKeyRepository.passkeyChallengeRead`: live passkeys, oldest first, and whether the vote's approval is break glass.
    func passkeyChallengeRead(userId: String, voteFor approvalId: String?) throws(StorageError) -> (passkeys: [CredentialRecord], breakGlassVote: Bool) {
        tables.rows.withLock { rows in
            let passkeys = rows.passkeys.values.filter { $0.record.userId == userId && $0.revokedAt == nil }.map(\.record)
                .sorted { $0.createdAt < $1.createdAt }
            return (passkeys, approvalId.map { rows.breakGlassApprovals.contains($0) } ?? false)
        }
    }

    func deviceKey(id: String) throws(StorageError) -> DeviceKeyRecord? {
        tables.rows.withLock { rows in rows.deviceKeys.first { $0.key.id == id }?.record }
    }

    /// `DeviceKeyRepository.stepUpRead`: nothing used up.
    func verifyRead(hash: [UInt8], userId: String, credentialId: [UInt8]?) throws(StorageError) -> StepUpVerifyRead {
        let at = tables.now()
        return tables.rows.withLock { rows in
            let challenge = rows.challenges[hash].flatMap { c -> StoredChallenge? in
                guard c.kind == .stepUp, c.userId == userId else { return nil }
                return StoredChallenge(kind: c.kind, userId: c.userId, rpId: c.rpId, state: c.state, expired: c.expiresAt <= at)
            }
            let keys = challenge == nil ? [] : rows.deviceKeys.filter { $0.key.userId == userId && $0.revokedAt == nil }.map(\.record)
            let passkey = credentialId.flatMap { id -> (CredentialRecord, UserRecord)? in
                guard let p = rows.passkeys[id], p.revokedAt == nil else { return nil }
                return (p.record, p.user)
            }
            return StepUpVerifyRead(challenge: challenge, liveKeys: keys, passkey: passkey)
        }
    }

    /// `DeviceKeyRepository.insertReceipt`.
    func insertReceipt(_ receipt: StepUpReceiptRecord, usingChallenge: [UInt8]?, liveDeviceKeyId: String?, appAttestCounter: Int64?,
                       credentialUse: CredentialUse?, audit: [AuditRecord], events: [OutboxEvent]) throws(StorageError) -> ApprovalWritten {
        // A refused passkey use is thrown after the statement: its challenge stays used, as in PostgreSQL.
        var refusal: StorageError? = nil
        let written = try tables.statement { (rows: inout InMemoryDeviceTables.Rows, at: Date) throws(StorageError) -> ApprovalWritten in
            if let usingChallenge {
                // `used`: the step-up challenge of the receipt's user, deleted.
                guard let c = rows.challenges[usingChallenge], c.kind == .stepUp, c.userId == receipt.userId else { return .challengeUsed }
                rows.challenges[usingChallenge] = nil
            }
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
                if liveDeviceKeyId != nil { return .refused }
                // `recordedOrWhy`: no row updated → a known credential's counter was refused, else there is none.
                if let credentialUse { refusal = rows.passkeys[credentialUse.credentialId] != nil ? .conflict(.signCountRegression) : .notFound }
                return .refused
            }
            guard !rows.receipts.contains(where: { $0.record.id == receipt.id }) else { throw .conflict(.other("step_up_receipts_pkey")) }
            // Migration 25's checks: the document and its 32-byte commitment, both or neither.
            guard (receipt.document == nil) == (receipt.commitment == nil), receipt.commitment.map({ $0.count == 32 }) ?? true else {
                throw .conflict(.other("step_up_receipts_document_committed"))
            }
            guard !rows.receipts.contains(where: { $0.record.tokenJTI == receipt.tokenJTI }) else {
                throw .conflict(.other("step_up_receipts_token_jti_key"))
            }
            rows.receipts.append(InMemoryDeviceTables.Receipt(record: receipt, createdAt: at))
            rows.audit += audit
            rows.events += events
            return .stored
        }
        if let refusal { throw refusal }
        return written
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
