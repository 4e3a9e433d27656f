import Storage

/// The device keys' store in PostgreSQL: `DeviceKeyRepository` and the stored challenges.
struct PostgresDeviceKeyStore: DeviceKeyStore {
    let deviceKeys: DeviceKeyRepository
    let challenges: ChallengeRepository

    func insertChallenge(hash: [UInt8], userId: String, rpId: String, state: [UInt8], ttlSeconds: Int) throws(StorageError) {
        try challenges.insert(hash: hash, kind: .deviceKeyEnrolment, userId: userId, rpId: rpId, state: state, ttlSeconds: ttlSeconds)
    }

    func challenge(hash: [UInt8], userId: String) throws(StorageError) -> StoredChallenge? {
        try challenges.find(hash: hash, kind: .deviceKeyEnrolment, userId: userId)
    }

    func consumeChallenge(hash: [UInt8], userId: String) throws(StorageError) -> StoredChallenge? {
        try challenges.consume(hash: hash, kind: .deviceKeyEnrolment, userId: userId)
    }

    func enrol(_ key: NewDeviceKey, usingChallenge: [UInt8]?, gate: EnrolmentGate, audit: AuditTemplate, enrolled: [OutboxEvent],
               replacedEvent: EventTemplate?) throws(StorageError) -> EnrolmentWritten {
        try deviceKeys.enrol(key, usingChallenge: usingChallenge, gate: gate, audit: audit, enrolled: enrolled, replacedEvent: replacedEvent)
    }

    func list(userId: String) throws(StorageError) -> [DeviceKeyRecord] { try deviceKeys.list(userId: userId) }

    func key(id: String) throws(StorageError) -> DeviceKeyRecord? { try deviceKeys.key(id: id) }

    func revoke(userId: String, id: String, audit: AuditRecord, redeeming: StepUpRedemption?,
                revokedEvent: EventTemplate?) throws(StorageError) -> Bool {
        try deviceKeys.revoke(userId: userId, id: id, audit: audit, redeeming: redeeming, revokedEvent: revokedEvent)
    }
}
