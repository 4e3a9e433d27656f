import Crypto
import Foundation
import JSON
import Storage
import Tokens
import WebAuthn

/// The OP browser sessions, as the caller resolver reads them (SPEC "The cookie routes").
protocol BrowserSessions: Sendable {
    var cookie: OPSessionCookie { get }
    /// The session a cookie names, and whether it may approve (its passkey is not held); nil: no
    /// such live session.
    func caller(cookie value: String) throws(ServiceError) -> (caller: SessionService.Caller, approves: Bool)?
    /// `caller(cookie:)`, reading in the same query the authorization request `requestId` names
    /// (the approve and deny routes'), for the route's guard and handler, which then read it no more.
    func caller(cookie value: String, preloading requestId: String?)
        throws(ServiceError) -> (caller: SessionService.Caller, approves: Bool, request: AuthorizationRequestRead?)?
    /// A Bearer caller's standing as an approver (how its session began, the hold of that passkey),
    /// reading in the same query the authorization request `requestId` names; 401 when the session
    /// is gone.
    func approverStanding(_ caller: SessionService.Caller, preloading requestId: String?)
        throws(ServiceError) -> (standing: SessionService.Standing, request: AuthorizationRequestRead?)
}

/// The part of a passkey login the OP's sign-in borrows (the challenge bound to a request, the
/// assertion checked and the login's one statement, which the provider decides), so the provider
/// never reaches into the passkeys' store.
protocol PasskeySignIn: Sendable {
    func authenticationOptions(boundTo context: [UInt8]) throws(ServiceError) -> RequestOptions
    func checkedLogin(_ body: [UInt8], conformance: Bool, boundTo context: [UInt8]?,
                      write: (CheckedLogin) throws(ServiceError) -> LoginWrite) throws(ServiceError) -> (CheckedLogin, LoginWritten)
}

extension PasskeyService: PasskeySignIn {}

extension OpenIDProvider: BrowserSessions {
    static let browserCookiePrefix = "lkop_"

    func caller(cookie value: String) throws(ServiceError) -> (caller: SessionService.Caller, approves: Bool)? {
        try caller(cookie: value, preloading: nil).map { ($0.caller, $0.approves) }
    }

    func caller(cookie value: String, preloading requestId: String?)
        throws(ServiceError) -> (caller: SessionService.Caller, approves: Bool, request: AuthorizationRequestRead?)? {
        guard value.hasPrefix(Self.browserCookiePrefix), value.utf8.count <= 128 else { return nil }
        let request = requestId.flatMap { Self.isRequestId($0) ? $0 : nil }
        guard let (found, pending) = try storage({ () throws(StorageError) in
            try store.browserSession(cookieHash: OpaqueSecret.hash(value), withRequest: request.map(OpaqueSecret.hash))
        }), !revoked.contains(found.familyId) else { return nil }
        let heldUntil = found.passkeyApprovesFrom.flatMap { $0 > runtime.now() ? $0 : nil }
        let standing = SessionService.Standing(method: .passkey, credentialId: found.credentialId, heldUntil: heldUntil,
                                               authTime: found.authTime, hardware: found.hardware)
        // The sign-in that began it required user verification (SPEC "Who may approve").
        return (SessionService.Caller(userId: found.userId, sessionId: found.familyId, acr: AuthenticationClaims.passkeyVerified.acr,
                                      standing: standing, username: found.username), standing.approves,
                request.map { AuthorizationRequestRead(id: $0, record: pending) })
    }

    func approverStanding(_ caller: SessionService.Caller, preloading requestId: String?)
        throws(ServiceError) -> (standing: SessionService.Standing, request: AuthorizationRequestRead?) {
        let request = requestId.flatMap { Self.isRequestId($0) ? $0 : nil }
        guard let (found, pending) = try storage({ () throws(StorageError) in
            try store.approverSession(familyId: caller.sessionId, userId: caller.userId, withRequest: request.map(OpaqueSecret.hash))
        }) else { throw ServiceError.unauthorized }
        let standing = SessionService.Standing(method: found.method, credentialId: found.credentialId,
                                               heldUntil: found.passkeyApprovesFrom.flatMap { $0 > runtime.now() ? $0 : nil },
                                               authTime: found.authTime, hardware: found.hardware)
        return (standing, request.map { AuthorizationRequestRead(id: $0, record: pending) })
    }

    /// `POST /v1/oauth/requests/{id}/sign-in`: the passkey answering the request's `publicKey`
    /// (user-verified; a held passkey → 403 `recovery_pending`) begins a new OP browser session,
    /// and the session of the cookie it replaces ends like a logout. → (`{"signedIn"}`, the new cookie).
    func signIn(_ id: String, credential body: [UInt8], replacing oldCookie: String?) throws(ServiceError) -> (JSONValue, String) {
        // The challenge is bound to this request id (its digest sealed in), so the request itself
        // need not be read: a sign-in for a request since used or expired only begins the session.
        guard Self.isRequestId(id) else { throw ServiceError.notFound("authorization request") }
        let cookie = OpaqueSecret(prefix: Self.browserCookiePrefix, runtime: runtime)
        let now = runtime.now()
        let replaced = oldCookie.flatMap { $0.hasPrefix(Self.browserCookiePrefix) && $0.utf8.count <= 128 ? OpaqueSecret.hash($0) : nil }
        // The sign-in's one statement: the challenge's use, the passkey's use, the browser session,
        // the replaced session ended, the audit line and the events. A refusal here still uses the challenge.
        let (login, written) = try passkeys.checkedLogin(body, conformance: false, boundTo: OpaqueSecret.hash(id)) { login throws(ServiceError) in
            guard login.outcome.verified.userVerified else { throw ServiceError(.userVerificationRequired, "the OP sign-in needs user verification") }
            if let hold = login.credential.approvesFrom, hold > now {
                throw ServiceError(.recoveryPending, "this passkey was added by a recovery and approves nothing until \(iso8601(hold))")
            }
            let session = NewSession(familyId: runtime.sessionIdentifier(), userId: login.user.id, refreshHash: cookie.hash,
                                     ttlSeconds: policy.opSessionTTL, method: .passkey, credentialId: login.credential.id,
                                     authTime: now, browser: true)
            return .browserSession(session, recording: login.outcome.use, replacing: replaced,
                                   audit: [AuditRecord(.passkeyLogin, actor: login.user.id, subject: login.user.id,
                                                       detail: login.outcome.auditDetail + [("browser", true)])],
                                   events: login.outcome.events)
        }
        guard case .browserSession(_, let ended) = written else { throw ServiceError(.internalError, "the sign-in wrote no session") }
        let user = login.user
        revoked.insertLogout(ended)
        let signedIn: JSONValue = .object([("username", .string(user.username)), ("authTime", .string(iso8601(now)))])
        return (.object([("signedIn", signedIn)]), cookie.token)
    }

    // MARK: Consents (SPEC "Consents")

    /// `GET /v1/oauth/consents` → `{"consents":[{"clientId","clientName","scopes","grantedAt"}]}`.
    func consents(userId: String) throws(ServiceError) -> JSONValue {
        let list = try storage { () throws(StorageError) in try store.consents(userId: userId) }
        return .object([("consents", .array(list.map { c in
            .object([("clientId", .string(c.clientId)), ("clientName", .string(c.clientName)),
                     ("scopes", .array(c.scopes.map { .string($0) })), ("grantedAt", .string(iso8601(c.grantedAt)))])
        }))])
    }

    /// `DELETE /v1/oauth/consents/{clientId}` → 204 (404 if none); revokes nothing else.
    func forgetConsent(userId: String, clientId: String) throws(ServiceError) {
        guard try storage({ () throws(StorageError) in try store.deleteConsent(userId: userId, clientId: clientId) }) else {
            throw ServiceError.notFound("consent")
        }
    }
}
