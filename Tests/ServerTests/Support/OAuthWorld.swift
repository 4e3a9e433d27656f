import Crypto
import Foundation
import JSON
@testable import LatchkeyServer
@testable import Storage
import Synchronization
import Testing
import Tokens
import WebAuthn

/// `OpenIDProvider` and `OAuthClientService` as the server builds them, over the in-memory OAuth
/// store beside `ServiceFixture`'s sessions (one set of shared rows), on its stepped clock and fixed
/// randomness: no socket, no PostgreSQL. The collaborators that reach a database in the server are
/// in memory too: signing keys, the request-id secret, the RS256 key, the revocation feed (over the
/// in-memory sessions); the passkey sign-in is not used here.
struct OAuthWorld {
    static let redirectURI = "https://app.example/cb"
    static let verifier = "verifier-" + String(repeating: "k", count: 40)
    static var challenge: String { Base64URL.encode(Digest.sha256(Array(verifier.utf8))) }

    let base: ServiceFixture
    let oauth: InMemoryOAuthTables
    let store: InMemoryOAuthStore
    let policy: OAuthPolicy
    let clients: OAuthClientService
    let provider: OpenIDProvider
    /// The OAuth endpoints' callers, as the caller resolver resolves them before a route runs.
    let callers: OAuthCallers

    var clock: ManualClock { base.clock }
    var tables: InMemoryTables { base.tables }

    /// `rsaKeys`: where the RS256 key is kept (a failing source stands for a store that is down).
    init(rsaKeys: any RSAKeySource = MemorySecrets(), configure: (inout Configuration) -> Void = { _ in }) throws {
        base = try ServiceFixture(configure: configure)
        oauth = InMemoryOAuthTables(shared: base.tables)
        store = InMemoryOAuthStore(tables: oauth)
        policy = OAuthPolicy(base.configuration)
        clients = OAuthClientService(store: store, policy: policy, runtime: base.runtime)
        provider = OpenIDProvider(store: store, clients: clients, sessions: base.sessions, signer: base.signer,
                                  rsa: RSASigningKey(keys: rsaKeys, sealer: SecretSealer(configuration: base.configuration, runtime: base.runtime)),
                                  events: OutboxEvents(runtime: base.runtime, maxAgeSeconds: base.configuration.webhookMaxAge), metrics: Metrics(),
                                  policy: policy, runtime: base.runtime, revoked: base.revoked, passkeys: NoPasskeySignIn(),
                                  requestIds: DeploymentSecret(name: "oauth-request-ids", keys: MemorySecrets(), runtime: base.runtime))
        callers = OAuthCallers(clients: clients, store: store, signer: base.signer, revoked: base.revoked, policy: policy, runtime: base.runtime,
                               trustProxy: false)
    }

    // MARK: Clients and people

    struct Client {
        let id: String
        let secret: String?
    }

    func client(public isPublic: Bool = false, pkce: Bool = true, name: String = "Example app") throws -> Client {
        var r = OAuthClientService.Registration(name: name, redirectURIs: [Self.redirectURI])
        r.isPublic = isPublic
        r.pkceRequired = pkce
        r.postLogoutRedirectURIs = ["https://app.example/bye"]
        let created = try clients.add(r, by: .named("admin"))
        return Client(id: created.client.id, secret: created.secret)
    }

    struct Person {
        let user: UserRecord
        let passkey: [UInt8]
        let cookie: String
        let browserSession: String
        var id: String { user.id }
    }

    /// An account with a passkey and an OP browser session that passkey began (the cookie).
    func person(_ name: String, email: String? = nil) throws -> Person {
        let user = tables.addUser(name, email: email)
        let passkey = Array("passkey-\(name)".utf8)
        tables.addCredential(id: passkey, userId: user.id, approvesFrom: nil)
        let cookie = "lkop_cookie-of-\(name)"
        try oauth.addSession("browser-\(name)", userId: user.id, credentialId: passkey, cookie: cookie)
        return Person(user: user, passkey: passkey, cookie: cookie, browserSession: "browser-\(name)")
    }

    // MARK: The flow, as the routes call it

    func parameters(_ c: Client, scope: String = "openid profile email offline_access", extra: [(String, String)] = [],
                    pkce: Bool = true) -> [(String, String)] {
        var p = [("client_id", c.id), ("redirect_uri", Self.redirectURI), ("response_type", "code"), ("scope", scope),
                 ("state", "st-1"), ("nonce", "n-1")]
        if pkce { p += [("code_challenge", Self.challenge), ("code_challenge_method", "S256")] }
        return p + extra
    }

    func authorize(_ parameters: [(String, String)], cookie: String? = nil, from address: String = "192.0.2.1") -> BrowserAnswer {
        provider.authorize(AuthorizeRequest(parameters: parameters, acceptLanguage: nil, cookie: cookie, clientAddress: address))
    }

    /// The pending request id the page is sent to.
    func requestId(_ answer: BrowserAnswer) throws -> String {
        guard case .redirect(let location, _) = answer else { throw Failure("expected a redirect, got \(answer)") }
        let prefix = policy.pageOrigin + "/authorize?request="
        guard location.hasPrefix(prefix) else { throw Failure("not to the page: \(location)") }
        return String(location.dropFirst(prefix.count))
    }

    /// The cookie's caller approves `id`; the code in the redirect.
    func approve(_ id: String, by p: Person) throws -> String {
        let (caller, approves) = try #require(try provider.caller(cookie: p.cookie))
        #expect(approves)
        let answer = try provider.approve(id, caller: caller, viaCookie: true, approval: nil, read: nil)
        return try Self.query(try #require(answer["redirectTo"]?.stringValue), "code")
    }

    /// authorize → approve: a code for `c`.
    func code(_ c: Client, by p: Person, scope: String = "openid profile email offline_access") throws -> String {
        try approve(try requestId(authorize(parameters(c, scope: scope))), by: p)
    }

    /// `c`'s request to `endpoint`, its client authenticated (Basic with its secret, else `client_id` alone).
    func request(_ c: Client, _ form: [(String, String)], at endpoint: OAuthEndpoint = .token) throws(OAuthError) -> AuthenticatedClientRequest {
        let request = ClientRequest(form: OAuthParameters(form), basic: c.secret.map { .pair(clientId: c.id, secret: $0) }, address: "192.0.2.1")
        return AuthenticatedClientRequest(client: try callers.authenticate(request, at: endpoint), form: request.form)
    }

    /// userinfo for `token`, its bearer resolved as the route's caller is.
    func userinfo(accessToken token: String?) throws(OAuthError) -> JSONValue {
        guard let bearer = token.flatMap(callers.accessToken) else {
            throw OAuthError(.invalidToken, "the access token is invalid, expired or revoked")
        }
        return try provider.userinfo(bearer)
    }

    func exchange(_ c: Client, code: String, verifier: String? = OAuthWorld.verifier,
                  redirectURI: String = OAuthWorld.redirectURI) throws(OAuthError) -> JSONValue {
        var form = [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI)]
        if let verifier { form.append(("code_verifier", verifier)) }
        if c.secret == nil { form.append(("client_id", c.id)) }
        return try provider.token(TokenRequest(request(c, form)))
    }

    func refresh(_ c: Client, _ token: JSONValue?, scope: String? = nil) throws(OAuthError) -> JSONValue {
        var form = [("grant_type", "refresh_token"), ("refresh_token", token?.stringValue ?? "")]
        if let scope { form.append(("scope", scope)) }
        if c.secret == nil { form.append(("client_id", c.id)) }
        return try provider.token(TokenRequest(request(c, form)))
    }

    static func query(_ uri: String, _ name: String) throws -> String {
        try #require(URLComponents(string: uri)?.queryItems?.first { $0.name == name }?.value)
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}

/// The OAuth error `body` threw (nil: it answered).
func oauthError(_ body: () throws(OAuthError) -> Any) -> OAuthError? {
    do throws(OAuthError) {
        _ = try body()
        return nil
    } catch {
        return error
    }
}

/// The OP's passkey sign-in is the passkeys' work, tested with them: here it only makes options.
struct NoPasskeySignIn: PasskeySignIn {
    func authenticationOptions(boundTo context: [UInt8]) throws(ServiceError) -> RequestOptions {
        RequestOptions(challenge: context, timeoutMilliseconds: 60_000, rpId: "localhost", allowCredentials: [],
                       userVerification: .required, hints: [])
    }

    func checkedLogin(_ body: [UInt8], conformance: Bool, boundTo context: [UInt8]?,
                      write: (CheckedLogin) throws(ServiceError) -> LoginWrite) throws(ServiceError) -> (CheckedLogin, LoginWritten) {
        throw ServiceError(.internalError, "the OP sign-in is not part of these tests")
    }
}

/// The RS256 key's secret in memory: created empty, filled once (`MemorySecrets` keeps the rest).
extension MemorySecrets: RSAKeySource {
    func replaceEmptySecret(named name: String, with value: [UInt8]) throws(StorageError) {
        secrets.withLock { s in if s[name]?.isEmpty ?? true { s[name] = value } }
    }
}
