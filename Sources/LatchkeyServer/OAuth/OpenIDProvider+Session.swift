import Crypto
import Foundation
import JSON
import Storage
import Tokens

/// Discovery, userinfo, RP-initiated logout and revocation (SPEC "OpenID Provider").
extension OpenIDProvider {
    /// `GET /.well-known/openid-configuration` (OpenID Connect Discovery 1.0 §3).
    func discovery() throws(ServiceError) -> JSONValue {
        let base = issuer
        func list(_ items: [String]) -> JSONValue { .array(items.map { .string($0) }) }
        return .object([
            ("issuer", .string(base)), ("authorization_endpoint", .string(base + "/oauth2/authorize")),
            ("token_endpoint", .string(base + "/oauth2/token")), ("userinfo_endpoint", .string(base + "/oauth2/userinfo")),
            ("jwks_uri", .string(base + "/.well-known/jwks.json")), ("end_session_endpoint", .string(base + "/oauth2/logout")),
            ("pushed_authorization_request_endpoint", .string(base + "/oauth2/par")), ("revocation_endpoint", .string(base + "/oauth2/revoke")),
            ("response_types_supported", list(["code"])), ("response_modes_supported", list(["query"])),
            ("grant_types_supported", list(["authorization_code", "refresh_token", OAuthClientService.cibaGrantType])),
            ("code_challenge_methods_supported", list(["S256"])),
            ("token_endpoint_auth_methods_supported", list(["client_secret_basic", "client_secret_post", "private_key_jwt", "none"])),
            ("token_endpoint_auth_signing_alg_values_supported", list(["ES256", "PS256", "RS256"])),
            ("revocation_endpoint_auth_methods_supported", list(["client_secret_basic", "client_secret_post", "private_key_jwt", "none"])),
            ("id_token_signing_alg_values_supported", list(["ES256", "RS256"])), ("subject_types_supported", list(["public"])),
            ("scopes_supported", list(Scopes.supported)),
            ("claims_supported", list(["sub", "iss", "aud", "exp", "iat", "auth_time", "nonce", "acr", "amr", "sid", "azp",
                                        "preferred_username", "name", "email", "email_verified"])),
            // OpenID EAP ACR values (and the device-key and email values); the passkey acr values of
            // step-up tokens are accepted in acr_values as aliases, not listed.
            ("acr_values_supported", list(OpenIDACR.supported)),
            ("prompt_values_supported", list(["none", "login", "consent"])),
            ("authorization_details_types_supported", list(try authorizationDetailsTypes())),
            ("authorization_response_iss_parameter_supported", .bool(true)),
            ("require_pushed_authorization_requests", .bool(false)),
            ("claims_parameter_supported", .bool(false)), ("request_parameter_supported", .bool(false)),
            // RFC 9126 §5: PAR's request_uri is always accepted; no other request_uri is.
            ("request_uri_parameter_supported", .bool(false)), ("require_request_uri_registration", .bool(false)),
            ("ui_locales_supported", list(["en", "de", "pl", "zh"])),
            ("dpop_signing_alg_values_supported", list(Self.dpopAlgorithms)),
        ] + Self.cibaDiscovery(base))
    }

    /// Every type some client may ask for.
    func authorizationDetailsTypes() throws(ServiceError) -> [String] {
        Array(Set(try clients.list().flatMap(\.authorizationDetailsTypes))).sorted()
    }

    /// The JWKS: the ES256 keys and the RS256 key. A key that cannot be read fails the request
    /// (503 when the store is down) rather than answer a set without it: clients cache the JWKS
    /// (`max-age=300`) and would refuse every RS256 id_token meanwhile.
    func jwks() throws(ServiceError) -> JSONValue {
        var keys = signer.jwks["keys"]?.arrayValue ?? []
        if let rsaKey = try rsa.jwk() { keys.append(rsaKey) }
        return .object([("keys", .array(keys))])
    }

    /// `GET|POST /oauth2/userinfo` (OpenID Connect Core §5.3): claims as the token's scopes allow,
    /// for the bearer of one of our access tokens (`Access.oauthBearer`). Refusals are RFC 6750
    /// §3.1's: `invalid_token` (401), `insufficient_scope` (403).
    func userinfo(_ bearer: OAuthBearer) throws(OAuthError) -> JSONValue {
        let sub = bearer.subject
        let scopes = bearer.scopes
        guard scopes.contains("openid") else { throw OAuthError(.insufficientScope, "the token has no openid scope") }
        let found: (user: UserRecord, email: String?)?
        do { found = try store.userinfo(userId: sub, sessionId: bearer.sessionId) } catch {
            throw OAuthError.unavailable
        }
        guard let (user, email) = found else { throw OAuthError(.invalidToken, "the session or the account is gone") }
        var members: [(key: String, value: JSONValue)] = [("sub", .string(sub))]
        if scopes.contains("profile") { members += [("preferred_username", .string(user.username)), ("name", .string(user.displayName))] }
        if scopes.contains("email"), let email {
            members += [("email", .string(email)), ("email_verified", .bool(true))]
        }
        return .object(members)
    }

    /// `GET /oauth2/logout` (OpenID Connect RP-Initiated Logout 1.0): ends the OAuth session the
    /// id_token names and redirects to a registered `post_logout_redirect_uri`. The OP browser session
    /// of the cookie ends too when the hint was issued for it (its `sid`). A logout never cascades
    /// (SPEC "Grants live and die"): it is an ending, not a security revocation.
    func logout(_ request: LogoutRequest) -> BrowserAnswer {
        let given = OAuthParameters(request.parameters)
        let f = given.fields
        let cookie = request.cookie
        let lang = ConsentDisplay.language(uiLocales: f["ui_locales"], acceptLanguage: request.acceptLanguage, chosen: nil)
        func page(_ problem: OAuthPages.Problem) -> BrowserAnswer { .page(problem, lang: lang) }
        if let duplicate = given.duplicate { return page(.duplicateParameter(duplicate)) }
        var client: OAuthClientRecord? = nil
        var hint: JSONValue? = nil
        if let token = f["id_token_hint"] {
            // An expired id_token still names its session (§2: the OP should accept it), up to 30 days old.
            let verified: JSONValue?
            do { verified = try verifiedIdToken(token) } catch { return .page(.lookupFailed, lang: lang, status: 503, retryAfter: 1) }
            guard let claims = verified else { return page(.idTokenHintRefused) }
            guard let iat = claims["iat"]?.doubleValue, Double(runtime.unixTime) - iat <= 30 * 86400 else {
                return page(.idTokenHintExpired)
            }
            hint = claims
            if let audience = claims["aud"]?.stringValue {
                do { client = try clients.client(id: audience) } catch { return .page(.lookupFailed, lang: lang, status: 503, retryAfter: 1) }
            }
        }
        if let named = f["client_id"] {
            guard client == nil || client?.id == named else { return page(.clientIdMismatch) }
            do { client = try clients.client(id: named) } catch { return .page(.lookupFailed, lang: lang, status: 503, retryAfter: 1) }
        }
        if let target = f["post_logout_redirect_uri"] {
            guard let client, client.postLogoutRedirectURIs.contains(target) else {
                return page(.postLogoutURIUnregistered)
            }
        }
        let cookieHash = cookie.flatMap { $0.hasPrefix(Self.browserCookiePrefix) && $0.utf8.count <= 128 ? OpaqueSecret.hash($0) : nil }
        var confirmed = false
        var cookieSession: String? = nil
        if let hint, let client, let sid = hint["sid"]?.stringValue, let sub = hint["sub"]?.stringValue {
            // One write: the sessions the hint names end, the cookie's with them when it is that very session.
            let outcome: (ended: [String], browserEnded: Bool, cookieSession: String?)
            do { outcome = try store.logout(sid: sid, userId: sub, clientId: client.id, cookieHash: cookieHash) } catch {
                return .page(.lookupFailed, lang: lang, status: 503, retryAfter: 1)
            }
            if !outcome.ended.isEmpty {
                revoked.insertLogout(outcome.ended)
                metrics.oauth(client: client.id, outcome: "logout")
            }
            if outcome.browserEnded {
                revoked.insertLogout([sid])
                confirmed = true
            }
            cookieSession = outcome.cookieSession
        } else if let cookie, client != nil {
            do { cookieSession = try caller(cookie: cookie)?.caller.sessionId } catch {
                return .page(.lookupFailed, lang: lang, status: 503, retryAfter: 1)
            }
        }
        // An OP session the hint was not issued for ends only when the person says so.
        if !confirmed, let cookieSession, !revoked.contains(cookieSession), let client {
            return .logoutConfirmation(clientName: client.name, clientId: client.id, postLogoutRedirectURI: f["post_logout_redirect_uri"],
                                       state: f["state"], lang: lang)
        }
        guard let target = f["post_logout_redirect_uri"] else { return .page(.signedOut, lang: lang, status: 200, clearCookie: confirmed) }
        return .redirect(RedirectURIs.appending(target, f["state"].map { [("state", $0)] } ?? []), clearCookie: confirmed)
    }

    /// The logout confirmation's answer (a JSON `POST /oauth2/logout` from the issuer's page, under the
    /// cookie routes' rules): `{"confirm": true}` ends the OP session of the cookie (a logout: no grant
    /// ends with it), `false` leaves it; either way → `{"redirectTo"}` (the registered
    /// `post_logout_redirect_uri` with `state`, or null).
    func confirmLogout(_ body: JSONValue, cookie: String?) throws(ServiceError) -> (JSONValue, ended: Bool) {
        guard let confirm = body["confirm"]?.boolValue else { throw ServiceError.invalid("confirm must be true or false") }
        var target: String? = nil
        if let uri = body["post_logout_redirect_uri"]?.stringValue {
            guard let clientId = body["client_id"]?.stringValue, let client = try clients.client(id: clientId),
                  client.postLogoutRedirectURIs.contains(uri) else {
                throw ServiceError.invalid("the post_logout_redirect_uri is not registered for this app")
            }
            target = RedirectURIs.appending(uri, body["state"]?.stringValue.map { [("state", $0)] } ?? [])
        }
        var ended = false
        if confirm, let cookie, let (browser, _) = try caller(cookie: cookie) {
            ended = try storage { () throws(StorageError) in try store.endBrowserSession(familyId: browser.sessionId) }
            if ended { revoked.insertLogout([browser.sessionId]) }
        }
        return (.object([("redirectTo", target.map { .string($0) } ?? .null)]), ended)
    }

    /// One of our id_tokens (ES256 or RS256), its signature and issuer checked; expiry is not.
    /// Throws only when the RS256 key an RS256 token needs cannot be read.
    func verifiedIdToken(_ token: String) throws(OAuthError) -> JSONValue? {
        let now = runtime.unixTime
        if let claims = try? JWT.verify(token, keys: signer.keySet().all, type: "JWT", now: now, leewaySeconds: 10 * 365 * 86400),
           claims["iss"]?.stringValue == issuer { return claims }
        guard CompactJWS(token)?.alg == "RS256" else { return nil }
        let (key, kid): (PrivateKey, String)
        do { (key, kid) = try rsa.key() } catch { throw OAuthError.unavailable }
        guard let claims = JWT.verifyRS256(token, key: key.publicKey, kid: kid), claims["iss"]?.stringValue == issuer else { return nil }
        return claims
    }

    /// `POST /oauth2/revoke` (RFC 7009): the client's refresh token ends its session; 200 whatever
    /// the token was (§2.2), after the client authenticated (`Access.oauthClient`).
    func revoke(_ request: AuthenticatedClientRequest) throws(OAuthError) {
        let client = request.client
        guard let token = request.form["token"], !token.isEmpty else { throw OAuthError.invalidRequest("token is required") }
        let ended: [String]
        do { ended = try store.revoke(refreshHash: OpaqueSecret.hash(token), clientId: client.id) } catch {
            throw OAuthError.unavailable
        }
        if !ended.isEmpty {
            revoked.insert(ended)
            metrics.oauth(client: client.id, outcome: "revoked")
        }
    }

    /// The endpoints a browser app (a public client) calls itself.
    static let corsPaths: Set<String> = ["/oauth2/token", "/oauth2/revoke", "/oauth2/userinfo", "/.well-known/openid-configuration"]

    /// The origins (`scheme://host[:port]`) of public clients' http(s) redirect URIs. CORS fails
    /// closed: while the clients cannot be read no origin is named (the request itself then fails
    /// on its own read), which refuses a browser nothing the route would have granted.
    /// They are worked out once per read of the clients, not per request.
    func publicClientOrigins() -> Set<String> {
        do { return try clients.publicOrigins() } catch { return [] }
    }
}
