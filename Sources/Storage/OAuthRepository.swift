import Foundation
import JSON
import PostgreSQL

/// A registered OpenID client (SPEC "OpenID Provider", "Clients"). The secret is only ever a hash.
public struct OAuthClientRecord: Sendable, Equatable {
    public let id: String
    public var name: String
    /// SHA-256 of the client secret; nil: a public client (token endpoint auth `none`).
    public var secretHash: [UInt8]?
    public var redirectURIs: [String]
    public var postLogoutRedirectURIs: [String]
    public var jwksURI: String?
    public var authorizationDetailsTypes: [String]
    /// `ES256` (default) or `RS256` (`id_token_signed_response_alg`).
    public var idTokenAlg: String
    /// `token_endpoint_auth_method`: the one way this client authenticates (SPEC "Client authentication").
    public var authMethod: OAuthClientAuthMethod
    /// False only for a confidential client registered with `--pkce optional`.
    public var pkceRequired: Bool
    public var createdAt: Date
    /// Registered for the CIBA grant (SPEC "CIBA"): nil for every other client.
    public var ciba: CIBARegistration? = nil
    /// `--dpop required` (`dpop_bound_access_tokens`): every token request carries a DPoP proof.
    public var dpopRequired = false
    /// `--profile fapi2` (SPEC "FAPI 2.0 Security Profile"); nil: none.
    public var profile: OAuthClientProfile? = nil

    public init(id: String, name: String, secretHash: [UInt8]?, redirectURIs: [String], postLogoutRedirectURIs: [String] = [],
                jwksURI: String? = nil, authorizationDetailsTypes: [String] = [], idTokenAlg: String = "ES256",
                authMethod: OAuthClientAuthMethod? = nil, pkceRequired: Bool = true, createdAt: Date = Date(timeIntervalSince1970: 0)) {
        self.id = id
        self.name = name
        self.secretHash = secretHash
        self.redirectURIs = redirectURIs
        self.postLogoutRedirectURIs = postLogoutRedirectURIs
        self.jwksURI = jwksURI
        self.authorizationDetailsTypes = authorizationDetailsTypes
        self.idTokenAlg = idTokenAlg
        self.authMethod = authMethod ?? (jwksURI != nil ? .privateKeyJWT : secretHash == nil ? .none : .clientSecretBasic)
        self.pkceRequired = pkceRequired
        self.createdAt = createdAt
    }

    /// A public client (RFC 6749 §2.1): it cannot authenticate.
    public var isPublic: Bool { authMethod == .none }
    public var isFAPI2: Bool { profile == .fapi2 }
}

/// RFC 7591 `token_endpoint_auth_method` values Latchkey accepts.
public enum OAuthClientAuthMethod: String, Sendable, CaseIterable {
    case clientSecretBasic = "client_secret_basic"
    case clientSecretPost = "client_secret_post"
    case privateKeyJWT = "private_key_jwt"
    case none
}

/// What approved a grant (SPEC "Grants live and die with what approved them"): the approving
/// session (a refresh family) and the passkey (base64url id) or device key. Without a step-up the
/// passkey is the one that began the approving session.
public struct OAuthApprovers: Sendable, Equatable {
    public let familyId: String
    public let sessionCredential: [UInt8]?
    /// The step-up that approved with its own key, if any (its receipt names the key).
    public let stepUpJTI: String?

    public init(familyId: String, sessionCredential: [UInt8]?, stepUpJTI: String?) {
        self.familyId = familyId
        self.sessionCredential = sessionCredential
        self.stepUpJTI = stepUpJTI
    }
}

/// What storing an authorization request did.
public enum OAuthRequestStore: Sendable, Equatable {
    case stored
    /// An identical request is pending: its id stands.
    case pending
    /// The client address or the client has as many pending requests as it may.
    case limited
    /// The pushed request it stands for was used up by another request first: nothing stored.
    case pushedGone
}

/// A stored authorization request (or pushed request) as the web page and approve read it.
public struct OAuthRequestRecord: Sendable {
    public let clientId: String
    public let params: JSONValue
    public let createdAt: Date
}

/// A code's first use: what the approval granted.
public struct OAuthCodeRecord: Sendable {
    public let clientId: String
    public let userId: String
    public let grant: JSONValue
}

public enum OAuthRefreshOutcome: Sendable {
    case rotated(userId: String, familyId: String, authTime: Date, grant: JSONValue)
    case reused(familyId: String)
    /// The refresh asked for more than the grant: nothing was used or written.
    case scopeExceeded
    case invalid
    /// The request's DPoP proof was seen before (RFC 9449 §11.1): nothing was used or written.
    case proofReplayed
}

/// A DPoP proof that came with a token request (RFC 9449 §5): recorded in the request's one
/// statement (`DPoPProofRepository.recording`), and the key the tokens are bound to.
public struct DPoPBinding: Sendable {
    public let replay: DPoPReplayKey
    /// RFC 7638 thumbprint of the proof's key.
    public let jkt: String
    public init(replay: DPoPReplayKey, jkt: String) { self.replay = replay; self.jkt = jkt }
}

public enum OAuthCodeRedemption: Sendable {
    case started(OAuthCodeRecord)
    /// Used before: the session its first use issued (if any) is revoked now.
    case replayed(revokedFamily: String?)
    /// Unknown, expired, another client's, another redirect URI, or the wrong PKCE verifier.
    case invalid(String)
    /// The approving session was ended by a security revocation, or the approving passkey or device key revoked.
    case approverRevoked
    /// The request's DPoP proof was seen before: the code was left as it was.
    case proofReplayed
}

/// The OpenID Provider's state in PostgreSQL (migration 17): clients, requests, codes, grants and
/// client-assertion `jti`s. Every secret (request ids, codes, refresh tokens, client secrets) is a hash.
public final class OAuthRepository: Sendable {
    let pool: PostgresPool

    init(pool: PostgresPool) { self.pool = pool }

    static let clientColumns = """
        id, name, secret_hash, redirect_uris::text AS redirect_uris, post_logout_redirect_uris::text AS post_logout_redirect_uris, \
        jwks_uri, authorization_details_types::text AS authorization_details_types, id_token_alg, auth_method, pkce_required, created_at, \
        ciba::text AS ciba, dpop_bound_access_tokens, profile
        """

    static func strings(_ json: String) -> [String] {
        ((try? JSONParser.parse(Array(json.utf8)))?.arrayValue ?? []).compactMap(\.stringValue)
    }

    static func jsonText(_ list: [String]) -> PostgresValue { .json(JSONValue.array(list.map { .string($0) }).text) }

    static func client(_ r: Row) throws -> OAuthClientRecord {
        var c = OAuthClientRecord(id: try r.string("id"), name: try r.string("name"), secretHash: try r.optionalBytes("secret_hash"),
                          redirectURIs: strings(try r.json("redirect_uris")),
                          postLogoutRedirectURIs: strings(try r.json("post_logout_redirect_uris")),
                          jwksURI: try r.optionalString("jwks_uri"),
                          authorizationDetailsTypes: strings(try r.json("authorization_details_types")),
                          idTokenAlg: try r.string("id_token_alg"), authMethod: try r.value("auth_method"),
                          pkceRequired: try r.bool("pkce_required"), createdAt: try r.date("created_at"))
        c.ciba = CIBARegistration(json: try r.optionalString("ciba"))
        c.dpopRequired = try r.bool("dpop_bound_access_tokens")
        c.profile = try r.optionalString("profile").flatMap(OAuthClientProfile.init(rawValue:))
        return c
    }

    // MARK: Clients

    /// One statement: the step-up used up, then (only if it held) the client and its audit line.
    public func insertClient(_ c: OAuthClientRecord, audit: AuditRecord, redeeming: StepUpRedemption? = nil) throws(StorageError) -> OAuthClientRecord {
        let statement = SQL.with(StepUpRedemption.cte(redeeming) + [("inserted", """
            INSERT INTO oauth_clients (id, name, secret_hash, redirect_uris, post_logout_redirect_uris, jwks_uri,
                                       authorization_details_types, id_token_alg, auth_method, pkce_required, ciba, dpop_bound_access_tokens,
                                       profile)
            SELECT \(c.id)::text, \(c.name)::text, \(c.secretHash)::bytea, \(Self.jsonText(c.redirectURIs))::jsonb,
                   \(Self.jsonText(c.postLogoutRedirectURIs))::jsonb, \(c.jwksURI)::text, \(Self.jsonText(c.authorizationDetailsTypes))::jsonb,
                   \(c.idTokenAlg)::text, \(c.authMethod.rawValue)::text, \(c.pkceRequired)::boolean, \(c.ciba?.storedJSON)::jsonb,
                   \(c.dpopRequired)::boolean, \(c.profile?.rawValue)::text\(fragment: StepUpRedemption.gate(redeeming))
            RETURNING \(unsafeRaw: Self.clientColumns)
            """)] + AuditRepository.cte([audit], onlyIf: "inserted"),
            "SELECT inserted.*, \(fragment: StepUpRedemption.held(redeeming)) AS redeemed FROM (SELECT 1) AS one LEFT JOIN inserted ON true")
        return try pool.run { connection in
            let row = try connection.query(statement)[0]
            guard try row.bool("redeemed") else { throw StorageError.conflict(.stepUpUsed) }
            return try Self.client(row)
        }
    }

    public func clients() throws(StorageError) -> [OAuthClientRecord] {
        try pool.run { c in try c.query("SELECT \(unsafeRaw: Self.clientColumns) FROM oauth_clients ORDER BY created_at, id").map(Self.client) }
    }

    public func client(id: String) throws(StorageError) -> OAuthClientRecord? {
        try pool.run { c in try c.query("SELECT \(unsafeRaw: Self.clientColumns) FROM oauth_clients WHERE id = \(id)").first.map(Self.client) }
    }

    /// Replaces the client's mutable fields (the caller read it and changed what the request said).
    /// One statement: the client found (locked), the step-up used up only if it is there (an absent
    /// client spends nothing), then the change and its audit line only if that held.
    public func updateClient(_ c: OAuthClientRecord, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> Bool {
        let statement = SQL.with([("target", "SELECT id FROM oauth_clients WHERE id = \(c.id) FOR UPDATE")]
            + StepUpRedemption.cte(redeeming, onlyIf: "target") + [("updated", """
            UPDATE oauth_clients SET name = \(c.name), redirect_uris = \(Self.jsonText(c.redirectURIs))::jsonb,
                post_logout_redirect_uris = \(Self.jsonText(c.postLogoutRedirectURIs))::jsonb, jwks_uri = \(c.jwksURI),
                authorization_details_types = \(Self.jsonText(c.authorizationDetailsTypes))::jsonb, id_token_alg = \(c.idTokenAlg),
                pkce_required = \(c.pkceRequired), ciba = \(c.ciba?.storedJSON)::jsonb,
                dpop_bound_access_tokens = \(c.dpopRequired), profile = \(c.profile?.rawValue)::text
            \(fragment: StepUpRedemption.gate(redeeming, and: "id IN (SELECT id FROM target)"))
            RETURNING id
            """)] + AuditRepository.cte([audit], onlyIf: "updated"),
            """
            SELECT EXISTS (SELECT 1 FROM target) AS found, \(fragment: StepUpRedemption.held(redeeming)) AS redeemed
            """)
        return try pool.run { connection in
            let row = try connection.query(statement)[0]
            guard try row.bool("found") else { return false }
            guard try row.bool("redeemed") else { throw StorageError.conflict(.stepUpUsed) }
            return true
        }
    }

    /// Removes the client and, in the same transaction, ends every session it holds.
    public func deleteClient(id: String, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> [String]? {
        try pool.runTransaction { t in
            let ended = try t.query("""
                UPDATE refresh_families SET revoked_at = now()
                WHERE id IN (SELECT family_id FROM oauth_grants WHERE client_id = \(id)) AND revoked_at IS NULL RETURNING id
                """).map { try $0.string("id") }
            let n = try t.execute("DELETE FROM oauth_clients WHERE id = \(id)")
            guard n > 0 else { throw StorageError.notFound }
            try StepUpRedemption.redeem(redeeming, on: t)
            try AuditRepository.write([audit], on: t)
            return ended
        }
    }

    // MARK: Requests

    /// A pushed request (RFC 9126) stored with its DPoP proof's `jti` in one statement; false: a replay.
    public func storeRequest(hash: [UInt8], kind: String, clientId: String, params: JSONValue, ttlSeconds: Int,
                             dpop: DPoPReplayKey? = nil) throws(StorageError) -> Bool {
        let proof: SQL = dpop.map { DPoPProofRepository.recording($0) } ?? "SELECT true AS fresh"
        return try pool.run { c in
            try c.query("""
                WITH proof AS (\(fragment: proof)),
                ins AS (
                    INSERT INTO oauth_requests (hash, kind, client_id, params, expires_at)
                    SELECT \(hash)::bytea, \(kind)::text, \(clientId)::text, \(PostgresValue.json(params.text))::jsonb,
                           now() + make_interval(secs => \(ttlSeconds))
                    WHERE EXISTS (SELECT 1 FROM proof)
                    RETURNING 1)
                SELECT EXISTS (SELECT 1 FROM ins) AS stored
                """)[0].bool("stored")
        }
    }

    /// Stores an authorization request whose id is derived from its parameters (SPEC "Limits"), in
    /// one statement: an identical pending one is `.pending` (nothing written); otherwise it is
    /// stored (a used or expired row of the same id starts anew) while `clientAddress` stored fewer
    /// than `perAddressPerMinute` in the last minute (nil: no such limit) and the client has fewer
    /// than `perClient` pending, else `.limited`. Requests an hour past their expiry are deleted.
    public func storeAuthorizationRequest(hash: [UInt8], clientId: String, params: JSONValue, ttlSeconds: Int, clientAddress: String,
                                          perAddressPerMinute: Int?, perClient: Int,
                                          usingUpPushed pushed: [UInt8]? = nil) throws(StorageError) -> OAuthRequestStore {
        // With a pushed request, storing and using it up are one statement: a second use of its
        // request_uri, however close, stores nothing.
        let used = Self.pushedUsedUp(pushed ?? [])
        let usingUp: SQL = pushed == nil ? "" : "\(unsafeRaw: used.name) AS (\(fragment: used.sql)),\n"
        let won: SQL = pushed == nil ? "true" : "EXISTS (SELECT 1 FROM \(unsafeRaw: used.name))"
        return try pool.run { c in
            let row = try c.query("""
                WITH \(fragment: usingUp)gone AS (DELETE FROM oauth_requests WHERE expires_at < now() - interval '1 hour'),
                existing AS (SELECT 1 FROM oauth_requests WHERE hash = \(hash) AND used_at IS NULL AND expires_at > now()),
                room AS (
                    SELECT NOT EXISTS (SELECT 1 FROM existing) AND \(fragment: won)
                       AND (\(perAddressPerMinute)::int IS NULL OR (SELECT count(*) FROM oauth_requests
                            WHERE client_address = \(clientAddress) AND created_at > now() - interval '1 minute') < \(perAddressPerMinute)::int)
                       AND (SELECT count(*) FROM (SELECT 1 FROM oauth_requests WHERE client_id = \(clientId) AND used_at IS NULL
                            AND expires_at > now() LIMIT \(perClient)) AS p) < \(perClient) AS ok),
                ins AS (
                    INSERT INTO oauth_requests (hash, kind, client_id, params, expires_at, client_address)
                    SELECT \(hash), 'authorize', \(clientId), \(PostgresValue.json(params.text))::jsonb,
                           now() + make_interval(secs => \(ttlSeconds)), \(clientAddress)
                    FROM room WHERE ok
                    ON CONFLICT (hash) DO UPDATE SET used_at = NULL, expires_at = EXCLUDED.expires_at, created_at = now(),
                        params = EXCLUDED.params, client_address = EXCLUDED.client_address
                    RETURNING 1)
                SELECT EXISTS (SELECT 1 FROM existing) AS pending, EXISTS (SELECT 1 FROM ins) AS stored, \(fragment: won) AS won
                """)[0]
            guard try row.bool("won") else { return OAuthRequestStore.pushedGone }
            if try row.bool("pending") { return OAuthRequestStore.pending }
            return try row.bool("stored") ? .stored : .limited
        }
    }

    /// An unused, unexpired authorization request.
    public func request(hash: [UInt8]) throws(StorageError) -> OAuthRequestRecord? {
        try pool.run { c in
            try c.query("""
                SELECT client_id, params::text AS params, created_at FROM oauth_requests
                WHERE hash = \(hash) AND kind = 'authorize' AND used_at IS NULL AND expires_at > now()
                """).first.map(Self.request)
        }
    }

    static func request(_ r: Row) throws -> OAuthRequestRecord {
        OAuthRequestRecord(clientId: try r.string("client_id"),
                           params: (try? JSONParser.parse(Array(try r.json("params").utf8))) ?? .object([]),
                           createdAt: try r.date("created_at"))
    }

    /// A pushed request (RFC 9126) of `clientId`, unused and unexpired. Read only: the statement
    /// that stores the authorization request it stands for uses it up (`usingUpPushed`).
    public func pushed(hash: [UInt8], clientId: String) throws(StorageError) -> OAuthRequestRecord? {
        try pool.run { c in
            try c.query("""
                SELECT client_id, params::text AS params, created_at FROM oauth_requests
                WHERE hash = \(hash) AND kind = 'par' AND client_id = \(clientId) AND used_at IS NULL AND expires_at > now()
                """).first.map(Self.request)
        }
    }

    /// A CTE that uses up the pushed request `hash` (RFC 9126 §2.2: one use), returning a row only
    /// for the statement that won it.
    static func pushedUsedUp(_ hash: [UInt8]) -> (name: String, sql: SQL) {
        ("pushed_used", """
            UPDATE oauth_requests SET used_at = now()
            WHERE hash = \(hash) AND kind = 'par' AND used_at IS NULL AND expires_at > now() RETURNING 1 AS one
            """)
    }

    /// Uses the request up (approve or deny), in one transaction with the step-up's redemption, the
    /// code (approve), the audit line and the events. False: unknown, used or expired (nothing written).
    /// An approval also remembers its approvers with the code and records the consent (`scopes`).
    /// Without `requestHash` (a silent sign-in, SPEC "Silent sign-in") there is no stored request
    /// to use up, and the code is issued only while the account's consent covers `consent` scopes.
    public func finish(requestHash: [UInt8]?, code: (hash: [UInt8], clientId: String, userId: String, grant: JSONValue, ttlSeconds: Int)?,
                       approvers: OAuthApprovers? = nil, consent scopes: [String]? = nil, usingUpPushed pushed: [UInt8]? = nil,
                       redeeming: StepUpRedemption?, audit: AuditRecord, events: [OutboxEvent]) throws(StorageError) -> Bool {
        // One statement: the request used up (or the consent that stands for it), the step-up's
        // receipt redeemed, the code with its approvers, the consent, the audit line and the event —
        // all or nothing. `go` holds a row only when the request is there and the receipt was redeemed.
        var ctes: [(name: String, sql: SQL)] = pushed.map { [Self.pushedUsedUp($0)] } ?? []
        let won: SQL = pushed == nil ? "" : " AND EXISTS (SELECT 1 FROM pushed_used)"
        if let requestHash {
            ctes.append(("pending", """
                SELECT hash FROM oauth_requests
                WHERE hash = \(requestHash) AND kind = 'authorize' AND used_at IS NULL AND expires_at > now() FOR UPDATE
                """))
        } else if let code, let scopes {
            ctes.append(("pending", """
                SELECT user_id FROM oauth_consents WHERE user_id = \(code.userId) AND client_id = \(code.clientId)
                  AND scopes @> \(Self.jsonText(scopes))::jsonb\(fragment: won) FOR SHARE
                """))
        } else {
            return false
        }
        if let r = redeeming {
            ctes.append(("red", StepUpRedemption.use(r, onlyIf: "EXISTS (SELECT 1 FROM pending)")))
            ctes.append(("go", "SELECT 1 AS one FROM pending WHERE EXISTS (SELECT 1 FROM red)"))
        } else {
            ctes.append(("go", "SELECT 1 AS one FROM pending"))
        }
        if let requestHash {
            ctes.append(("used", """
                UPDATE oauth_requests SET used_at = now() WHERE hash = \(requestHash) AND EXISTS (SELECT 1 FROM go) RETURNING hash
                """))
        }
        if let code {
            // The approving key: the step-up's (its receipt names it), else the passkey that began
            // the approving session.
            let credential = approvers?.sessionCredential
            ctes.append(("sweep", "DELETE FROM oauth_codes WHERE expires_at < now() - interval '1 hour' AND family_id IS NULL"))
            ctes.append(("code", """
                INSERT INTO oauth_codes (hash, client_id, user_id, grant_data, expires_at,
                                         approving_family, approving_credential, approving_device_key)
                SELECT \(code.hash), \(code.clientId), \(code.userId), \(PostgresValue.json(code.grant.text))::jsonb,
                       now() + make_interval(secs => \(code.ttlSeconds)), \(approvers?.familyId),
                       CASE WHEN r.method IS NULL THEN latchkey_base64url(\(credential)::bytea) WHEN r.method = 'passkey' THEN r.key_id END,
                       CASE WHEN r.method = 'device-key' THEN r.key_id END
                FROM go LEFT JOIN step_up_receipts r ON r.token_jti = \(approvers?.stepUpJTI)
                RETURNING hash
                """))
            if let scopes, requestHash != nil {
                ctes.append(("consent", """
                    INSERT INTO oauth_consents (user_id, client_id, scopes)
                    SELECT \(code.userId), \(code.clientId), \(Self.jsonText(scopes))::jsonb FROM go
                    ON CONFLICT (user_id, client_id) DO UPDATE SET scopes = (
                        SELECT jsonb_agg(DISTINCT v ORDER BY v) FROM jsonb_array_elements_text(oauth_consents.scopes || EXCLUDED.scopes) AS v),
                        granted_at = now()
                    RETURNING user_id
                    """))
            }
        }
        ctes += AuditRepository.cte([audit], onlyIf: "go") + OutboxRepository.ctes(events, onlyIf: "go")
        let row = try pool.run { c in
            try c.query(SQL.with(ctes, "SELECT EXISTS (SELECT 1 FROM go) AS done, EXISTS (SELECT 1 FROM pending) AS pending"))[0]
        }
        let (done, pending) = ((try? row.bool("done")) ?? false, (try? row.bool("pending")) ?? false)
        if !done, pending, redeeming != nil { throw StorageError.conflict(.stepUpUsed) }
        return done
    }
}
