import Storage

/// The step-up's store in PostgreSQL: receipts beside the device keys, the stored challenges, and
/// the account's credentials a passkey step-up binds and checks (read in Storage with the step-up's
/// own statements, ARCHITECTURE.md "Which store each feature uses").
struct PostgresStepUpStore: StepUpStore {
    let deviceKeys: DeviceKeyRepository
    let challenges: ChallengeRepository

    func insertChallenge(hash: [UInt8], userId: String, rpId: String, state: [UInt8], ttlSeconds: Int) throws(StorageError) {
        try challenges.insert(hash: hash, kind: .stepUp, userId: userId, rpId: rpId, state: state, ttlSeconds: ttlSeconds)
    }

    func verifyRead(hash: [UInt8], userId: String, credentialId: [UInt8]?) throws(StorageError) -> StepUpVerifyRead {
        try deviceKeys.stepUpRead(hash: hash, userId: userId, credentialId: credentialId)
    }

    func consumeChallenge(hash: [UInt8], userId: String) throws(StorageError) -> StoredChallenge? {
        try challenges.consume(hash: hash, kind: .stepUp, userId: userId)
    }

    func passkeyChallengeRead(userId: String, voteFor approvalId: String?) throws(StorageError) -> (passkeys: [CredentialRecord], breakGlassVote: Bool) {
        try deviceKeys.passkeyChallengeRead(userId: userId, voteFor: approvalId)
    }

    func deviceKey(id: String) throws(StorageError) -> DeviceKeyRecord? { try deviceKeys.key(id: id) }

    func insertReceipt(_ receipt: StepUpReceiptRecord, usingChallenge: [UInt8]?, liveDeviceKeyId: String?, appAttestCounter: Int64?,
                       credentialUse: CredentialUse?, audit: [AuditRecord], events: [OutboxEvent]) throws(StorageError) -> ApprovalWritten {
        try deviceKeys.insertReceipt(receipt, usingChallenge: usingChallenge, liveDeviceKeyId: liveDeviceKeyId,
                                     appAttestCounter: appAttestCounter, credentialUse: credentialUse, audit: audit, events: events)
    }

    func receipt(id: String) throws(StorageError) -> StepUpReceiptRecord? { try deviceKeys.receipt(id: id) }

    func redeemStepUpToken(jti: String, userId: String, actionHash: [UInt8]) throws(StorageError) -> ConsumeOutcome {
        try deviceKeys.consumeStepUpToken(jti: jti, userId: userId, actionHash: actionHash)
    }
}
