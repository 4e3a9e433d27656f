import Foundation
import JSON
import Storage

/// The OpenID Provider's store in PostgreSQL: its own tables (`OAuthRepository`, migration 17) and
/// the username the `/authorize` page shows — the one file of this feature that names
/// `AccountRepository` (ARCHITECTURE.md, "Which store each feature uses").
struct PostgresOAuthStore: OAuthStore {
    let oauth: OAuthRepository
    let accounts: AccountRepository

    func insertClient(_ c: OAuthClientRecord, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> OAuthClientRecord {
        try oauth.insertClient(c, audit: audit, redeeming: redeeming)
    }

    func clients() throws(StorageError) -> [OAuthClientRecord] { try oauth.clients() }

    func client(id: String) throws(StorageError) -> OAuthClientRecord? { try oauth.client(id: id) }

    func updateClient(_ c: OAuthClientRecord, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> Bool {
        try oauth.updateClient(c, audit: audit, redeeming: redeeming)
    }

    func deleteClient(id: String, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> [String]? {
        try oauth.deleteClient(id: id, audit: audit, redeeming: redeeming)
    }

    func storeRequest(hash: [UInt8], kind: String, clientId: String, params: JSONValue, ttlSeconds: Int,
                      dpop: DPoPReplayKey?) throws(StorageError) -> Bool {
        try oauth.storeRequest(hash: hash, kind: kind, clientId: clientId, params: params, ttlSeconds: ttlSeconds, dpop: dpop)
    }

    func storeAuthorizationRequest(hash: [UInt8], clientId: String, params: JSONValue, ttlSeconds: Int, clientAddress: String,
                                   perAddressPerMinute: Int?, perClient: Int, usingUpPushed pushed: [UInt8]?) throws(StorageError) -> OAuthRequestStore {
        try oauth.storeAuthorizationRequest(hash: hash, clientId: clientId, params: params, ttlSeconds: ttlSeconds, clientAddress: clientAddress,
                                            perAddressPerMinute: perAddressPerMinute, perClient: perClient, usingUpPushed: pushed)
    }

    func request(hash: [UInt8]) throws(StorageError) -> OAuthRequestRecord? { try oauth.request(hash: hash) }

    func pushed(hash: [UInt8], clientId: String) throws(StorageError) -> OAuthRequestRecord? { try oauth.pushed(hash: hash, clientId: clientId) }

    func finish(requestHash: [UInt8]?, code: (hash: [UInt8], clientId: String, userId: String, grant: JSONValue, ttlSeconds: Int)?,
                approvers: OAuthApprovers?, consent scopes: [String]?, usingUpPushed pushed: [UInt8]?,
                redeeming: StepUpRedemption?, audit: AuditRecord, events: [OutboxEvent]) throws(StorageError) -> Bool {
        try oauth.finish(requestHash: requestHash, code: code, approvers: approvers, consent: scopes, usingUpPushed: pushed,
                         redeeming: redeeming, audit: audit, events: events)
    }

    func redeemCode(hash: [UInt8], presented: OAuthCodePresentation, familyId: String, refreshHash: [UInt8], ttlSeconds: Int,
                    replayAudit: AuditRecord, issuedAudit: AuditRecord) throws(StorageError) -> OAuthCodeRedemption {
        try oauth.redeemCode(hash: hash, presented: presented, familyId: familyId, refreshHash: refreshHash, ttlSeconds: ttlSeconds,
                             replayAudit: replayAudit, issuedAudit: issuedAudit)
    }

    func rotate(hash: [UInt8], newHash: [UInt8], clientId: String, scope: [String]?, dpop: DPoPBinding?, sameKey: Bool, rotates: Bool,
                ttlSeconds: Int, reuseAudit: AuditRecord, issuedAudit: AuditRecord) throws(StorageError) -> OAuthRefreshOutcome {
        try oauth.rotate(hash: hash, newHash: newHash, clientId: clientId, scope: scope, dpop: dpop, sameKey: sameKey, rotates: rotates,
                         ttlSeconds: ttlSeconds,
                         reuseAudit: reuseAudit,
                         issuedAudit: issuedAudit)
    }

    func revoke(refreshHash: [UInt8], clientId: String) throws(StorageError) -> [String] { try oauth.revoke(refreshHash: refreshHash, clientId: clientId) }

    func logout(sid: String, userId: String, clientId: String, cookieHash: [UInt8]?)
        throws(StorageError) -> (ended: [String], browserEnded: Bool, cookieSession: String?) {
        try oauth.logout(sid: sid, userId: userId, clientId: clientId, cookieHash: cookieHash)
    }

    func recordDPoPProof(_ key: DPoPReplayKey) throws(StorageError) -> Bool { try oauth.recordDPoPProof(key) }

    func recordAssertion(clientId: String, jtiHash: [UInt8], ttlSeconds: Int) throws(StorageError) -> Bool {
        try oauth.recordAssertion(clientId: clientId, jtiHash: jtiHash, ttlSeconds: ttlSeconds)
    }

    func browserSession(cookieHash: [UInt8], withRequest requestHash: [UInt8]?)
        throws(StorageError) -> (session: BrowserSessionRecord, request: OAuthRequestRecord?)? {
        try oauth.browserSession(cookieHash: cookieHash, withRequest: requestHash)
    }

    func approverSession(familyId: String, userId: String, withRequest requestHash: [UInt8]?)
        throws(StorageError) -> (session: ApproverSessionRecord, request: OAuthRequestRecord?)? {
        try oauth.approverSession(familyId: familyId, userId: userId, withRequest: requestHash)
    }

    func endBrowserSession(familyId: String) throws(StorageError) -> Bool { try oauth.endBrowserSession(familyId: familyId) }

    func userinfo(userId: String, sessionId: String) throws(StorageError) -> (user: UserRecord, email: String?)? {
        try oauth.userinfo(userId: userId, sessionId: sessionId)
    }

    func username(userId: String) throws(StorageError) -> String? { try accounts.user(id: userId)?.username }

    func consents(userId: String) throws(StorageError) -> [OAuthConsentRecord] { try oauth.consents(userId: userId) }

    func deleteConsent(userId: String, clientId: String) throws(StorageError) -> Bool { try oauth.deleteConsent(userId: userId, clientId: clientId) }
}
