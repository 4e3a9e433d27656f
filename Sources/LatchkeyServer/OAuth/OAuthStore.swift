import Foundation
import JSON
import Storage

/// Everything the OpenID Provider and its clients read and write (SPEC "OpenID Provider"): clients,
/// authorization and pushed requests, codes with their approvers, grants and their refresh tokens,
/// the OP browser sessions, consents, client-assertion `jti`s, and what userinfo and the page show
/// of the account. Each call is one statement (or one transaction); expiries are the store's own
/// clock and the provider passes durations. `PostgresOAuthStore` is the server's; the tests keep
/// the same rules in memory (single use, expiry, PKCE and redirect URI checked with the code, the
/// approvers live at the exchange, rotation and reuse, consents, logout).
protocol OAuthStore: Sendable {
    // MARK: Clients

    func insertClient(_ c: OAuthClientRecord, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> OAuthClientRecord
    /// Every client, oldest first.
    func clients() throws(StorageError) -> [OAuthClientRecord]
    func client(id: String) throws(StorageError) -> OAuthClientRecord?
    /// False: no such client (nothing written).
    func updateClient(_ c: OAuthClientRecord, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> Bool
    /// The client removed and every session it holds ended (their ids); `.notFound` when there is none.
    func deleteClient(id: String, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> [String]?

    // MARK: Requests

    /// A pushed request (RFC 9126) stored under its random id's hash for `ttlSeconds`, with the DPoP
    /// proof that came with it recorded in the same statement; false: that proof was seen before
    /// (nothing stored).
    func storeRequest(hash: [UInt8], kind: String, clientId: String, params: JSONValue, ttlSeconds: Int,
                      dpop: DPoPReplayKey?) throws(StorageError) -> Bool
    /// An authorization request stored under the hash of its derived id, within the limits, using up
    /// the pushed request it stands for in the same change (`OAuthRepository.storeAuthorizationRequest`).
    func storeAuthorizationRequest(hash: [UInt8], clientId: String, params: JSONValue, ttlSeconds: Int, clientAddress: String,
                                   perAddressPerMinute: Int?, perClient: Int, usingUpPushed pushed: [UInt8]?) throws(StorageError) -> OAuthRequestStore
    /// A pending (unused, unexpired) authorization request.
    func request(hash: [UInt8]) throws(StorageError) -> OAuthRequestRecord?
    /// A pushed request of `clientId`, unused and unexpired; read only.
    func pushed(hash: [UInt8], clientId: String) throws(StorageError) -> OAuthRequestRecord?
    /// The approval's or refusal's one write (`OAuthRepository.finish`): false when the request (or,
    /// for a silent sign-in, the consent) is not there; `.conflict(.stepUpUsed)` when the step-up was.
    func finish(requestHash: [UInt8]?, code: (hash: [UInt8], clientId: String, userId: String, grant: JSONValue, ttlSeconds: Int)?,
                approvers: OAuthApprovers?, consent scopes: [String]?, usingUpPushed pushed: [UInt8]?,
                redeeming: StepUpRedemption?, audit: AuditRecord, events: [OutboxEvent]) throws(StorageError) -> Bool

    // MARK: Codes, grants, refresh tokens

    /// A code's one redemption (`OAuthRepository.redeemCode`).
    func redeemCode(hash: [UInt8], presented: OAuthCodePresentation, familyId: String, refreshHash: [UInt8], ttlSeconds: Int,
                    replayAudit: AuditRecord, issuedAudit: AuditRecord) throws(StorageError) -> OAuthCodeRedemption
    /// A refresh token of `clientId`'s OAuth session rotated, or its reuse revoking the family.
    /// `dpop`: the request's proof, recorded in the rotation; `sameKey`: a DPoP-bound grant needs a
    /// proof by its key (a public client's); `rotates` false: the token is checked and kept (a fapi2
    /// client's: no next token, no reuse detection).
    func rotate(hash: [UInt8], newHash: [UInt8], clientId: String, scope: [String]?, dpop: DPoPBinding?, sameKey: Bool, rotates: Bool,
                ttlSeconds: Int, reuseAudit: AuditRecord, issuedAudit: AuditRecord) throws(StorageError) -> OAuthRefreshOutcome
    /// RFC 7009: the OAuth session a refresh token of this client belongs to ends (its id).
    func revoke(refreshHash: [UInt8], clientId: String) throws(StorageError) -> [String]
    /// RP-Initiated Logout's one write (`OAuthRepository.logout`).
    func logout(sid: String, userId: String, clientId: String, cookieHash: [UInt8]?)
        throws(StorageError) -> (ended: [String], browserEnded: Bool, cookieSession: String?)
    /// A DPoP proof recorded (a read-only route's one write): false when it was seen before.
    func recordDPoPProof(_ key: DPoPReplayKey) throws(StorageError) -> Bool
    /// A client assertion's `jti` recorded: false when it was seen before.
    func recordAssertion(clientId: String, jtiHash: [UInt8], ttlSeconds: Int) throws(StorageError) -> Bool

    // MARK: The OP browser session, userinfo, consents

    /// The live OP browser session a cookie names and the pending request `requestHash` names, in one read.
    func browserSession(cookieHash: [UInt8], withRequest requestHash: [UInt8]?)
        throws(StorageError) -> (session: BrowserSessionRecord, request: OAuthRequestRecord?)?
    /// A live session of `userId` as an approver, and the pending request `requestHash` names, in one read.
    func approverSession(familyId: String, userId: String, withRequest requestHash: [UInt8]?)
        throws(StorageError) -> (session: ApproverSessionRecord, request: OAuthRequestRecord?)?
    /// Ends an OP browser session like a logout.
    func endBrowserSession(familyId: String) throws(StorageError) -> Bool
    /// The account and its verified address while the session `sessionId` is live.
    func userinfo(userId: String, sessionId: String) throws(StorageError) -> (user: UserRecord, email: String?)?
    /// The username the `/authorize` page shows for a Bearer approver.
    func username(userId: String) throws(StorageError) -> String?
    func consents(userId: String) throws(StorageError) -> [OAuthConsentRecord]
    func deleteConsent(userId: String, clientId: String) throws(StorageError) -> Bool
}

/// What a token request presents with a code (RFC 6749 §4.1.3, RFC 7636 §4.5).
typealias OAuthCodePresentation = OAuthRepository.CodePresentation

/// The revocation feed as the provider uses it (`RevokedSessions`): a session refused at once on
/// this instance, and its own endings put in force (a logout's, which never cascades, apart).
protocol OAuthRevocations: SessionRevocations {
    /// Known revoked here (memory only: the token checks that must see the database read it).
    func contains(_ sessionId: String) -> Bool
    func insertLogout(_ sessionIds: some Sequence<String>)
}

extension RevokedSessions: OAuthRevocations {}
