import Storage
import WebAuthn

/// Everything a step-up reads and writes (SPEC "Step-up"): its challenges, the passkeys a passkey
/// step-up is bound to and checked against, the receipts and the one redemption of each token.
/// Expiries are the store's own clock (a stored challenge's is the database's `now()`); the service
/// passes durations. `PostgresStepUpStore` is the server's; the tests keep the same rules in memory.
protocol StepUpStore: Sendable {
    /// Stores a step-up challenge's ceremony state for `ttlSeconds`.
    func insertChallenge(hash: [UInt8], userId: String, rpId: String, state: [UInt8], ttlSeconds: Int) throws(StorageError)

    /// The verify's one read (`StepUpVerifyRead`): `userId`'s step-up challenge `hash` (an expired one
    /// included, `expired`; nil when unknown, used, another user's or another ceremony's), the user's
    /// live device keys, and with `credentialId` that live passkey and its owner. Nothing used up.
    func verifyRead(hash: [UInt8], userId: String, credentialId: [UInt8]?) throws(StorageError) -> StepUpVerifyRead

    /// Uses up `userId`'s step-up challenge `hash`: of concurrent callers exactly one gets it, an
    /// expired one included (`expired`); nil when unknown, used, another user's or another ceremony's.
    /// A refused verify's one write.
    func consumeChallenge(hash: [UInt8], userId: String) throws(StorageError) -> StoredChallenge?

    /// A passkey step-up challenge's one read: the user's live passkeys, oldest first (what the
    /// challenge is bound to), and whether the quorum approval `voteFor` names (a vote's action)
    /// is break glass.
    func passkeyChallengeRead(userId: String, voteFor approvalId: String?) throws(StorageError) -> (passkeys: [CredentialRecord], breakGlassVote: Bool)

    /// A device key by id, revoked or not.
    func deviceKey(id: String) throws(StorageError) -> DeviceKeyRecord?

    /// The approval's one write: the receipt with `audit` and `events`, only while `liveDeviceKeyId`
    /// (when given) is live and its App Attest counter below `appAttestCounter` (false otherwise,
    /// nothing written), and with the passkey's use stored by compare-and-set on its counter
    /// (`.notFound` / `.conflict(.signCountRegression)`, nothing written). As
    /// `DeviceKeyRepository.insertReceipt`. With `usingChallenge` (the verify's step-up challenge of
    /// the receipt's user), that challenge is used up in the same change whatever else happens, and
    /// the rest written only with that use: `.challengeUsed`, nothing written, when a concurrent
    /// verify used it first; `.refused` for a device key no longer live or its counter reused.
    func insertReceipt(_ receipt: StepUpReceiptRecord, usingChallenge: [UInt8]?, liveDeviceKeyId: String?, appAttestCounter: Int64?,
                       credentialUse: CredentialUse?, audit: [AuditRecord], events: [OutboxEvent]) throws(StorageError) -> ApprovalWritten

    func receipt(id: String) throws(StorageError) -> StepUpReceiptRecord?

    /// Redeems a step-up token once, for its own action, while the key that approved it is live:
    /// the first caller wins, a later one (or one for another action) is `.alreadyUsed`, a token
    /// nobody stored or whose key was revoked before it was used is `.unknown`.
    func redeemStepUpToken(jti: String, userId: String, actionHash: [UInt8]) throws(StorageError) -> ConsumeOutcome
}

extension StepUpStore {
    /// `insertReceipt` without a challenge: true when stored.
    func insertReceipt(_ receipt: StepUpReceiptRecord, liveDeviceKeyId: String?, appAttestCounter: Int64?,
                       credentialUse: CredentialUse?, audit: [AuditRecord], events: [OutboxEvent]) throws(StorageError) -> Bool {
        try insertReceipt(receipt, usingChallenge: nil, liveDeviceKeyId: liveDeviceKeyId, appAttestCounter: appAttestCounter,
                          credentialUse: credentialUse, audit: audit, events: events) == .stored
    }
}

/// The revocation feed as step-up and device keys use it (`RevokedSessions`): whether a session's
/// tokens are refused, and this instance's own revocations put in force before they are answered.
protocol SessionRevocations: Sendable {
    func refuses(_ sessionId: String) throws(StorageError) -> Bool
    func insert(_ sessionIds: some Sequence<String>)
}

extension RevokedSessions: SessionRevocations {}

/// The web origins a passkey step-up's assertion may come from, as allowed now (`OriginCache`).
protocol OriginAllowlist: Sendable {
    func policy() -> OriginPolicy
}

extension OriginCache: OriginAllowlist {}
