import Foundation
import JSON
import Storage

/// Everything CIBA reads and writes (SPEC "CIBA" … "CIBA tokens"): one read and one write per
/// request. Expiry, the interval between polls and the limits' windows are the store's own clock
/// (PostgreSQL's `now()` in the server), so every instance measures them alike.
protocol CIBAStore: Sendable {
    /// `bc-authorize`'s read: the account the hint names and the limits' counts.
    func authorizeRead(clientId: String, username: String?, userId: String?) throws(StorageError) -> CIBAAuthorizeRead
    /// An `unknown_user_id` answer counted for the client.
    func unknownUser(clientId: String) throws(StorageError)
    /// The request stored, the account's oldest pending ones beyond `maxPending - 1` expired and
    /// their ping notifications made due at `now`.
    func store(_ request: CIBANewRequest, maxPending: Int, audit: AuditRecord, events: [OutboxEvent], now: Date) throws(StorageError)
    func pending(userId: String) throws(StorageError) -> [CIBARequestRecord]
    func request(id: String) throws(StorageError) -> CIBARequestRecord?
    /// An approval (`grant`) or a denial (nil), only while pending, its ping notification made due
    /// at `now`; `keyOfSession`: only with a step-up by a live device key that session enrolled.
    func decide(id: String, userId: String, grant: JSONValue?, approvers: OAuthApprovers?, redeeming: StepUpRedemption?,
                keyOfSession: String?, audit: AuditRecord, events: [OutboxEvent], now: Date) throws(StorageError) -> CIBADecision
    func pollRead(id: String) throws(StorageError) -> CIBAPollRead?
    /// A poll recorded (compare-and-set on `polls`); false: another poll came first.
    func polled(id: String, polls: Int, growBy: Int) throws(StorageError) -> Bool
    func issue(id: String, clientId: String, familyId: String, refreshHash: [UInt8], ttlSeconds: Int,
               issuedAudit: AuditRecord) throws(StorageError) -> CIBAIssue
}

/// The server's `CIBAStore`: `OAuthRepository`'s CIBA statements (`Storage/CIBARepository.swift`).
struct PostgresCIBAStore: CIBAStore {
    let oauth: OAuthRepository

    func authorizeRead(clientId: String, username: String?, userId: String?) throws(StorageError) -> CIBAAuthorizeRead {
        try oauth.cibaAuthorizeRead(clientId: clientId, username: username, userId: userId)
    }

    func unknownUser(clientId: String) throws(StorageError) { try oauth.cibaUnknownUser(clientId: clientId) }

    func store(_ request: CIBANewRequest, maxPending: Int, audit: AuditRecord, events: [OutboxEvent], now: Date) throws(StorageError) {
        try oauth.cibaStore(request, maxPending: maxPending, audit: audit, events: events, now: now)
    }

    func pending(userId: String) throws(StorageError) -> [CIBARequestRecord] { try oauth.cibaPending(userId: userId) }

    func request(id: String) throws(StorageError) -> CIBARequestRecord? { try oauth.cibaRequest(id: id) }

    func decide(id: String, userId: String, grant: JSONValue?, approvers: OAuthApprovers?, redeeming: StepUpRedemption?,
                keyOfSession: String?, audit: AuditRecord, events: [OutboxEvent], now: Date) throws(StorageError) -> CIBADecision {
        try oauth.cibaDecide(id: id, userId: userId, grant: grant, approvers: approvers, redeeming: redeeming, keyOfSession: keyOfSession,
                             audit: audit, events: events, now: now)
    }

    func pollRead(id: String) throws(StorageError) -> CIBAPollRead? { try oauth.cibaPollRead(id: id) }

    func polled(id: String, polls: Int, growBy: Int) throws(StorageError) -> Bool { try oauth.cibaPolled(id: id, polls: polls, growBy: growBy) }

    func issue(id: String, clientId: String, familyId: String, refreshHash: [UInt8], ttlSeconds: Int,
               issuedAudit: AuditRecord) throws(StorageError) -> CIBAIssue {
        try oauth.cibaIssue(id: id, clientId: clientId, familyId: familyId, refreshHash: refreshHash, ttlSeconds: ttlSeconds,
                            issuedAudit: issuedAudit)
    }
}
