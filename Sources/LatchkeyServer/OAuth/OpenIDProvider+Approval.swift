import Crypto
import DeviceKeys
import Foundation
import JSON
import Storage
import Tokens

/// A pending authorization request as this HTTP request's guard read it (with the caller's session,
/// or by the approval's step-up rule), for its handler: `record` nil when no pending request has
/// `id` (unknown, used or expired).
struct AuthorizationRequestRead: Sendable {
    let id: String
    let record: OAuthRequestRecord?
}

/// The web page's side of an authorization request (SPEC "OpenID Provider"): read it, approve it
/// (a session begun by a not-held passkey, plus the action-bound step-up for `authorization_details`),
/// or refuse it. Only a successful approve or deny uses the request up.
extension OpenIDProvider {
    /// A request id as the page sends it: `lkq_` + base64url of 32 bytes.
    static func isRequestId(_ id: String) -> Bool {
        id.hasPrefix(requestPrefix) && id.utf8.count == requestPrefix.utf8.count + 43
            && Base64URL.decode(String(id.dropFirst(requestPrefix.utf8.count)))?.count == 32
    }

    /// `read`: this request as the route's guard read it a moment ago (with the caller's session,
    /// in one query, or by the approval's step-up rule), taken instead of a second read. Nothing is
    /// trusted from it that the one write of an approval or a refusal does not check again (the
    /// request still unused).
    func storedRequest(_ id: String, read: AuthorizationRequestRead? = nil) throws(ServiceError) -> (OAuthRequestRecord, OAuthClientRecord) {
        guard Self.isRequestId(id) else { throw ServiceError.notFound("authorization request") }
        let record: OAuthRequestRecord?
        if let read, read.id == id { record = read.record } else { record = try pendingRequest(id) }
        guard let r = record, let client = try clients.client(id: r.clientId) else {
            throw ServiceError.notFound("authorization request")
        }
        return (r, client)
    }

    /// The pending authorization request `id` names (unused, unexpired); nil: none.
    func pendingRequest(_ id: String) throws(ServiceError) -> OAuthRequestRecord? {
        try storage { () throws(StorageError) in try store.request(hash: OpaqueSecret.hash(id)) }
    }

    /// `GET /v1/oauth/requests/{id}[?lang=]` (no auth: the id is the capability; the OP session
    /// cookie names who is signed in) → SPEC "Who may approve"'s view: the client and its redirect
    /// host, scopes, details, the `display` lines a step-up binds, the exact `stepUpAction`, the
    /// sign-in options whose challenge is bound to this request, and `signedIn`.
    func requestView(_ id: String, chosenLanguage: String?, acceptLanguage: String?, browser: SessionService.Caller?,
                     read: AuthorizationRequestRead?) throws(ServiceError) -> JSONValue {
        let (r, client) = try storedRequest(id, read: read)
        let p = r.params
        let scopes = (p["scope"]?.stringValue ?? "").split(separator: " ").map(String.init)
        let details = p["authorization_details"] ?? .null
        let redirectURI = p["redirect_uri"]?.stringValue ?? ""
        let lang = ConsentDisplay.language(uiLocales: p["ui_locales"]?.stringValue, acceptLanguage: acceptLanguage, chosen: chosenLanguage)
        var signedIn: JSONValue = .null
        if let browser {
            let standing = try sessions.standing(browser)
            var username = browser.username
            if username == nil { username = try storage { () throws(StorageError) in try store.username(userId: browser.userId) } }
            signedIn = .object([("username", .string(username ?? "")), ("authTime", .string(iso8601(standing.authTime)))])
        }
        return .object([
            ("client", .object([("id", .string(client.id)), ("name", .string(client.name)),
                                ("host", .string(ConsentDisplay.host(ofRedirectURI: redirectURI, lang: lang)))])),
            ("scopes", .array(scopes.map { .string($0) })),
            ("scopeDescriptions", .array(scopes.map { .string(Scopes.words($0)) })),
            ("authorizationDetails", details),
            ("prompt", (p["prompt"]?.stringValue).flatMap { $0.isEmpty ? nil : JSONValue.string($0) } ?? .null),
            ("maxAge", p["max_age"] ?? .null),
            ("loginHint", p["login_hint"] ?? .null),
            // The action a Bearer approval (or one with details) steps up for; the cookie alone needs
            // none for a plain sign-in.
            ("stepUpAction", try Self.stepUpAction(clientId: client.id, requestId: id, details: details).value),
            ("display", .object([("lang", .string(lang)),
                                 ("lines", .array(ConsentDisplay.lines(clientName: client.name, redirectURI: redirectURI, scopes: scopes,
                                                                        details: details, lang: lang).map { .string($0) }))])),
            ("approveLabel", .string(ConsentDisplay.approveLabel(details: details, lang: lang))),
            ("publicKey", PasskeyRenderer.options(try passkeys.authenticationOptions(boundTo: OpaqueSecret.hash(id)))),
            ("signedIn", signedIn),
        ])
    }

    static func stepUpAction(clientId: String, requestId: String, details: JSONValue) throws(ServiceError) -> StepUpAction {
        try gated { () throws(DeviceKeyError) in
            try StepUpAction.oauthAuthorization(clientId: clientId, requestId: requestId, authorizationDetails: details)
        }
    }

    /// The step-up approving the pending request `r` (of `client`) needs (the route table's
    /// `StepUpRule.oauthAuthorization`, SPEC "Approve and deny"): the OP session cookie alone
    /// approves a plain sign-in; details, or a Bearer token (which a thief can hold), need the
    /// step-up for exactly this request.
    static func approvalNeed(_ r: OAuthRequestRecord, client: OAuthClientRecord, requestId: String,
                             viaCookie: Bool) throws(ServiceError) -> StepUpRule.Need {
        let details = r.params["authorization_details"] ?? .null
        if details == .null && viaCookie { return .none }
        return .required(try stepUpAction(clientId: client.id, requestId: requestId, details: details))
    }

    /// `POST /v1/oauth/requests/{id}/approve` → `{"redirectTo":"<redirect_uri>?code=…&state=…&iss=…"}`.
    /// The grant remembers the approving session and the approving passkey or device key.
    func approve(_ id: String, caller: SessionService.Caller, viaCookie: Bool, approval: Approval?,
                 read: AuthorizationRequestRead?) throws(ServiceError) -> JSONValue {
        let (r, client) = try storedRequest(id, read: read)
        let p = r.params
        let standing = try sessions.standing(caller)
        guard standing.approves else { throw ServiceError(.forbidden, "approving needs a session begun by a passkey that is not held") }
        let details = p["authorization_details"] ?? .null
        var receiptId: String? = nil
        if details != .null || !viaCookie {
            guard case .stepUp(_, let receipt, _)? = approval else {
                throw StepUpService.stepUpRequired("approving needs a step-up for \(StepUpService.text(try Self.stepUpAction(clientId: client.id, requestId: id, details: details)))")
            }
            receiptId = receipt
        }
        // With a step-up, the authentication the tokens describe is the step-up's assertion, now;
        // the cookie alone stands for its sign-in, which must be as recent as the request asks.
        let authTime = receiptId == nil ? standing.authTime : runtime.now()
        if receiptId == nil {
            // OpenID Connect Core §3.1.2.1: max_age and prompt=login ask for an authentication that recent.
            // `auth_time` is whole seconds: "after the request" is compared at that precision.
            let freshForRequest = authTime.timeIntervalSince1970 >= r.createdAt.timeIntervalSince1970.rounded(.down)
            let maxAge = p["max_age"]?.intValue
            if let maxAge, maxAge > 0, runtime.now().timeIntervalSince(authTime) > Double(maxAge) {
                throw ServiceError(.unauthorized, "max_age: the sign-in is older than the client allows; sign in with your passkey again")
            }
            // max_age=0 is prompt=login (OpenID Connect Core §3.1.2.1): a sign-in made for this request.
            if maxAge == 0 || (p["prompt"]?.stringValue ?? "").split(separator: " ").contains("login"), !freshForRequest {
                throw ServiceError(.unauthorized, "prompt=login / max_age=0: sign in with your passkey again for this request")
            }
        }
        // SPEC "Which authentication the tokens describe": the step-up's assertion, else the cookie
        // session's sign-in, in OpenID's terms (EAP acr, RFC 8176 amr).
        let authentication: AuthenticationClaims
        if case .stepUp(_, _, let stepUp)? = approval {
            authentication = stepUp.openID
        } else {
            authentication = AuthenticationClaims.passkey(userVerified: caller.acr == AuthenticationClaims.passkeyVerified.acr,
                                                          hardware: standing.hardware).openID
            guard OpenIDACR.satisfies(authentication.acr, requested: p["acr_values"]?.stringValue) else {
                throw ServiceError(.unauthorized, "acr_values: this sign-in does not meet what the client asks; sign in with another passkey")
            }
        }
        let code = "lkac_" + Base64URL.encode(runtime.random(32))
        let scopes = (p["scope"]?.stringValue ?? "").split(separator: " ").map(String.init)
        let grant = Self.grant(p, authTime: authTime, authentication: authentication, receiptId: receiptId,
                               credentialId: standing.credentialId, opSessionId: viaCookie ? caller.sessionId : nil)
        let data: [(key: String, value: JSONValue)] = [("clientId", .string(client.id)), ("scopes", .array(scopes.map { .string($0) })),
                                                       ("receiptId", receiptId.map { .string($0) } ?? .null)]
        let event = events.event(.oauthAuthorized, userId: caller.userId, data: data)
        let audit = AuditRecord(.oauthAuthorized, actor: caller.userId, subject: caller.userId, detail: data)
        let approvers = OAuthApprovers(familyId: caller.sessionId, sessionCredential: standing.credentialId, stepUpJTI: approval?.redemption?.jti)
        let finished = try storage { () throws(StorageError) in
            try store.finish(requestHash: OpaqueSecret.hash(id),
                             code: (OpaqueSecret.hash(code), client.id, caller.userId, grant.json, policy.codeTTL),
                             approvers: approvers, consent: scopes, usingUpPushed: nil,
                             redeeming: approval?.redemption, audit: audit, events: [event])
        }
        guard finished else { throw ServiceError.notFound("authorization request") }
        metrics.oauth(client: client.id, outcome: "authorized")
        let target = RedirectURIs.appending(p["redirect_uri"]?.stringValue ?? "",
                                            [("code", code)] + (p["state"]?.stringValue.map { [("state", $0)] } ?? []) + [("iss", issuer)])
        return .object([("redirectTo", .string(target))])
    }

    /// What a code grants (`OAuthGrant`): the request's parameters that the token endpoint checks,
    /// and the authentication the tokens describe.
    static func grant(_ p: JSONValue, authTime: Date, authentication: AuthenticationClaims, receiptId: String?, credentialId: [UInt8]?,
                      opSessionId: String?) -> OAuthGrant {
        OAuthGrant(request: p, authTime: authTime, authentication: authentication, receiptId: receiptId, credentialId: credentialId,
                   opSessionId: opSessionId)
    }

    /// `POST /v1/oauth/requests/{id}/deny` → `{"redirectTo":"…?error=access_denied&…"}`.
    func deny(_ id: String, caller: SessionService.Caller, read: AuthorizationRequestRead?) throws(ServiceError) -> JSONValue {
        let (r, client) = try storedRequest(id, read: read)
        let p = r.params
        let scopes = JSONValue.array((p["scope"]?.stringValue ?? "").split(separator: " ").map { .string(String($0)) })
        let data: [(key: String, value: JSONValue)] = [("clientId", .string(client.id)), ("scopes", scopes), ("receiptId", .null)]
        let event = events.event(.oauthDenied, userId: caller.userId, data: data)
        let audit = AuditRecord(.oauthDenied, actor: caller.userId, subject: caller.userId, detail: data)
        guard try storage({ () throws(StorageError) in
            try store.finish(requestHash: OpaqueSecret.hash(id), code: nil, approvers: nil, consent: nil, usingUpPushed: nil,
                             redeeming: nil, audit: audit, events: [event])
        }) else { throw ServiceError.notFound("authorization request") }
        metrics.oauth(client: client.id, outcome: "denied")
        let params = OAuthError(.accessDenied, "the user refused the request").pairs
            + (p["state"]?.stringValue.map { [("state", $0)] } ?? []) + [("iss", issuer)]
        return .object([("redirectTo", .string(RedirectURIs.appending(p["redirect_uri"]?.stringValue ?? "", params)))])
    }
}
