import Crypto
import Foundation
import JSON
import Storage
import Tokens

/// An OAuth endpoint where the client authenticates (RFC 6749 §2.3, RFC 9126, RFC 7009): what
/// `Access.oauthClient` names, and the URL a client assertion may be addressed to there.
enum OAuthEndpoint: String, Sendable, CaseIterable {
    case token = "/oauth2/token"
    case par = "/oauth2/par"
    case revoke = "/oauth2/revoke"
    case backchannel = "/oauth2/bc-authorize"
}

/// A request whose client authenticated, as the caller resolver hands it to the route: the client
/// and the request's form.
struct AuthenticatedClientRequest: Sendable {
    let client: OAuthClientRecord
    let form: OAuthParameters
}

/// The bearer of one of our OAuth access tokens (userinfo, RFC 6750): its checked claims.
struct OAuthBearer: Sendable {
    let subject: String
    let clientId: String
    /// The `oauth` session (refresh family) the token belongs to.
    let sessionId: String
    let scopes: Set<String>
    /// The token as presented, and the DPoP key it is bound to (`cnf.jkt`; nil: a Bearer token).
    var token = ""
    var dpopKey: String? = nil
    /// It came as `Authorization: DPoP` (RFC 9449 §7.1), not as Bearer.
    var presentedAsDPoP = false
}

/// The callers of the OAuth endpoints, resolved by `CallerResolver` (`Access.oauthClient`,
/// `.oauthBearer`) before the route runs. Refusals are OAuth's own (`OAuthError`), rendered as
/// RFC 6749 §5.2 or RFC 6750 §3.1 at the same edge as `ServiceError` (`ServiceError.oauth`).
struct OAuthCallers: Sendable {
    let clients: OAuthClientService
    /// Where a client assertion's `jti` is recorded (each accepted once).
    let store: any OAuthStore
    let signer: TokenSigner
    let revoked: any OAuthRevocations
    let policy: OAuthPolicy
    let runtime: Runtime
    /// Clients' JWKS for `private_key_jwt` (cached, refreshed off the request path).
    let keySets: ClientKeySets
    /// Failed client authentications per client id and address (SPEC "Limits").
    let failures: ClientAuthFailures
    let trustProxy: Bool

    init(clients: OAuthClientService, store: any OAuthStore, signer: TokenSigner, revoked: any OAuthRevocations, policy: OAuthPolicy,
         runtime: Runtime, trustProxy: Bool) {
        self.clients = clients
        self.store = store
        self.signer = signer
        self.revoked = revoked
        self.policy = policy
        self.runtime = runtime
        self.trustProxy = trustProxy
        keySets = ClientKeySets(fetcher: policy.jwksFetcher(resolver: runtime.resolver), clock: runtime.uptime)
        failures = ClientAuthFailures(clock: runtime.uptime)
    }

    var issuer: String { policy.issuer }

    // MARK: Client authentication

    /// `client_secret_basic`, `client_secret_post`, `private_key_jwt` or `none` (a public client):
    /// exactly one; a confidential client must prove itself.
    func authenticate(_ request: ClientRequest, at endpoint: OAuthEndpoint) throws(OAuthError) -> OAuthClientRecord {
        let fields = request.form.fields
        var methods: [(id: String, proof: ClientProof)] = []
        switch request.basic {
        case .pair(let id, let secret)?: methods.append((id, .secret(secret, .clientSecretBasic)))
        case .malformed?: throw OAuthError.invalidClient("malformed Basic credentials")
        case nil: break
        }
        if let secret = fields["client_secret"] {
            guard let id = fields["client_id"] else { throw OAuthError.invalidClient("client_secret without client_id") }
            methods.append((id, .secret(secret, .clientSecretPost)))
        }
        if let type = fields["client_assertion_type"] {
            guard type == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer", let assertion = fields["client_assertion"] else {
                throw OAuthError.invalidClient("client_assertion_type must be jwt-bearer, with client_assertion")
            }
            guard let id = ClientAssertion.issuer(assertion) ?? fields["client_id"] else { throw OAuthError.invalidClient("malformed client_assertion") }
            methods.append((id, .assertion(assertion)))
        }
        guard methods.count <= 1 else { throw OAuthError.invalidRequest("use exactly one client authentication method") }
        let (id, proof) = methods.first ?? (fields["client_id"] ?? "", .none)
        if let named = fields["client_id"], named != id { throw OAuthError.invalidClient("client_id does not match the authenticated client") }
        do throws(OAuthError) {
            return try authenticate(id: id, proof: proof, at: endpoint)
        } catch where error.code == .invalidClient {
            // SPEC "Limits": failed authentications count per client id and address; a request whose
            // authentication succeeds never reaches this counter.
            switch failures.recordFailure(clientId: id, address: request.address) {
            case .counted: throw error
            case .limited(let retryAfter):
                var limited = OAuthError(.temporarilyUnavailable, "too many failed client authentications; retry later")
                limited.retryAfter = retryAfter
                throw limited
            }
        }
    }

    func authenticate(id: String, proof: ClientProof, at endpoint: OAuthEndpoint) throws(OAuthError) -> OAuthClientRecord {
        let found: OAuthClientRecord?
        do { found = try clients.client(id: id) } catch { throw OAuthError.unavailable }
        guard let client = found else { throw OAuthError.invalidClient("unknown client") }
        // SPEC "Client authentication": the method the client was registered with, and no other.
        guard proof.method == client.authMethod else {
            throw OAuthError.invalidClient(client.authMethod == .none ? "this client is public: it sends client_id alone"
                                           : "this client authenticates with \(client.authMethod.rawValue)")
        }
        switch proof {
        case .none: break
        case .secret(let secret, _):
            guard let hash = client.secretHash, constantTimeEquals(Digest.sha256(Array(secret.utf8)), hash) else {
                throw OAuthError.invalidClient("client authentication failed")
            }
        case .assertion(let assertion):
            try verifyAssertion(assertion, client: client, at: endpoint)
        }
        return client
    }

    enum ClientProof {
        case none, secret(String, OAuthClientAuthMethod), assertion(String)

        var method: OAuthClientAuthMethod {
            switch self {
            case .none: .none
            case .secret(_, let method): method
            case .assertion: .privateKeyJWT
            }
        }
    }

    /// `private_key_jwt` (RFC 7523 §3): the claims, the signature with the client's keys, then the
    /// `jti` recorded so the assertion is accepted once.
    func verifyAssertion(_ token: String, client: OAuthClientRecord, at endpoint: OAuthEndpoint) throws(OAuthError) {
        guard let jwksURI = client.jwksURI else { throw OAuthError.invalidClient("this client has no jwks_uri for private_key_jwt") }
        guard let a = ClientAssertion.parse(token) else { throw OAuthError.invalidClient("client_assertion must be an ES256, PS256 or RS256 JWT") }
        // RFC 7523 §3 item 3, SPEC "Client authentication": the issuer, the token endpoint, or the
        // endpoint receiving the assertion — never another endpoint's URL.
        let audiences = Set([issuer, issuer + OAuthEndpoint.token.rawValue, issuer + endpoint.rawValue])
        if client.isFAPI2 { try ClientAssertion.checkFAPI2(a, issuer: issuer) }
        let checked = try ClientAssertion.checkClaims(a, clientId: client.id, audiences: audiences, now: runtime.unixTime)
        try ClientAssertion.verifySignature(a, jwksURI: jwksURI, keySets: keySets)
        let fresh: Bool
        // Remembered far longer than any assertion it could replay lives (exp ≤ now + 330 s).
        do { fresh = try store.recordAssertion(clientId: client.id, jtiHash: Digest.sha256(Array(checked.jti.utf8)), ttlSeconds: 3700) } catch {
            throw OAuthError.unavailable
        }
        guard fresh else { throw OAuthError.invalidClient("client_assertion jti was used before (replay)") }
    }

    // MARK: Access tokens

    /// One of our OAuth access tokens (not Latchkey's own API tokens): signature, time, issuer, a
    /// client, a live session.
    func accessToken(_ token: String) -> OAuthBearer? {
        guard let claims = try? JWT.verify(token, keys: signer.keySet().all, type: "at+jwt", now: runtime.unixTime),
              claims["iss"]?.stringValue == issuer, let client = claims["client_id"]?.stringValue, client.hasPrefix("lkc_"),
              let sid = claims["sid"]?.stringValue, !revoked.contains(sid), let sub = claims["sub"]?.stringValue else { return nil }
        return OAuthBearer(subject: sub, clientId: client, sessionId: sid,
                           scopes: Set((claims["scope"]?.stringValue ?? "").split(separator: " ").map(String.init)),
                           token: token, dpopKey: claims["cnf"]?["jkt"]?.stringValue)
    }
}

extension RouteContext {
    /// The authenticated OAuth client and its request (`Access.oauthClient`).
    func oauthClient() throws(ServiceError) -> AuthenticatedClientRequest {
        guard case .oauthClient(let c) = caller else { throw ServiceError.unauthorized }
        return c
    }

    /// The OAuth access token's bearer (`Access.oauthBearer`).
    func oauthBearer() throws(ServiceError) -> OAuthBearer {
        guard case .oauthBearer(let b) = caller else { throw ServiceError.unauthorized }
        return b
    }
}
