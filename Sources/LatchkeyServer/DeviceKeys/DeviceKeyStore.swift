import DeviceKeys
import Storage

/// Everything device-key enrolment, the list and revocation read and write (SPEC "Device keys",
/// "Trust chain"). Expiries are the store's own clock; the service passes durations.
/// `PostgresDeviceKeyStore` is the server's; the tests keep the same rules in memory.
protocol DeviceKeyStore: Sendable {
    /// Stores an enrolment challenge's ceremony state for `ttlSeconds`.
    func insertChallenge(hash: [UInt8], userId: String, rpId: String, state: [UInt8], ttlSeconds: Int) throws(StorageError)

    /// The enrolment's one read: `userId`'s enrolment challenge `hash`, an expired one included
    /// (`expired`); nil when unknown, used, another user's or another ceremony's. Nothing used up.
    func challenge(hash: [UInt8], userId: String) throws(StorageError) -> StoredChallenge?

    /// Uses up `userId`'s enrolment challenge `hash`: of concurrent callers exactly one gets it, an
    /// expired one included (`expired`); nil when unknown, used, another user's or another ceremony's.
    /// A refused enrolment's one write.
    func consumeChallenge(hash: [UInt8], userId: String) throws(StorageError) -> StoredChallenge?

    /// The enrolment's one write: the gate used up (a step-up token for this user and action whose
    /// approving key is live, or an unused unexpired device-key ticket of this user), the user's live
    /// key for the same device revoked and pointing at the new one, the new key, `audit` (completed
    /// with `replaced`), `enrolled` and `replacedEvent` for the revoked key. Nil, nothing written,
    /// when the gate is not (or no longer) valid. As `DeviceKeyRepository.enrol`. With
    /// `usingChallenge` (the enrolment challenge of the key's user), that challenge is used up in the
    /// same change whatever the gate says, and the rest written only with that use: `.challengeUsed`,
    /// nothing written, when a concurrent enrolment used it first.
    func enrol(_ key: NewDeviceKey, usingChallenge: [UInt8]?, gate: EnrolmentGate, audit: AuditTemplate, enrolled: [OutboxEvent],
               replacedEvent: EventTemplate?) throws(StorageError) -> EnrolmentWritten

    /// The user's live keys, oldest first.
    func list(userId: String) throws(StorageError) -> [DeviceKeyRecord]

    /// A key by id, revoked or not.
    func key(id: String) throws(StorageError) -> DeviceKeyRecord?

    /// Revokes the user's live key with `audit` and `revokedEvent`; with `redeeming`, only together
    /// with that step-up's redemption (`.conflict(.stepUpUsed)` when it cannot be redeemed). False,
    /// nothing written, when the user has no such live key. As `DeviceKeyRepository.revoke`.
    func revoke(userId: String, id: String, audit: AuditRecord, redeeming: StepUpRedemption?,
                revokedEvent: EventTemplate?) throws(StorageError) -> Bool
}

extension DeviceKeyStore {
    /// `enrol` without a challenge: the key and the one it replaced, nil when the gate refused.
    func enrol(_ key: NewDeviceKey, gate: EnrolmentGate, audit: AuditTemplate, enrolled: [OutboxEvent],
               replacedEvent: EventTemplate?) throws(StorageError) -> (DeviceKeyRecord, replaced: String?)? {
        switch try enrol(key, usingChallenge: nil, gate: gate, audit: audit, enrolled: enrolled, replacedEvent: replacedEvent) {
        case .enrolled(let record, let replaced): (record, replaced)
        case .challengeUsed, .gateRefused: nil
        }
    }
}

/// The attestation policy one enrolment is checked under (`AttestationTrust`: the roots, the status
/// list and the declared apps).
protocol AttestationPolicySource: Sendable {
    func policy() throws(ServiceError) -> DeviceKeyAttestationPolicy
}

extension AttestationTrust: AttestationPolicySource {}
