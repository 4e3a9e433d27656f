import Foundation
import Storage

/// What the sessions feature reads and writes (ARCHITECTURE.md "Which store each feature uses"):
/// `SessionRepository` in PostgreSQL, an in-memory store in the service tests. Refresh tokens'
/// lifetimes, single use and reuse detection are the store's to keep atomically: a token presented
/// a second time revokes its whole family (RFC 9700 §4.14.2) in the same change.
protocol SessionStore: Sendable {
    /// Stores a session that no passkey ceremony began (an email sign-in), with its audit lines and
    /// the account's language memo (`language`: the one the request asked for, nil to keep it).
    func start(session: NewSession, audit: [AuditRecord], language: String?) throws(StorageError)
    /// Uses the presented refresh token up and adds `newHash` to its live family; a used one revokes
    /// the family with `reuseAudit` and `reuseEvent`.
    /// A DPoP proof (`dpop`) is recorded in the same statement; a family bound to a key needs a proof by it.
    func rotate(hash: [UInt8], newHash: [UInt8], ttlSeconds: Int, reuseAudit: AuditTemplate,
                reuseEvent: EventTemplate?, dpop: DPoPBinding?) throws(StorageError) -> RefreshOutcome
    /// Revokes one live session of the user (or all, `familyId` nil) with one `revokedEvent` each; the ids revoked.
    func revoke(userId: String, familyId: String?, logout: Bool, revokedEvent: EventTemplate?) throws(StorageError) -> [String]
    /// An admin ends one live session, with `audit` and the approval's redemption; false when there is none.
    func revoke(userId: String, familyId: String, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> Bool
    /// The user's live sessions, newest first.
    func list(userId: String) throws(StorageError) -> [SessionRecord]
    /// One live session of the user with the hold of the passkey that began it.
    func session(id: String, userId: String) throws(StorageError) -> (record: SessionRecord, passkeyApprovesFrom: Date?, passkeyHardware: Bool)?
    /// The valid passkey-enrolment ticket with this hash (a ticket's bearer).
    func ticket(hash: [UInt8]) throws(StorageError) -> EnrolmentTicket?
}

extension SessionRepository: SessionStore {
    func start(session: NewSession, audit: [AuditRecord], language: String?) throws(StorageError) {
        try start(session, recording: nil, audit: audit, events: [], language: language)
    }
}
