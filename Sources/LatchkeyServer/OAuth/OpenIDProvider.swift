import Crypto
import Foundation
import JSON
import Storage
import Tokens

/// The OpenID Provider (SPEC "OpenID Provider"): authorization requests (and PAR), the page's
/// approve/deny, the token endpoint, userinfo, logout and revocation. Every piece of state is in its
/// store (`OAuthStore`: PostgreSQL in the server), so any instance finishes what another began.
public final class OpenIDProvider: Sendable {
    let store: any OAuthStore
    let clients: OAuthClientService
    let sessions: SessionService
    let signer: TokenSigner
    let events: OutboxEvents
    let metrics: Metrics
    let policy: OAuthPolicy
    let runtime: Runtime
    let revoked: any OAuthRevocations
    /// The RSA key for clients that registered `RS256` id_tokens (OpenID Discovery requires it listed).
    let rsa: RSASigningKey
    /// The passkey sign-in the `/authorize` page's OP session begins with.
    let passkeys: any PasskeySignIn
    let cookie: OPSessionCookie
    /// Keys the authorization request ids (the same on every instance).
    let requestIds: DeploymentSecret

    static let requestPrefix = "lkq_"
    static let requestURIPrefix = "urn:ietf:params:oauth:request_uri:"

    init(store: any OAuthStore, clients: OAuthClientService, sessions: SessionService, signer: TokenSigner, rsa: RSASigningKey,
         events: OutboxEvents, metrics: Metrics, policy: OAuthPolicy, runtime: Runtime, revoked: any OAuthRevocations,
         passkeys: any PasskeySignIn, requestIds: DeploymentSecret) {
        self.store = store
        self.passkeys = passkeys
        cookie = OPSessionCookie(issuer: policy.issuer, ttlSeconds: policy.opSessionTTL)
        self.clients = clients
        self.sessions = sessions
        self.signer = signer
        self.rsa = rsa
        self.events = events
        self.metrics = metrics
        self.policy = policy
        self.runtime = runtime
        self.revoked = revoked
        self.requestIds = requestIds
    }

    var issuer: String { policy.issuer }

    func requestIdKey() throws(OAuthError) -> [UInt8] {
        do { return try requestIds.value() } catch { throw OAuthError.unavailable }
    }

    /// Where `/authorize` lives: the issuer's origin (`OAuthPolicy.pageOrigin`).
    var pageOrigin: String { policy.pageOrigin }

    // MARK: Pages that never redirect

    /// A redirect back to the client with RFC 9207's `iss` (every authorization response carries it).
    func redirect(_ uri: String, _ params: [(String, String)], state: String?) -> BrowserAnswer {
        var all = params
        if let state { all.append(("state", state)) }
        all.append(("iss", issuer))
        return .redirect(RedirectURIs.appending(uri, all))
    }

    // MARK: Authorization requests

    /// `/oauth2/authorize`: the checks in RFC 6749 §4.1.2.1's order. An unknown client or a redirect
    /// URI that is not registered → a page in the person's language; anything else → a redirect with
    /// `error`. The OP session cookie is read here only to answer `prompt=none` (SPEC "Silent sign-in").
    func authorize(_ request: AuthorizeRequest) -> BrowserAnswer {
        let given = OAuthParameters(request.parameters)
        let fields = given.fields
        // RFC 6749 §4.1.2.1: what cannot be redirected is told to the person, in their language.
        let lang = ConsentDisplay.language(uiLocales: fields["ui_locales"], acceptLanguage: request.acceptLanguage, chosen: nil)
        func page(_ problem: OAuthPages.Problem, status: Int = 400) -> BrowserAnswer { .page(problem, lang: lang, status: status) }
        guard let clientId = fields["client_id"], !clientId.isEmpty else { return page(.missingClientId) }
        let client: OAuthClientRecord
        do {
            guard let found = try clients.client(id: clientId) else { return page(.unknownClient) }
            client = found
        } catch { return page(.lookupFailed, status: 503) }
        var params = fields
        var pushedHash: [UInt8]? = nil
        if let requestURI = fields["request_uri"] {
            // RFC 9126 §4: the pushed request stands for every parameter but client_id. It is read
            // here and used up by the statement that stores what it stands for (§2.2: one use).
            guard requestURI.hasPrefix(Self.requestURIPrefix) else { return page(.requestURIUnknown) }
            let found: OAuthRequestRecord?
            do { found = try store.pushed(hash: OpaqueSecret.hash(requestURI), clientId: client.id) } catch {
                return page(.lookupFailed, status: 503)
            }
            guard let pushed = found else { return page(.requestURIUnknown) }
            pushedHash = OpaqueSecret.hash(requestURI)
            params = [:]
            for (k, v) in pushed.params.objectValue ?? [] { if let s = v.stringValue { params[k] = s } }
            params["client_id"] = client.id
        }
        guard let presented = params["redirect_uri"], !presented.isEmpty else { return page(.missingRedirectURI) }
        guard let redirectURI = RedirectURIs.match(presented, registered: client.redirectURIs, isPublic: client.isPublic) else {
            return page(.unregisteredRedirectURI)
        }
        let state = params["state"]
        if let duplicate = given.duplicate {
            return redirect(redirectURI, OAuthError.invalidRequest("\(duplicate) is given more than once").pairs, state: state)
        }
        do throws(OAuthError) {
            let checked = try check(params, client: client, redirectURI: redirectURI, pushed: fields["request_uri"] != nil)
            if checked["prompt"]?.stringValue == "none" {
                let code = try silentSignIn(checked, client: client, cookie: request.cookie, usingUpPushed: pushedHash)
                metrics.oauth(client: client.id, outcome: "authorized")
                return redirect(redirectURI, [("code", code)], state: state)
            }
            // SPEC "Limits": the id is a keyed hash of the request, so the same request (a reload)
            // finds its pending row instead of writing another.
            let id = Self.requestPrefix + Base64URL.encode(HMAC.sha256(key: try requestIdKey(), data: checked.serialized()))
            let stored: OAuthRequestStore
            do {
                stored = try store.storeAuthorizationRequest(
                    hash: OpaqueSecret.hash(id), clientId: client.id, params: checked, ttlSeconds: policy.requestTTL,
                    clientAddress: request.clientAddress,
                    perAddressPerMinute: policy.pendingPerAddressPerMinute, perClient: policy.pendingPerClient,
                    usingUpPushed: pushedHash)
            } catch { throw OAuthError.unavailable }
            guard stored != .pushedGone else { return page(.requestURIUnknown) }
            guard stored != .limited else { return .page(.tooManyRequests, lang: lang, status: 429, retryAfter: 60) }
            return .redirect(pageOrigin + "/authorize?request=" + id)
        } catch {
            metrics.oauth(client: client.id, outcome: error.error)
            return redirect(redirectURI, error.pairs, state: state)
        }
    }

    /// The parameters of a valid request, normalised, as stored (and as the page reads them).
    func check(_ p: [String: String], client: OAuthClientRecord, redirectURI: String, pushed: Bool) throws(OAuthError) -> JSONValue {
        guard p["request"] == nil else { throw OAuthError(.requestNotSupported, "request objects are not supported; use PAR") }
        // SPEC "FAPI 2.0": a fapi2 client's authorization request comes only through PAR (`request_uri`).
        guard pushed || !client.isFAPI2 else { throw OAuthError.invalidRequest("this client must push its authorization request (PAR)") }
        guard p["response_type"] == "code" else {
            throw OAuthError(.unsupportedResponseType, "only response_type=code is supported")
        }
        if let mode = p["response_mode"], mode != "query" { throw OAuthError.invalidRequest("only response_mode=query is supported") }
        let scopes = Scopes.parse(p["scope"] ?? "")
        guard scopes.contains("openid") else { throw OAuthError(.invalidScope, "scope must hold openid") }
        // RFC 7636 + SPEC: S256 for every client, except a confidential client registered with
        // `--pkce optional`, whose request without a challenge must carry a nonce (RFC 9700 §2.1.1).
        // Another method is refused (no downgrade).
        let challenge = p["code_challenge"].flatMap { $0.isEmpty ? nil : $0 }
        if let challenge {
            guard p["code_challenge_method"] == "S256" else { throw OAuthError.invalidRequest("code_challenge_method must be S256") }
            guard PKCE.isChallenge(challenge) else { throw OAuthError.invalidRequest("code_challenge is not a base64url SHA-256") }
        } else {
            guard !client.pkceRequired, !client.isPublic, !client.isFAPI2 else {
                throw OAuthError.invalidRequest("code_challenge is required (PKCE S256)")
            }
            guard p["code_challenge_method"] == nil else { throw OAuthError.invalidRequest("code_challenge_method without code_challenge") }
            guard let nonce = p["nonce"], !nonce.isEmpty else { throw OAuthError.invalidRequest("without PKCE, a nonce is required") }
        }
        let prompt = Set((p["prompt"] ?? "").split(separator: " ").map(String.init))
        guard prompt.isSubset(of: ["none", "login", "consent", "select_account"]) else { throw OAuthError.invalidRequest("unknown prompt value") }
        if prompt.contains("none") {
            guard prompt.count == 1 else { throw OAuthError.invalidRequest("prompt=none cannot be combined") }
        }
        var hintSubject: String? = nil
        if let hint = p["id_token_hint"] {
            // OpenID Connect Core §3.1.2.1: one of our id_tokens (an expired one too) naming the user.
            guard hint.utf8.count <= 8192, let claims = try verifiedIdToken(hint), let sub = claims["sub"]?.stringValue else {
                throw OAuthError.invalidRequest("id_token_hint is not an id_token this server issued")
            }
            hintSubject = sub
        }
        var maxAge: Int? = nil
        if let m = p["max_age"] {
            guard let v = Int(m), v >= 0, v <= 1_000_000_000 else { throw OAuthError.invalidRequest("max_age must be a non-negative integer") }
            maxAge = v
        }
        var details: JSONValue = .null
        if let text = p["authorization_details"] {
            details = try AuthorizationDetails.parse(text, allowed: client.authorizationDetailsTypes)
        }
        if let resource = p["resource"] {
            guard let u = URLComponents(string: resource), u.scheme == "https" || (policy.developmentMode && u.scheme == "http"),
                  u.fragment == nil, !(u.host ?? "").isEmpty else {
                throw OAuthError(.invalidTarget, "resource must be an absolute https URI without a fragment")
            }
        }
        for (name, max) in [("state", 2048), ("nonce", 512), ("login_hint", 256), ("acr_values", 512), ("ui_locales", 256)] {
            if let v = p[name], v.utf8.count > max { throw OAuthError.invalidRequest("\(name) is longer than \(max) bytes") }
        }
        // SPEC "FAPI 2.0": a fapi2 client's nonce is at most 64 characters.
        if client.isFAPI2, let nonce = p["nonce"], nonce.count > 64 { throw OAuthError.invalidRequest("nonce is longer than 64 characters") }
        // RFC 9449 §10: `dpop_jkt` binds the code to a DPoP key's RFC 7638 thumbprint (SHA-256, base64url).
        if let jkt = p["dpop_jkt"], Base64URL.decode(jkt)?.count != 32 || jkt.utf8.count != 43 {
            throw OAuthError.invalidRequest("dpop_jkt must be a JWK SHA-256 thumbprint")
        }
        func opt(_ name: String) -> JSONValue { p[name].map { .string($0) } ?? .null }
        return .object([
            ("client_id", .string(client.id)), ("redirect_uri", .string(redirectURI)), ("scope", .string(scopes.joined(separator: " "))),
            ("state", opt("state")), ("nonce", opt("nonce")), ("code_challenge", challenge.map { .string($0) } ?? .null),
            ("prompt", .string(prompt.sorted().joined(separator: " "))), ("max_age", maxAge.map { .number(Double($0)) } ?? .null),
            ("login_hint", opt("login_hint")), ("acr_values", opt("acr_values")), ("authorization_details", details),
            ("resource", opt("resource")), ("ui_locales", opt("ui_locales")), ("pushed", .bool(pushed)),
            ("id_token_hint_sub", hintSubject.map { .string($0) } ?? .null), ("dpop_jkt", opt("dpop_jkt")),
        ])
    }

    /// `POST /oauth2/par` (RFC 9126): the authenticated client (`Access.oauthClient`) pushes its
    /// parameters; errors are JSON (there is no redirect yet). → `{"request_uri","expires_in"}` (201).
    func pushed(_ request: AuthenticatedClientRequest, dpop: DPoPPresentation? = nil) throws(OAuthError) -> JSONValue {
        let client = request.client
        let fields = request.form.fields
        guard fields["request_uri"] == nil else { throw OAuthError.invalidRequest("request_uri cannot be pushed") }
        guard let presented = fields["redirect_uri"],
              let redirectURI = RedirectURIs.match(presented, registered: client.redirectURIs, isPublic: client.isPublic) else {
            throw OAuthError.invalidRequest("redirect_uri is missing or not registered for this client")
        }
        var params = fields
        for secret in ["client_secret", "client_assertion", "client_assertion_type"] { params[secret] = nil }
        // RFC 9449 §10.1: a proof at PAR binds the code to its key, as `dpop_jkt` does (both: the same key).
        let proof = try checkedProof(dpop, for: client)
        if let proof {
            if let given = params["dpop_jkt"], given != proof.jkt { throw OAuthError(.invalidDPoPProof, "dpop_jkt is not the proof's key") }
            params["dpop_jkt"] = proof.jkt
        }
        // SPEC "FAPI 2.0": a fapi2 client's code is bound to its DPoP key, by `dpop_jkt` or the proof.
        if client.isFAPI2, params["dpop_jkt"] == nil {
            throw OAuthError.invalidRequest("this client binds its code to its DPoP key: dpop_jkt or a DPoP proof is required")
        }
        _ = try check(params, client: client, redirectURI: redirectURI, pushed: true)
        let uri = Self.requestURIPrefix + Base64URL.encode(runtime.random(32))
        let storedParams = JSONValue.object(params.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })
        let ttl = client.isFAPI2 ? policy.fapi2PushedTTL : policy.pushedTTL
        // The request and the proof's `jti` (RFC 9449 §11.1) in one statement.
        let stored: Bool
        do {
            stored = try store.storeRequest(hash: OpaqueSecret.hash(uri), kind: "par", clientId: client.id, params: storedParams,
                                            ttlSeconds: ttl, dpop: proof?.replay)
        } catch { throw OAuthError.unavailable }
        guard stored else { throw Self.replayedProof }
        return .object([("request_uri", .string(uri)), ("expires_in", .number(Double(ttl)))])
    }
}

extension OAuthError {
    var pairs: [(String, String)] { [("error", error), ("error_description", description)] }
}
