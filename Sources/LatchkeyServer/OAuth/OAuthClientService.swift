import Crypto
import Foundation
import JSON
import Storage

/// OpenID clients (SPEC "OpenID Provider", "Clients"): `latchkey clients add|list|remove` and
/// `/admin/v1/clients`. The secret is shown once and stored as its SHA-256 (compared in constant time).
/// Adding a client or a redirect URI weakens security: the admin routes declare the admin's step-up.
public final class OAuthClientService: Sendable {
    let store: any OAuthStore
    let policy: OAuthPolicy
    let runtime: Runtime
    /// Every client, by id and in order: each OAuth request, the token endpoint's CORS and discovery
    /// look clients up, so they are read at most once a second, and at once after a change anywhere
    /// (the config change feed; migration 20's trigger on `oauth_clients`).
    private let cache: RefreshingCache<Directory>

    /// The clients as each read finds them, with what requests ask of them worked out once a read.
    struct Directory: Sendable {
        let all: [OAuthClientRecord]
        let byId: [String: OAuthClientRecord]
        /// The origins (`scheme://host[:port]`) of public clients' http(s) redirect URIs: the token
        /// endpoint's CORS asks on every request from a browser.
        let publicOrigins: Set<String>

        init(_ all: [OAuthClientRecord]) {
            self.all = all
            byId = Dictionary(all.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
            var origins: Set<String> = []
            for client in all where client.isPublic {
                for uri in client.redirectURIs {
                    guard let u = URLComponents(string: uri), let scheme = u.scheme, scheme == "https" || scheme == "http",
                          let host = u.host else { continue }
                    origins.insert("\(scheme)://\(host)" + (u.port.map { ":\($0)" } ?? ""))
                }
            }
            publicOrigins = origins
        }
    }

    init(store: any OAuthStore, policy: OAuthPolicy, runtime: Runtime) {
        self.store = store
        self.policy = policy
        self.runtime = runtime
        cache = RefreshingCache(maxAge: 1, clock: runtime.uptime)
    }

    private func cached() throws(ServiceError) -> Directory {
        try storage { () throws(StorageError) in try cache.get { () throws(StorageError) in Directory(try store.clients()) } }
    }

    /// The origins of public clients' http(s) redirect URIs (`Directory.publicOrigins`).
    func publicOrigins() throws(ServiceError) -> Set<String> { try cached().publicOrigins }

    /// After a change on this instance (other instances hear of it on the change feed).
    func invalidate() { cache.invalidate() }

    /// For the command line (`latchkey clients`): straight on the database.
    public convenience init(database: Database, configuration: Configuration) {
        self.init(store: PostgresOAuthStore(oauth: database.oauth, accounts: database.accounts), policy: OAuthPolicy(configuration), runtime: .system)
    }

    /// What a new client is, before it is stored.
    public struct Registration: Sendable {
        public var name: String
        public var redirectURIs: [String]
        public var isPublic = false
        public var postLogoutRedirectURIs: [String] = []
        public var jwksURI: String? = nil
        public var authorizationDetailsTypes: [String] = []
        public var idTokenAlg = "ES256"
        /// `--auth-method`; nil: `private_key_jwt` with a jwks_uri, `none` for a public client, else
        /// `client_secret_basic` (RFC 7591 §2's default).
        public var authMethod: OAuthClientAuthMethod? = nil
        /// `--pkce optional` (a confidential client only): requests without PKCE carry a nonce.
        public var pkceRequired = true
        /// `--grant-type ciba …` (`OAuthClientService.cibaRegistration`); nil: no CIBA grant.
        public var ciba: CIBARegistration? = nil
        /// `--dpop required`: token requests without a DPoP proof are refused.
        public var dpopRequired = false
        /// `--profile fapi2` (`checkProfile`); nil: none.
        public var profile: OAuthClientProfile? = nil

        public init(name: String, redirectURIs: [String]) {
            self.name = name
            self.redirectURIs = redirectURIs
        }
    }

    /// A stored client and, for a confidential one, its secret (shown this once).
    public struct Created: Sendable {
        public let client: OAuthClientRecord
        public let secret: String?
    }

    public func add(_ r: Registration, by admin: AdminCaller) throws(ServiceError) -> Created {
        try validate(name: r.name, redirectURIs: r.redirectURIs, isPublic: r.isPublic, postLogout: r.postLogoutRedirectURIs,
                     jwksURI: r.jwksURI, types: r.authorizationDetailsTypes, idTokenAlg: r.idTokenAlg)
        let method = try Self.authMethod(r)
        let id = "lkc_" + runtime.identifier()
        // SPEC "Clients": only a client that authenticates with a secret gets one; a private_key_jwt
        // client proves itself with its keys alone.
        let usesSecret = method == .clientSecretBasic || method == .clientSecretPost
        let secret = usesSecret ? "lks_" + Base64URL.encode(runtime.random(32)) : nil
        try checkCIBAEndpoint(r.ciba)
        var record = OAuthClientRecord(id: id, name: r.name, secretHash: secret.map { Digest.sha256(Array($0.utf8)) },
                                       redirectURIs: r.redirectURIs, postLogoutRedirectURIs: r.postLogoutRedirectURIs, jwksURI: r.jwksURI,
                                       authorizationDetailsTypes: r.authorizationDetailsTypes, idTokenAlg: r.idTokenAlg, authMethod: method,
                                       pkceRequired: r.pkceRequired)
        record.ciba = r.ciba
        record.dpopRequired = r.dpopRequired
        record.profile = r.profile
        let audit = admin.record(.clientAdded, subject: id, detail: Self.auditDetail(record))
        let stored = try storage { () throws(StorageError) in try store.insertClient(record, audit: audit, redeeming: admin.redemption) }
        invalidate()
        return Created(client: stored, secret: secret)
    }

    /// The registered method, and the combinations SPEC refuses (exit 64 / 400 `invalid_request`).
    public static func authMethod(_ r: Registration) throws(ServiceError) -> OAuthClientAuthMethod {
        let method = r.authMethod ?? (r.isPublic ? .none : r.jwksURI != nil ? .privateKeyJWT : .clientSecretBasic)
        switch method {
        case .none:
            guard r.isPublic else { throw ServiceError.invalid("auth method none is for a public client (--public)") }
        case .privateKeyJWT:
            guard !r.isPublic, r.jwksURI != nil else { throw ServiceError.invalid("private_key_jwt needs a confidential client with a jwks_uri") }
        case .clientSecretBasic, .clientSecretPost:
            guard !r.isPublic else { throw ServiceError.invalid("a public client has no secret (auth method none)") }
        }
        // RFC 9700 §2.1.1: only a client that authenticates may go without PKCE (with a nonce instead).
        guard r.pkceRequired || method != .none else { throw ServiceError.invalid("--pkce optional is for a confidential client") }
        try checkCIBA(r.ciba, isPublic: r.isPublic)
        try checkProfile(r.profile, isPublic: r.isPublic, idTokenAlg: r.idTokenAlg, method: method, pkceRequired: r.pkceRequired)
        return method
    }

    public func list() throws(ServiceError) -> [OAuthClientRecord] { try cached().all }

    /// A client from the cache; one it does not hold yet is read (a client is usable at once on every
    /// instance, SPEC "Clients", even before the change feed's notice arrives).
    public func client(id: String) throws(ServiceError) -> OAuthClientRecord? {
        guard Self.isClientId(id) else { return nil }
        if let hit = try cached().byId[id] { return hit }
        let read = try storage { () throws(StorageError) in try store.client(id: id) }
        if read != nil { invalidate() }
        return read
    }

    /// Removes the client; its OAuth sessions end with it (the ids, for the revoked-session set).
    public func remove(id: String, by admin: AdminCaller) throws(ServiceError) -> [String] {
        guard Self.isClientId(id) else { throw ServiceError.notFound("client") }
        let audit = admin.record(.clientRemoved, subject: id)
        let ended: [String]?
        defer { invalidate() }
        do throws(StorageError) { ended = try store.deleteClient(id: id, audit: audit, redeeming: admin.redemption) } catch {
            if case .notFound = error { throw ServiceError.notFound("client") }
            throw ServiceError(error)
        }
        guard let ended else { throw ServiceError.notFound("client") }
        return ended
    }

    /// `PATCH /admin/v1/clients/{id}`: `name`, `redirectUris`, `postLogoutRedirectUris`, `jwksUri`,
    /// `authorizationDetailsTypes`, `idTokenSignedResponseAlg`, each replacing what is stored.
    func update(id: String, body: JSONValue, by admin: AdminCaller) throws(ServiceError) -> OAuthClientRecord {
        guard case .object = body else { throw ServiceError.invalid("the body must be a JSON object") }
        guard var c = try client(id: id) else { throw ServiceError.notFound("client") }
        if let v = body["name"] { guard let s = v.stringValue else { throw ServiceError.invalid("name must be a string") }; c.name = s }
        if let v = body["redirectUris"] { c.redirectURIs = try Self.strings(v, "redirectUris") }
        if let v = body["postLogoutRedirectUris"] { c.postLogoutRedirectURIs = try Self.strings(v, "postLogoutRedirectUris") }
        if let v = body["jwksUri"] { c.jwksURI = v == .null ? nil : try Self.string(v, "jwksUri") }
        if let v = body["authorizationDetailsTypes"] { c.authorizationDetailsTypes = try Self.strings(v, "authorizationDetailsTypes") }
        if let v = body["idTokenSignedResponseAlg"] { c.idTokenAlg = try Self.string(v, "idTokenSignedResponseAlg") }
        if let v = body["pkceRequired"] {
            guard let b = v.boolValue, b || !c.isPublic else { throw ServiceError.invalid("pkceRequired must be a boolean, and true for a public client") }
            c.pkceRequired = b
        }
        c.ciba = try Self.cibaMembers(body, current: c.ciba)
        try Self.checkCIBA(c.ciba, isPublic: c.isPublic)
        try checkCIBAEndpoint(c.ciba)
        if let v = body["dpopBoundAccessTokens"] {
            guard let b = v.boolValue else { throw ServiceError.invalid("dpopBoundAccessTokens must be a boolean") }
            c.dpopRequired = b
        }
        if let v = body["profile"] { c.profile = try Self.profileMember(v) }
        try Self.checkProfile(c.profile, isPublic: c.isPublic, idTokenAlg: c.idTokenAlg, method: c.authMethod, pkceRequired: c.pkceRequired)
        try validate(name: c.name, redirectURIs: c.redirectURIs, isPublic: c.isPublic, postLogout: c.postLogoutRedirectURIs, jwksURI: c.jwksURI,
                     types: c.authorizationDetailsTypes, idTokenAlg: c.idTokenAlg)
        let audit = admin.record(.clientUpdated, subject: id, detail: Self.auditDetail(c))
        let client = c
        defer { invalidate() }
        guard try storage({ () throws(StorageError) in try store.updateClient(client, audit: audit, redeeming: admin.redemption) }) else {
            throw ServiceError.notFound("client")
        }
        return c
    }

    /// `POST /admin/v1/clients` body → a registration.
    static func registration(_ body: JSONValue) throws(ServiceError) -> Registration {
        guard let name = body["name"]?.stringValue else { throw ServiceError.invalid("name is required") }
        guard let uris = body["redirectUris"] else { throw ServiceError.invalid("redirectUris is required") }
        var r = Registration(name: name, redirectURIs: try strings(uris, "redirectUris"))
        if let v = body["public"] { guard let b = v.boolValue else { throw ServiceError.invalid("public must be a boolean") }; r.isPublic = b }
        if let v = body["postLogoutRedirectUris"] { r.postLogoutRedirectURIs = try strings(v, "postLogoutRedirectUris") }
        if let v = body["jwksUri"], v != .null { r.jwksURI = try string(v, "jwksUri") }
        if let v = body["authorizationDetailsTypes"] { r.authorizationDetailsTypes = try strings(v, "authorizationDetailsTypes") }
        if let v = body["idTokenSignedResponseAlg"] { r.idTokenAlg = try string(v, "idTokenSignedResponseAlg") }
        if let v = body["pkceRequired"] {
            guard let b = v.boolValue else { throw ServiceError.invalid("pkceRequired must be a boolean") }
            r.pkceRequired = b
        }
        if let v = body["dpopBoundAccessTokens"] {
            guard let b = v.boolValue else { throw ServiceError.invalid("dpopBoundAccessTokens must be a boolean") }
            r.dpopRequired = b
        }
        if let v = body["tokenEndpointAuthMethod"], v != .null {
            guard let method = v.stringValue.flatMap(OAuthClientAuthMethod.init(rawValue:)) else {
                throw ServiceError.invalid("tokenEndpointAuthMethod must be client_secret_basic, client_secret_post, private_key_jwt or none")
            }
            r.authMethod = method
        }
        r.ciba = try cibaMembers(body, current: nil)
        if let v = body["profile"] { r.profile = try profileMember(v) }
        _ = try authMethod(r)
        return r
    }

    func validate(name: String, redirectURIs: [String], isPublic: Bool, postLogout: [String], jwksURI: String?, types: [String],
                  idTokenAlg: String) throws(ServiceError) {
        guard !name.isEmpty, name.utf8.count <= 200, !name.contains(where: { $0.asciiValue.map { $0 < 0x20 } ?? false }) else {
            throw ServiceError.invalid("name must be 1…200 printable characters")
        }
        guard !redirectURIs.isEmpty, redirectURIs.count <= 20 else { throw ServiceError.invalid("redirectUris needs 1…20 URIs") }
        for uri in redirectURIs + postLogout where !RedirectURIs.registrable(uri, isPublic: isPublic, developmentMode: policy.developmentMode) {
            throw ServiceError.invalid("\(uri) cannot be a redirect URI (https, or for a public client loopback http://127.0.0.1 or a private-use scheme)")
        }
        for t in types where t.isEmpty || t.utf8.count > 200 { throw ServiceError.invalid("authorizationDetailsTypes holds an empty or over-long type") }
        guard ["ES256", "RS256"].contains(idTokenAlg) else { throw ServiceError.invalid("idTokenSignedResponseAlg must be ES256 or RS256") }
        if let jwksURI {
            // SPEC: a client's jwks_uri is fetched under the webhooks' address rules.
            try policy.jwksAddresses.check(try WebhookURL(parsing: jwksURI))
        }
    }

    static func isClientId(_ id: String) -> Bool {
        id.hasPrefix("lkc_") && id.utf8.count <= 64 && Identifiers.opaque(String(id.dropFirst(4))) != nil
    }

    static func strings(_ v: JSONValue, _ name: String) throws(ServiceError) -> [String] {
        guard let list = v.arrayValue else { throw ServiceError.invalid("\(name) must be an array of strings") }
        var out: [String] = []
        for item in list {
            guard let s = item.stringValue else { throw ServiceError.invalid("\(name) must be an array of strings") }
            out.append(s)
        }
        return out
    }

    static func string(_ v: JSONValue, _ name: String) throws(ServiceError) -> String {
        guard let s = v.stringValue else { throw ServiceError.invalid("\(name) must be a string") }
        return s
    }

    static func auditDetail(_ c: OAuthClientRecord) -> [(key: String, value: JSONValue)] {
        [("name", .string(c.name)), ("redirectUris", .array(c.redirectURIs.map { .string($0) })), ("public", .bool(c.isPublic))]
    }
}
