import DeviceKeys
import Foundation
import JSON
import Tokens
import HTTP
import Storage

/// `Authorization: <scheme> <value>` (RFC 9110 §11.6.2); the scheme is case-insensitive. The
/// request pipeline is the only reader of credentials: services get the token or the resolved caller.
enum BearerCredentials {
    static func value(_ request: Request, scheme: String) -> String? {
        guard let header = request.header("Authorization") else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == scheme.lowercased() else { return nil }
        return String(parts[1]).trimmed
    }
}

/// Who is asking, resolved once per request from its credentials (SPEC "Assurance": 401 for no or
/// bad credentials, 403 `forbidden` for the wrong kind of caller), for `Access`.
struct CallerResolver: Sendable {
    let sessions: SessionService
    let recovery: RecoveryService
    let admins: AdminRepository
    /// Registration options' caller, read with the account it names (`registrationRequester`).
    let accounts: AccountRepository
    /// An approval route's caller, read with the approval it names (`standingAndApproval`).
    let approvals: ApprovalRepository
    /// A CIBA approval's caller, read with the request it names (`standingAndCIBARequest`).
    let cibaRequests: OAuthRepository
    let adminKeyHash: [UInt8]?
    /// The OP browser sessions (the OpenID Provider's cookie).
    let browser: any BrowserSessions
    /// `Runtime.now`: the start of the hour an opening's limit counts (`preloadedOpening`).
    let now: @Sendable () -> Date
    /// OAuth clients (client authentication) and OAuth access tokens.
    let oauth: OAuthCallers
    /// DPoP-bound session tokens (SPEC "Sender-constrained tokens").
    let dpop: SessionDPoP
    /// `LATCHKEY_ADMIN_QUORUM`: above 1, an admin user's caller is read with the approval its
    /// `Latchkey-Approval` names (`GuardedRoute.quorumApproval` decides on it).
    var adminQuorum = 1

    /// `preload`: the authorization request the route names (the approve and deny routes), read
    /// with the caller's session (the OP cookie's, or a Bearer approver's) in one query, or the
    /// console page an admin route shows, read with an admin user's role and standing; into `loads`.
    func resolve(_ access: Access, _ request: Request, preload: GuardPreload? = nil, loads: inout GuardLoads) throws(ServiceError) -> RouteCaller {
        if Self.carriesRecoveryToken(request), !Self.acceptsRecoveryToken(access, request) { throw RecoveryService.refusedHere }
        let requestId = preload?.authorizationRequestId
        switch access {
        case .anyone, .registrationVerify:
            return .anonymous
        case .session:
            return .session(try sessionCaller(request))
        case .passkeySession:
            var caller = try sessionCaller(request)
            let standing: SessionService.Standing
            if let id = preload?.approvalId {
                let session = caller
                let read = try storage { () throws(StorageError) in
                    try approvals.standingAndApproval(sessionId: session.sessionId, userId: session.userId, id: id)
                }
                standing = try sessions.standing(loaded: read.session)
                loads.preloadedApproval = LoadedApproval(id: id, read: read.approval)
            } else if let opening = preload?.approvalOpening {
                let session = caller, since = now().addingTimeInterval(-ApprovalService.openingWindow)
                let read = try storage { () throws(StorageError) in
                    try approvals.standingAndOpenRead(sessionId: session.sessionId, userId: session.userId, policy: opening.policy,
                                                      subject: opening.subject, since: since)
                }
                standing = try sessions.standing(loaded: read.session)
                loads.preloadedOpening = LoadedOpening(policy: opening.policy, requester: session.userId, subject: opening.subject,
                                                       since: since, read: read.opening)
            } else {
                standing = try sessions.standing(caller)
            }
            guard standing.approves else {
                throw ServiceError(.forbidden, "this needs a session begun by one of the account's passkeys that is not held")
            }
            caller.standing = standing
            return .session(caller)
        case .cibaApprover:
            var caller = try sessionCaller(request)
            let session = caller, id = preload?.cibaRequestId
            let read = try storage { () throws(StorageError) in
                try cibaRequests.standingAndCIBARequest(sessionId: session.sessionId, userId: session.userId, id: id)
            }
            let standing = try sessions.standing(loaded: read.session)
            if let id { loads.cibaRequest = CIBARequestRead(id: id, record: read.request) }
            guard standing.approves || read.sessionDeviceKeys > 0 else {
                throw ServiceError(.forbidden, "approving a CIBA request needs a session begun by one of the account's passkeys that is not held, "
                                   + "or the session that enrolled the approving device key")
            }
            caller.standing = standing
            return .session(caller)
        case .approver:
            guard request.header("Authorization") != nil else {
                let (caller, approves, read) = try browserCaller(request, preloading: requestId)
                loads.authorizationRequest = read
                guard approves else {
                    throw ServiceError(.forbidden, "approving needs a session begun by one of the account's passkeys that is not held")
                }
                return .browser(caller)
            }
            var caller = try sessionCaller(request)
            let (standing, read) = try browser.approverStanding(caller, preloading: requestId)
            loads.authorizationRequest = read
            guard standing.approves else {
                throw ServiceError(.forbidden, "approving needs a session begun by one of the account's passkeys that is not held")
            }
            caller.standing = standing
            return .session(caller)
        case .sessionOrBrowser:
            if SessionDPoP.presented(request) != nil { return .session(try sessionCaller(request)) }
            let (caller, _, read) = try browserCaller(request, preloading: requestId)
            loads.authorizationRequest = read
            return .browser(caller)
        case .anyoneOrBrowser:
            // No cookie, one of an ended session, or one a cross-site page sent: the caller is
            // anonymous. A lookup that fails fails the request.
            guard browser.cookie.value(request) != nil else { return .anonymous }
            do throws(ServiceError) {
                let (caller, _, read) = try browserCaller(request, preloading: requestId)
                loads.authorizationRequest = read
                return .browser(caller)
            } catch {
                if error.code == .internalError { throw error }
                return .anonymous
            }
        case .oauthClient(let endpoint):
            // RFC 6749 §3.2: the form parsed, then its client authenticated; refusals as §5.2 says.
            do throws(OAuthError) {
                let parsed = try OAuthEdge.clientRequest(request, address: Application.clientAddress(request, trustProxy: oauth.trustProxy))
                return .oauthClient(AuthenticatedClientRequest(client: try oauth.authenticate(parsed, at: endpoint), form: parsed.form))
            } catch { throw ServiceError(oauth: .token(error)) }
        case .oauthBearer:
            // RFC 6750 §2.1 and §3.1; RFC 9449 §7.1: a DPoP-bound token comes as `Authorization: DPoP`.
            let dpop = BearerCredentials.value(request, scheme: "DPoP")
            guard var bearer = (dpop ?? BearerCredentials.value(request, scheme: "Bearer")).flatMap(oauth.accessToken) else {
                var error = OAuthError(.invalidToken, "the access token is invalid, expired or revoked")
                if dpop != nil || request.header("DPoP") != nil { error.dpopNonce = "" }
                throw ServiceError(oauth: .bearer(error))
            }
            bearer.presentedAsDPoP = dpop != nil
            return .oauthBearer(bearer)
        case .admin:
            return try admin(request, preloading: preload?.adminPage, loads: &loads)
        case .stepUpToken:
            return .stepUpBearer(try Self.bearer(request))
        case .registration:
            // Each caller of an existing account is read with that account (its passkeys, and
            // whether the presented step-up is still redeemable) in one round trip; the handler
            // takes the account from `loads.registration`.
            if let presented = SessionDPoP.presented(request) {
                let bearer = presented.token
                // SPEC "Recovery": the one place a recovery token is accepted (never DPoP-bound).
                if !presented.asDPoP, RecoveryService.isRecoveryToken(bearer) {
                    let read = try registrationRequester(.recovery(tokenHash: OpaqueSecret.hash(bearer)))
                    let authorized = try recovery.authorizeRegistration(loaded: read.recovery)
                    loads.registration = PreloadedRegistration(account: read.account, stepUpJTI: nil)
                    return .recovery(authorized)
                }
                var caller = try sessionCaller(presented, request)
                let jti = Self.presentedStepUpJTI(request)
                let redeeming = jti.map { StepUpRedemption(jti: $0, userId: caller.userId, actionHash: Self.passkeyAdditionHash) }
                let read = try registrationRequester(.session(id: caller.sessionId, userId: caller.userId, redeeming: redeeming))
                caller.standing = try sessions.standing(loaded: read.session)
                loads.registration = PreloadedRegistration(account: read.account, stepUpJTI: jti)
                return .session(caller)
            }
            guard request.header("Authorization") != nil else { return .anonymous }
            guard let ticket = BearerCredentials.value(request, scheme: "Ticket") else { throw ServiceError.unauthorized }
            let read = try registrationRequester(.ticket(hash: OpaqueSecret.hash(ticket)))
            let holder = try sessions.ticketHolder(loaded: read.ticket)
            loads.registration = PreloadedRegistration(account: read.account, stepUpJTI: nil)
            return .ticket(holder)
        }
    }

    private func registrationRequester(_ requester: RegistrationRequester) throws(ServiceError) -> RegistrationRequesterRead {
        try storage { () throws(StorageError) in try accounts.registrationRequester(requester) }
    }

    /// `SHA-256` of `{"type":"latchkey.passkey.add"}`: the only action a step-up sent with
    /// registration options can approve (`StepUpRule.passkeyAddition`).
    static let passkeyAdditionHash = (try? StepUpAction.passkeyAddition())?.hash ?? []

    /// The `jti` a `Latchkey-Step-Up` header's token claims, read without verifying it: only to
    /// preload whether that step-up is still redeemable. The guard verifies the token afterwards,
    /// and the handler trusts the preload only for the `jti` the verified token carries.
    static func presentedStepUpJTI(_ request: Request) -> String? {
        guard let token = request.header("Latchkey-Step-Up")?.trimmed, let jti = JWT.unverifiedClaims(token)?["jti"]?.stringValue,
              !jti.isEmpty, jti.utf8.count <= 128 else { return nil }
        return jti
    }

    /// The OP browser session of the cookie, from a request the issuer's own page sent (else 415 or
    /// 403, before the cookie is read); no cookie, or one of an ended session → 401.
    func browserCaller(_ request: Request, preloading requestId: String? = nil)
        throws(ServiceError) -> (caller: SessionService.Caller, approves: Bool, request: AuthorizationRequestRead?) {
        guard let value = browser.cookie.value(request) else { throw ServiceError.unauthorized }
        try browser.cookie.checkSentByIssuerPage(request)
        guard let found = try browser.caller(cookie: value, preloading: requestId) else { throw ServiceError.unauthorized }
        return found
    }

    /// A session's access token, as Bearer or (bound) as DPoP with its proof: verified, and its
    /// possession proven (`SessionDPoP.possession`).
    func sessionCaller(_ request: Request) throws(ServiceError) -> SessionService.Caller {
        guard let presented = SessionDPoP.presented(request) else { throw ServiceError.unauthorized }
        return try sessionCaller(presented, request)
    }

    func sessionCaller(_ presented: SessionDPoP.Presented, _ request: Request) throws(ServiceError) -> SessionService.Caller {
        let caller = try sessions.session(accessToken: presented.token)
        try dpop.possession(caller, presented, request)
        return caller
    }

    static func bearer(_ request: Request) throws(ServiceError) -> String {
        guard let bearer = BearerCredentials.value(request, scheme: "Bearer") else { throw ServiceError.unauthorized }
        return bearer
    }

    /// Any credential header carrying a recovery token.
    static func carriesRecoveryToken(_ request: Request) -> Bool {
        for name in ["Authorization", "Latchkey-Step-Up", "Latchkey-Ticket"] {
            if let value = request.header(name), value.contains(RecoveryService.tokenPrefix) { return true }
        }
        return false
    }

    /// Registration options (the token's one use) and the verify that follows — as `Authorization`
    /// alone, never beside a step-up or a ticket.
    static func acceptsRecoveryToken(_ access: Access, _ request: Request) -> Bool {
        switch access {
        case .registration, .registrationVerify:
            request.header("Latchkey-Step-Up") == nil && request.header("Latchkey-Ticket") == nil
        case .anyone, .session, .passkeySession, .cibaApprover, .admin, .stepUpToken, .approver, .sessionOrBrowser, .anyoneOrBrowser, .oauthClient, .oauthBearer:
            false
        }
    }

    /// The admin API (SPEC "Assurance", admin API reads): the admin key (automation; compared in
    /// constant time against its hash), or an admin's access token from a session begun by a
    /// user-verified passkey that is not held. Another user's token, an email session, a held
    /// passkey's session or a refreshed token is 403 `forbidden`; anything else 401. A change made
    /// with a user token also needs its step-up (`StepUpRule.adminChange`), or under a quorum its
    /// approval. `preloading`: the page the route shows; it and the approval are read with the role
    /// and the standing and handed on only once they allow it.
    func admin(_ request: Request, preloading page: AdminPageRequest? = nil, loads: inout GuardLoads) throws(ServiceError) -> RouteCaller {
        if let adminKeyHash, let key = BearerCredentials.value(request, scheme: "Bearer"), AdminKey.matches(key, hash: adminKeyHash) { return .adminKey }
        let caller = try sessionCaller(request)  // verifies the token once; a revoked session is 401 too
        let approvalId = adminQuorum > 1 ? request.header("Latchkey-Approval").flatMap { Identifiers.opaque($0.trimmed) } : nil
        // The admin role and the session's standing (and the page, and the quorum approval), in one read.
        let read = try storage { () throws(StorageError) in
            try admins.adminSession(userId: caller.userId, sessionId: caller.sessionId, preloading: page, approval: approvalId)
        }
        guard read.isAdmin else { throw ServiceError(.forbidden, "this account is not an admin") }
        guard caller.acr == AuthenticationClaims.passkeyVerified.acr else {
            throw ServiceError(.forbidden, "the admin API needs a sign-in with a user-verified passkey (a refreshed token is not one)")
        }
        guard try sessions.standing(loaded: read.session).approves else {
            throw ServiceError(.forbidden, "this session was begun by a passkey that is still held: it cannot use the admin API yet")
        }
        loads.adminPage = read.page
        if let approvalId { loads.preloadedApproval = LoadedApproval(id: approvalId, read: read.approval) }
        return .adminUser(caller)
    }
}
