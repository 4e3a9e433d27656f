import Crypto
import DeviceKeys
import HTTP
import JSON
import Storage

extension StepUpRule {
    /// SPEC "Approve and deny": the OP session cookie alone approves a plain sign-in; a request with
    /// `authorization_details`, or any approval by Bearer token, needs a step-up for
    /// `{"type":"latchkey.oauth.authorize","clientId","requestId","authorizationDetails"}` — by a
    /// user-verified passkey or a device key, made in the approving session itself (`sid`).
    ///
    /// The request is the one the caller's resolution read with its session, else read here; either
    /// way it is handed to the handler (`RouteContext.loads`). An id that cannot be one is left to
    /// the path check (404); no such pending request needs no step-up (the handler says 404); a
    /// lookup that fails fails the request.
    static let oauthAuthorization = StepUpRule(changes: "OpenID approvals", deviceKeyAllowed: true) { input throws(ServiceError) in
        let viaCookie = if case .browser = input.caller { true } else { false }
        guard let id = input.rawPath["id"], OpenIDProvider.isRequestId(id) else { return .none }
        let read: AuthorizationRequestRead
        if let loaded = input.loads.authorizationRequest, loaded.id == id {
            read = loaded
        } else {
            read = AuthorizationRequestRead(id: id, record: try input.lookups.pendingAuthorization(id: id))
            input.loads.authorizationRequest = read
        }
        guard let record = read.record, let client = try input.lookups.client(id: record.clientId) else { return .none }
        return try OpenIDProvider.approvalNeed(record, client: client, requestId: id, viaCookie: viaCookie)
    }
}

extension RouteTable {
    /// SPEC "OpenID Provider": the OAuth endpoints (OAuth's own error formats), the page's API, and
    /// the admin API for clients.
    mutating func addOAuthRoutes(_ s: Services) {
        let op = s.openID
        add("GET", "/.well-known/openid-configuration", .anyone, accepting: .any) { _ in
            .json(bytes: try op.discovery().serialized(), headers: [("Cache-Control", "public, max-age=300")])
        }
        let trustProxy = s.configuration.trustProxy
        let address: @Sendable (Request) -> String = { r in Application.clientAddress(r, trustProxy: trustProxy) }
        @Sendable func authorizeRequest(_ r: Request, _ parameters: [(String, String)]) -> AuthorizeRequest {
            AuthorizeRequest(parameters: parameters, acceptLanguage: r.header("Accept-Language"), cookie: op.cookie.value(r), clientAddress: address(r))
        }
        add("GET", "/oauth2/authorize", .anyone, accepting: .any) { ctx in
            OAuthEdge.render(op.authorize(authorizeRequest(ctx.request, ctx.request.query)), cookie: op.cookie)
        }
        // OpenID Connect Core §3.1.2.1: the authorization endpoint takes GET and form POST alike.
        add("POST", "/oauth2/authorize", .anyone, accepting: .any) { ctx in
            // A body that is not a form carries no parameters: the request reads as one without client_id.
            let pairs = ctx.request.mediaType == "application/x-www-form-urlencoded" ? formPairs(ctx.request.body) : []
            return OAuthEdge.render(op.authorize(authorizeRequest(ctx.request, pairs)), cookie: op.cookie)
        }
        // RFC 6749 §5 and RFC 9126: JSON answers, and errors as §5.2 says. The client authenticated
        // before the route runs (`Access.oauthClient`).
        add("POST", "/oauth2/par", .oauthClient(.par), accepting: .any) { ctx in
            let request = try ctx.oauthClient()
            let dpop = DPoPPresentation(ctx.request)
            return try OAuthEdge.json(status: 201, dpopNonce: dpop == nil ? nil : op.currentDPoPNonce()) { () throws(OAuthError) in
                try op.pushed(request, dpop: dpop)
            }
        }
        add("POST", "/oauth2/token", .oauthClient(.token), accepting: .any) { ctx in
            let request = try ctx.oauthClient()
            if request.form["grant_type"] == CIBAPoll.grantType { return try RouteTable.cibaToken(s, request) }
            let dpop = DPoPPresentation(ctx.request)
            return try OAuthEdge.json(dpopNonce: dpop == nil ? nil : op.currentDPoPNonce()) { () throws(OAuthError) in
                try op.token(TokenRequest(request, dpop: dpop))
            }
        }
        add("POST", "/oauth2/revoke", .oauthClient(.revoke), accepting: .any) { ctx in
            let request = try ctx.oauthClient()
            // RFC 7009 §2.2: 200 whatever the token was, once the client authenticated.
            do throws(OAuthError) {
                try op.revoke(request)
                return .empty(status: 200, headers: OAuthEdge.noStore)
            } catch { throw ServiceError(oauth: .token(error)) }
        }
        for method in ["GET", "POST"] {
            add(method, "/oauth2/userinfo", .oauthBearer, accepting: .any) { ctx in
                let bearer = try ctx.oauthBearer()
                let dpop = DPoPPresentation(ctx.request)
                let nonce = dpop != nil || bearer.dpopKey != nil ? op.currentDPoPNonce() : nil
                do throws(OAuthError) {
                    try op.checkPossession(bearer, dpop)
                    return .json(bytes: try op.userinfo(bearer).serialized(), headers: OAuthEdge.noStore + (nonce.map { [("DPoP-Nonce", $0)] } ?? []))
                } catch {
                    var refusal = error
                    if refusal.dpopNonce == nil, let nonce { refusal.dpopNonce = nonce }
                    throw ServiceError(oauth: .bearer(refusal))
                }
            }
        }
        add("GET", "/oauth2/logout", .anyone, accepting: .any) { ctx in
            OAuthEdge.render(op.logout(LogoutRequest(parameters: ctx.request.query, cookie: op.cookie.value(ctx.request),
                                                     acceptLanguage: ctx.request.header("Accept-Language"))), cookie: op.cookie)
        }
        // RP-Initiated Logout §2 allows a form POST too; a JSON POST is the confirmation page's answer
        // (SPEC "Userinfo and logout"), which the OP session cookie authenticates, from the issuer's page only.
        add("POST", "/oauth2/logout", .anyone, accepting: .any) { ctx in
            guard ctx.request.mediaType != "application/x-www-form-urlencoded" else {
                return OAuthEdge.render(op.logout(LogoutRequest(parameters: formPairs(ctx.request.body), cookie: op.cookie.value(ctx.request),
                                                                acceptLanguage: ctx.request.header("Accept-Language"))), cookie: op.cookie)
            }
            try op.cookie.checkSentByIssuerPage(ctx.request)
            let (answer, ended) = try op.confirmLogout(try ctx.json(), cookie: op.cookie.value(ctx.request))
            return .json(bytes: answer.serialized(), headers: ended ? [op.cookie.clearing()] : [])
        }

        // The /authorize page's API (SPEC "Who may approve" … "Consents"); the OP session cookie is
        // read here and on the step-up of latchkey.oauth.authorize, nowhere else.
        add("GET", "/v1/oauth/requests/{id:oauthRequest}", .anyoneOrBrowser, accepting: .any) { ctx in
            let browser: SessionService.Caller? = if case .browser(let c) = ctx.caller { c } else { nil }
            return .json(bytes: try op.requestView(try ctx.path.text("id"), chosenLanguage: ctx.request.queryValue("lang"),
                                                   acceptLanguage: ctx.request.header("Accept-Language"), browser: browser,
                                                   read: ctx.loads.authorizationRequest).serialized(),
                         headers: [("Cache-Control", "no-store")])
        }
        add("POST", "/v1/oauth/requests/{id:oauthRequest}/sign-in", .anyone) { ctx in
            // Every sign-in, cookie or not, comes from the issuer's own page: a sign-in a cross-site
            // page could post would swap the person's OP session for the attacker's.
            try op.cookie.checkSentByIssuerPage(ctx.request)
            let (body, cookie) = try op.signIn(try ctx.path.text("id"), credential: ctx.request.body, replacing: op.cookie.value(ctx.request))
            return .json(bytes: body.serialized(), headers: [op.cookie.setting(cookie), ("Cache-Control", "no-store")])
        }
        add("POST", "/v1/oauth/requests/{id:oauthRequest}/approve", .approver, stepUp: .oauthAuthorization, accepting: .any) { ctx in
            let (caller, viaCookie) = try ctx.sessionOrBrowser()
            return .json(bytes: try op.approve(try ctx.path.text("id"), caller: caller, viaCookie: viaCookie, approval: ctx.approval,
                                               read: ctx.loads.authorizationRequest).serialized())
        }
        add("POST", "/v1/oauth/requests/{id:oauthRequest}/deny", .sessionOrBrowser, accepting: .any) { ctx in
            .json(bytes: try op.deny(try ctx.path.text("id"), caller: try ctx.sessionOrBrowser().caller,
                                     read: ctx.loads.authorizationRequest).serialized())
        }
        add("GET", "/v1/oauth/consents", .sessionOrBrowser, accepting: .any) { ctx in
            .json(bytes: try op.consents(userId: try ctx.sessionOrBrowser().caller.userId).serialized())
        }
        add("DELETE", "/v1/oauth/consents/{id:client}", .sessionOrBrowser, accepting: .any) { ctx in
            try op.forgetConsent(userId: try ctx.sessionOrBrowser().caller.userId, clientId: try ctx.path.text("id"))
            return .empty(status: 204)
        }

        // Clients (SPEC "Clients"): adding one or a redirect URI weakens security → the admin's step-up.
        add("GET", "/admin/v1/clients", .admin, accepting: .any) { _ in
            .json(bytes: OAuthClientRenderer.clients(try s.oauthClients.list()).serialized())
        }
        add("GET", "/admin/v1/clients/{id:client}", .admin, accepting: .any) { ctx in
            guard let c = try s.oauthClients.client(id: try ctx.path.text("id")) else { throw ServiceError.notFound("client") }
            return .json(bytes: OAuthClientRenderer.client(c).serialized())
        }
        add("POST", "/admin/v1/clients", .admin, stepUp: .adminChange) { ctx in
            let created = try s.oauthClients.add(try OAuthClientService.registration(try ctx.json()), by: try ctx.admin())
            return .json(status: 201, bytes: OAuthClientRenderer.client(created.client, secret: created.secret).serialized())
        }
        add("PATCH", "/admin/v1/clients/{id:client}", .admin, stepUp: .adminChange) { ctx in
            .json(bytes: OAuthClientRenderer.client(try s.oauthClients.update(id: try ctx.path.text("id"), body: try ctx.json(),
                                                                                by: try ctx.admin())).serialized())
        }
        add("DELETE", "/admin/v1/clients/{id:client}", .admin, stepUp: .adminChange, accepting: .any) { ctx in
            s.sessions.ended(try s.oauthClients.remove(id: try ctx.path.text("id"), by: try ctx.admin()))
            return .empty(status: 204)
        }
    }
}

/// The OpenID Provider's edge: OAuth requests parsed into values, and the provider's answers
/// rendered (redirects and pages). An `OAuthError` is thrown as a `ServiceError` carrying its
/// `OAuthRefusal`, and rendered where every refusal is (`RouteTable`, `ServiceError.response`).
enum OAuthEdge {
    static let noStore = [("Cache-Control", "no-store"), ("Pragma", "no-cache")]

    /// A token-style request (RFC 6749 §3.2: form-encoded, each parameter once) and its client's
    /// `Authorization: Basic` (§2.3.1: the id and secret form-encoded before base64).
    static func clientRequest(_ request: Request, address: String) throws(OAuthError) -> ClientRequest {
        guard request.mediaType == "application/x-www-form-urlencoded" else {
            throw OAuthError.invalidRequest("the body must be application/x-www-form-urlencoded")
        }
        let form = OAuthParameters(formPairs(request.body))
        if let duplicate = form.duplicate { throw OAuthError.invalidRequest("\(duplicate) is given more than once") }
        var basic: BasicCredentials? = nil
        if let value = BearerCredentials.value(request, scheme: "Basic") {
            if let decoded = Base64.decodeStandard(value).map({ String(decoding: $0, as: UTF8.self) }), let colon = decoded.firstIndex(of: ":"),
               let id = formDecode(String(decoded[..<colon])), let secret = formDecode(String(decoded[decoded.index(after: colon)...])) {
                basic = .pair(clientId: id, secret: secret)
            } else {
                basic = .malformed
            }
        }
        return ClientRequest(form: form, basic: basic, address: address)
    }

    /// A JSON answer; a refusal goes to the route table's edge, answered as RFC 6749 §5.2 says.
    /// `dpopNonce`: the request carried a DPoP proof, so the answer carries the current nonce (RFC 9449 §8).
    static func json(status: Int = 200, dpopNonce: String? = nil, _ body: () throws(OAuthError) -> JSONValue) throws(ServiceError) -> Response {
        do throws(OAuthError) {
            return .json(status: status, bytes: try body().serialized(), headers: noStore + (dpopNonce.map { [("DPoP-Nonce", $0)] } ?? []))
        } catch {
            var refusal = error
            if refusal.dpopNonce == nil { refusal.dpopNonce = dpopNonce }
            throw ServiceError(oauth: .token(refusal))
        }
    }

    /// The request's `DPoP` header (RFC 9449 §4.1), nil when none was sent.

    static func render(_ answer: BrowserAnswer, cookie: OPSessionCookie) -> Response {
        switch answer {
        case .redirect(let location, let clear):
            return .empty(status: 303, headers: [("Location", location), ("Cache-Control", "no-store")] + (clear ? [cookie.clearing()] : []))
        case .page(let problem, let lang, let status, let retryAfter, let clear):
            return OAuthPages.page(problem, lang: lang, status: status,
                                   extraHeaders: (retryAfter.map { [("Retry-After", String($0))] } ?? []) + (clear ? [cookie.clearing()] : []))
        case .logoutConfirmation(let name, let id, let uri, let state, let lang):
            return OAuthPages.logoutConfirmation(clientName: name, clientId: id, postLogoutRedirectURI: uri, state: state, lang: lang)
        }
    }
}

/// An `OAuthError` in the format of the endpoint that refused: RFC 6749 §5.2 at the endpoints where
/// the client authenticates, RFC 6750 §3.1 where an access token is presented.
enum OAuthRefusal: Sendable {
    case token(OAuthError)
    case bearer(OAuthError)

    var error: OAuthError {
        switch self {
        case .token(let e), .bearer(let e): e
        }
    }

    var response: Response {
        switch self {
        case .token(let e): e.tokenResponse
        case .bearer(let e): e.bearerResponse
        }
    }

    /// SPEC's code of the same status.
    var code: ServiceError.Code {
        switch response.status {
        case 401: .unauthorized
        case 403: .forbidden
        case 429: .rateLimited
        case 503: .internalError
        default: .invalidRequest
        }
    }
}

extension OAuthError {
    /// RFC 6749 §5.2: JSON; `invalid_client` 401 with `WWW-Authenticate`; a limit 429 with
    /// `Retry-After`; `server_error`, and a store that could not answer, 503.
    var tokenResponse: Response {
        var headers = OAuthEdge.noStore
        if let retryAfter { headers.append(("Retry-After", String(retryAfter))) }
        else if serverSide { headers.append(("Retry-After", "1")) }
        else if code == .invalidClient { headers.append(("WWW-Authenticate", "Basic realm=\"latchkey\"")) }
        if let dpopNonce, !dpopNonce.isEmpty { headers.append(("DPoP-Nonce", dpopNonce)) }
        return .json(status: status, bytes: json.serialized(), headers: headers)
    }

    /// RFC 6750 §3.1 (userinfo): `invalid_token` 401, `insufficient_scope` 403, each with its
    /// `WWW-Authenticate: Bearer` challenge; a database that cannot answer 503.
    var bearerResponse: Response {
        // RFC 9449 §7.1: where a proof or a DPoP-bound token was presented, the challenge is DPoP's.
        let scheme = dpopNonce == nil ? "Bearer" : "DPoP"
        let algs = dpopNonce == nil ? "" : ", algs=\"\(OpenIDProvider.dpopAlgorithms.joined(separator: " "))\""
        var (status, headers): (Int, [(String, String)]) = switch code {
        case .insufficientScope: (403, [("WWW-Authenticate", "\(scheme) error=\"insufficient_scope\", scope=\"openid\"")])
        case .temporarilyUnavailable: (503, [("Retry-After", "1")])
        case .invalidDPoPProof, .useDPoPNonce: (401, [("WWW-Authenticate", "DPoP error=\"\(code.rawValue)\"\(algs)")])
        default: (401, [("WWW-Authenticate", "\(scheme) error=\"invalid_token\"\(algs)")])
        }
        if let dpopNonce, !dpopNonce.isEmpty { headers.append(("DPoP-Nonce", dpopNonce)) }
        return .json(status: status, bytes: json.serialized(), headers: headers + OAuthEdge.noStore)
    }
}
