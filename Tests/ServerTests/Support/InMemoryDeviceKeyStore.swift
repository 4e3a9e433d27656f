import Foundation
import JSON
@testable import LatchkeyServer
import Storage
import Synchronization

/// `DeviceKeyStore` in memory, over tables shared with `InMemoryStepUpStore`, keeping the SQL's
/// rules (`DeviceKeyRepository`): an enrolment challenge used once; an enrolment only through its
/// gate, used up with it (a step-up token of this user for this action whose key is live, or an
/// unused unexpired device-key ticket), replacing the device's live key; a revocation of the
/// user's own live key only, and with an admin's approval only together with its redemption.
struct InMemoryDeviceKeyStore: DeviceKeyStore {
    let tables: InMemoryDeviceTables

    func insertChallenge(hash: [UInt8], userId: String, rpId: String, state: [UInt8], ttlSeconds: Int) throws(StorageError) {
        try tables.insertChallenge(hash: hash, kind: .deviceKeyEnrolment, userId: userId, rpId: rpId, state: state, ttlSeconds: ttlSeconds)
    }

    /// `ChallengeRepository.find`: nothing used up.
    func challenge(hash: [UInt8], userId: String) throws(StorageError) -> StoredChallenge? {
        let at = tables.now()
        return tables.rows.withLock { rows in
            guard let c = rows.challenges[hash], c.kind == .deviceKeyEnrolment, c.userId == userId else { return nil }
            return StoredChallenge(kind: c.kind, userId: c.userId, rpId: c.rpId, state: c.state, expired: c.expiresAt <= at)
        }
    }

    func consumeChallenge(hash: [UInt8], userId: String) throws(StorageError) -> StoredChallenge? {
        try tables.consumeChallenge(hash: hash, kind: .deviceKeyEnrolment, userId: userId)
    }

    func enrol(_ key: NewDeviceKey, usingChallenge: [UInt8]?, gate: EnrolmentGate, audit: AuditTemplate, enrolled: [OutboxEvent],
               replacedEvent: EventTemplate?) throws(StorageError) -> EnrolmentWritten {
        try tables.statement { (rows: inout InMemoryDeviceTables.Rows, at: Date) throws(StorageError) -> EnrolmentWritten in
            if let usingChallenge {
                // `used`: the enrolment challenge of the key's user, deleted whatever the gate says.
                guard let c = rows.challenges[usingChallenge], c.kind == .deviceKeyEnrolment, c.userId == key.userId else {
                    return .challengeUsed
                }
                rows.challenges[usingChallenge] = nil
            }
            // `gate`
            switch gate {
            case .stepUp(let jti, let actionHash):
                guard InMemoryDeviceTables.redeem(jti: jti, userId: key.userId, actionHash: actionHash, in: &rows, at: at) != nil else {
                    return .gateRefused
                }
            case .ticket(let hash):
                guard let t = rows.tickets[hash], t.userId == key.userId, t.purpose == "device-key", t.usedAt == nil, t.expiresAt > at else {
                    return .gateRefused
                }
                rows.tickets[hash]!.usedAt = at
            }
            // `old`: the device's live key, revoked and pointing at the new one.
            var replaced: InMemoryDeviceTables.DeviceKey? = nil
            if let i = rows.deviceKeys.firstIndex(where: { $0.key.userId == key.userId && $0.key.deviceId == key.deviceId && $0.revokedAt == nil }) {
                rows.deviceKeys[i].revokedAt = at
                rows.deviceKeys[i].replacedBy = key.id
                replaced = rows.deviceKeys[i]
            }
            // `ins`
            guard !rows.deviceKeys.contains(where: { $0.key.id == key.id }) else { throw .conflict(.other("device_keys_pkey")) }
            let new = InMemoryDeviceTables.DeviceKey(key: key, createdAt: at, appAttestCounter: key.appAttestCounter)
            rows.deviceKeys.append(new)
            rows.audit.append(InMemoryDeviceTables.audit(audit, subject: key.userId,
                                                   members: [("replaced", replaced.map { .string($0.key.id) } ?? .null)]))
            rows.events += enrolled
            if let replacedEvent, let replaced { rows.events.append(InMemoryDeviceTables.event(replacedEvent, for: replaced)) }
            return .enrolled(new.record, replaced: replaced?.key.id)
        }
    }

    func list(userId: String) throws(StorageError) -> [DeviceKeyRecord] {
        tables.rows.withLock { rows in rows.deviceKeys.filter { $0.key.userId == userId && $0.revokedAt == nil }.map(\.record) }
    }

    func key(id: String) throws(StorageError) -> DeviceKeyRecord? {
        tables.rows.withLock { rows in rows.deviceKeys.first { $0.key.id == id }?.record }
    }

    func revoke(userId: String, id: String, audit: AuditRecord, redeeming: StepUpRedemption?,
                revokedEvent: EventTemplate?) throws(StorageError) -> Bool {
        do {
            return try revoking(userId: userId, id: id, audit: audit, redeeming: redeeming, revokedEvent: revokedEvent)
        } catch .notFound { return false }
    }

    private func revoking(userId: String, id: String, audit: AuditRecord, redeeming: StepUpRedemption?,
                          revokedEvent: EventTemplate?) throws(StorageError) -> Bool {
        try tables.statement { (rows: inout InMemoryDeviceTables.Rows, at: Date) throws(StorageError) -> Bool in
            // Redeemed first: the approving key is judged live as it was before this change.
            if let r = redeeming, InMemoryDeviceTables.redeem(jti: r.jti, userId: r.userId, actionHash: r.actionHash, in: &rows, at: at) == nil {
                throw .conflict(.stepUpUsed)
            }
            guard let i = rows.deviceKeys.firstIndex(where: { $0.key.id == id && $0.key.userId == userId && $0.revokedAt == nil }) else {
                if redeeming != nil { throw .notFound }  // rolls the redemption back
                return false
            }
            rows.deviceKeys[i].revokedAt = at
            rows.audit.append(audit)
            if let revokedEvent { rows.events.append(InMemoryDeviceTables.event(revokedEvent, for: rows.deviceKeys[i])) }
            return true
        }
    }
}
