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
    public var createdAt: Date

    public init(id: String, name: String, secretHash: [UInt8]?, redirectURIs: [String], postLogoutRedirectURIs: [String] = [],
                jwksURI: String? = nil, authorizationDetailsTypes: [String] = [], idTokenAlg: String = "ES256", createdAt: Date = Date(timeIntervalSince1970: 0)) {
        self.id = id
        self.name = name
        self.secretHash = secretHash
        self.redirectURIs = redirectURIs
        self.postLogoutRedirectURIs = postLogoutRedirectURIs
        self.jwksURI = jwksURI
        self.authorizationDetailsTypes = authorizationDetailsTypes
        self.idTokenAlg = idTokenAlg
        self.createdAt = createdAt
    }

    public var isPublic: Bool { secretHash == nil }
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

public enum OAuthCodeOutcome: Sendable {
    case fresh(OAuthCodeRecord)
    /// Used before: the session its first use issued (if any) is revoked now.
    case replayed(revokedFamily: String?)
    case invalid
}

public enum OAuthRefreshOutcome: Sendable {
    case rotated(userId: String, familyId: String, authTime: Date, grant: JSONValue)
    case reused(familyId: String)
    case invalid
}

/// The OpenID Provider's state in PostgreSQL (migration 17): clients, requests, codes, grants and
/// client-assertion `jti`s. Every secret (request ids, codes, refresh tokens, client secrets) is a hash.
public final class OAuthRepository: Sendable {
    let pool: PostgresPool

    init(pool: PostgresPool) { self.pool = pool }

    static let clientColumns = """
        id, name, secret_hash, redirect_uris::text AS redirect_uris, post_logout_redirect_uris::text AS post_logout_redirect_uris, \
        jwks_uri, authorization_details_types::text AS authorization_details_types, id_token_alg, created_at
        """

    static func strings(_ json: String) -> [String] {
        ((try? JSONParser.parse(Array(json.utf8)))?.arrayValue ?? []).compactMap(\.stringValue)
    }

    static func jsonText(_ list: [String]) -> PostgresValue { .json(JSONValue.array(list.map { .string($0) }).text) }

    static func client(_ r: Row) throws -> OAuthClientRecord {
        OAuthClientRecord(id: try r.string("id"), name: try r.string("name"), secretHash: try r.optionalBytes("secret_hash"),
                          redirectURIs: strings(try r.json("redirect_uris")),
                          postLogoutRedirectURIs: strings(try r.json("post_logout_redirect_uris")),
                          jwksURI: try r.optionalString("jwks_uri"),
                          authorizationDetailsTypes: strings(try r.json("authorization_details_types")),
                          idTokenAlg: try r.string("id_token_alg"), createdAt: try r.date("created_at"))
    }

    // MARK: Clients

    public func insertClient(_ c: OAuthClientRecord, audit: AuditRecord, redeeming: StepUpRedemption? = nil) throws(StorageError) -> OAuthClientRecord {
        try pool.runTransaction { t in
            try StepUpRedemption.redeem(redeeming, on: t)
            let row = try t.query("""
                INSERT INTO oauth_clients (id, name, secret_hash, redirect_uris, post_logout_redirect_uris, jwks_uri,
                                           authorization_details_types, id_token_alg)
                VALUES (\(c.id), \(c.name), \(c.secretHash), \(Self.jsonText(c.redirectURIs))::jsonb,
                        \(Self.jsonText(c.postLogoutRedirectURIs))::jsonb, \(c.jwksURI), \(Self.jsonText(c.authorizationDetailsTypes))::jsonb,
                        \(c.idTokenAlg))
                RETURNING \(unsafeRaw: Self.clientColumns)
                """)
            try AuditRepository.write([audit], on: t)
            return try Self.client(row[0])
        }
    }

    public func clients() throws(StorageError) -> [OAuthClientRecord] {
        try pool.run { c in try c.query("SELECT \(unsafeRaw: Self.clientColumns) FROM oauth_clients ORDER BY created_at, id").map(Self.client) }
    }

    public func client(id: String) throws(StorageError) -> OAuthClientRecord? {
        try pool.run { c in try c.query("SELECT \(unsafeRaw: Self.clientColumns) FROM oauth_clients WHERE id = \(id)").first.map(Self.client) }
    }

    /// Replaces the client's mutable fields (the caller read it and changed what the request said).
    public func updateClient(_ c: OAuthClientRecord, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> Bool {
        try pool.runTransaction { t in
            let n = try t.execute("""
                UPDATE oauth_clients SET name = \(c.name), redirect_uris = \(Self.jsonText(c.redirectURIs))::jsonb,
                    post_logout_redirect_uris = \(Self.jsonText(c.postLogoutRedirectURIs))::jsonb, jwks_uri = \(c.jwksURI),
                    authorization_details_types = \(Self.jsonText(c.authorizationDetailsTypes))::jsonb, id_token_alg = \(c.idTokenAlg)
                WHERE id = \(c.id)
                """)
            guard n > 0 else { return false }
            try StepUpRedemption.redeem(redeeming, on: t)
            try AuditRepository.write([audit], on: t)
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

    public func storeRequest(hash: [UInt8], kind: String, clientId: String, params: JSONValue, ttlSeconds: Int) throws(StorageError) {
        try pool.run { c in
            _ = try c.execute("DELETE FROM oauth_requests WHERE expires_at < now() - interval '1 hour'")
            _ = try c.execute("""
                INSERT INTO oauth_requests (hash, kind, client_id, params, expires_at)
                VALUES (\(hash), \(kind), \(clientId), \(PostgresValue.json(params.text))::jsonb, now() + make_interval(secs => \(ttlSeconds)))
                """)
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

    /// A pushed request (RFC 9126), used up by the authorization request that names it.
    public func consumePushed(hash: [UInt8], clientId: String) throws(StorageError) -> OAuthRequestRecord? {
        try pool.run { c in
            try c.query("""
                UPDATE oauth_requests SET used_at = now()
                WHERE hash = \(hash) AND kind = 'par' AND client_id = \(clientId) AND used_at IS NULL AND expires_at > now()
                RETURNING client_id, params::text AS params, created_at
                """).first.map(Self.request)
        }
    }

    /// Uses the request up (approve or deny), in one transaction with the step-up's redemption, the
    /// code (approve), the audit line and the events. False: unknown, used or expired (nothing written).
    public func finish(requestHash: [UInt8], code: (hash: [UInt8], clientId: String, userId: String, grant: JSONValue, ttlSeconds: Int)?,
                       redeeming: StepUpRedemption?, audit: AuditRecord, events: [OutboxEvent]) throws(StorageError) -> Bool {
        try pool.runTransaction { t in
            let used = try t.execute("""
                UPDATE oauth_requests SET used_at = now()
                WHERE hash = \(requestHash) AND kind = 'authorize' AND used_at IS NULL AND expires_at > now()
                """)
            guard used > 0 else { return false }
            try StepUpRedemption.redeem(redeeming, on: t)
            if let code {
                _ = try t.execute("DELETE FROM oauth_codes WHERE expires_at < now() - interval '1 hour' AND family_id IS NULL")
                _ = try t.execute("""
                    INSERT INTO oauth_codes (hash, client_id, user_id, grant_data, expires_at)
                    VALUES (\(code.hash), \(code.clientId), \(code.userId), \(PostgresValue.json(code.grant.text))::jsonb,
                            now() + make_interval(secs => \(code.ttlSeconds)))
                    """)
            }
            try AuditRepository.write([audit], on: t)
            try OutboxRepository.write(events, on: t)
            return true
        }
    }

    // MARK: Codes and grants

    /// RFC 6749 §4.1.2: a code is used once. A second use revokes the session the first issued.
    public func consumeCode(hash: [UInt8]) throws(StorageError) -> OAuthCodeOutcome {
        try pool.runTransaction { t in
            guard let row = try t.query("""
                SELECT client_id, user_id, grant_data::text AS grant_data, used_at, family_id, expires_at > now() AS live
                FROM oauth_codes WHERE hash = \(hash) FOR UPDATE
                """).first else { return OAuthCodeOutcome.invalid }
            if try !row.isNull("used_at") {
                _ = try t.execute("UPDATE oauth_codes SET replayed_at = now() WHERE hash = \(hash)")
                let family = try row.optionalString("family_id")
                if let family {
                    _ = try t.execute("UPDATE refresh_families SET revoked_at = now() WHERE id = \(family) AND revoked_at IS NULL")
                }
                return .replayed(revokedFamily: family)
            }
            _ = try t.execute("UPDATE oauth_codes SET used_at = now() WHERE hash = \(hash)")
            guard try row.bool("live") else { return .invalid }
            return .fresh(OAuthCodeRecord(clientId: try row.string("client_id"), userId: try row.string("user_id"),
                                          grant: (try? JSONParser.parse(Array(try row.json("grant_data").utf8))) ?? .object([])))
        }
    }

    /// Starts the OAuth session a code's first use issues (family of method `oauth`, its first refresh
    /// token, the grant), unless the code was replayed meanwhile (false, nothing written).
    public func startGrant(codeHash: [UInt8], session: NewSession, clientId: String, grant: JSONValue) throws(StorageError) -> Bool {
        try pool.runTransaction { t in
            let n = try t.execute("""
                UPDATE oauth_codes SET family_id = \(session.familyId) WHERE hash = \(codeHash) AND replayed_at IS NULL
                """)
            guard n > 0 else { return false }
            _ = try t.query(SQL.with(SessionRepository.ctes(session, from: nil), "SELECT hash FROM tok"))
            _ = try t.execute("""
                INSERT INTO oauth_grants (family_id, client_id, grant_data)
                VALUES (\(session.familyId), \(clientId), \(PostgresValue.json(grant.text))::jsonb)
                """)
            return true
        }
    }

    /// RFC 6749 §6 with rotation at the token endpoint: only the client's own OAuth sessions; a token
    /// presented twice revokes its family (RFC 9700 §4.14.2).
    public func rotate(hash: [UInt8], newHash: [UInt8], clientId: String, ttlSeconds: Int) throws(StorageError) -> OAuthRefreshOutcome {
        try pool.runTransaction { t in
            let used = try t.query("""
                UPDATE refresh_tokens r SET used_at = now() FROM refresh_families f, oauth_grants g
                WHERE r.hash = \(hash) AND r.used_at IS NULL AND r.expires_at > now() AND f.id = r.family_id AND f.revoked_at IS NULL
                  AND f.method = 'oauth' AND g.family_id = f.id AND g.client_id = \(clientId)
                RETURNING r.family_id, f.user_id, f.auth_time, g.grant_data::text AS grant_data
                """)
            if let row = used.first {
                let family = try row.string("family_id")
                _ = try t.execute("UPDATE refresh_families SET last_used_at = now() WHERE id = \(family)")
                _ = try t.execute("""
                    INSERT INTO refresh_tokens (hash, family_id, expires_at)
                    VALUES (\(newHash), \(family), now() + make_interval(secs => \(ttlSeconds)))
                    """)
                return .rotated(userId: try row.string("user_id"), familyId: family, authTime: try row.date("auth_time"),
                                grant: (try? JSONParser.parse(Array(try row.json("grant_data").utf8))) ?? .object([]))
            }
            let reused = try t.query("""
                UPDATE refresh_families SET revoked_at = now()
                WHERE id = (SELECT r.family_id FROM refresh_tokens r JOIN oauth_grants g ON g.family_id = r.family_id
                            WHERE r.hash = \(hash) AND r.used_at IS NOT NULL AND g.client_id = \(clientId))
                  AND revoked_at IS NULL
                RETURNING id
                """)
            if let row = reused.first { return .reused(familyId: try row.string("id")) }
            return .invalid
        }
    }

    /// RFC 7009: revokes the OAuth session a refresh token of this client belongs to.
    public func revoke(refreshHash: [UInt8], clientId: String) throws(StorageError) -> [String] {
        try pool.run { c in
            try c.query("""
                UPDATE refresh_families SET revoked_at = now()
                WHERE id = (SELECT r.family_id FROM refresh_tokens r JOIN oauth_grants g ON g.family_id = r.family_id
                            WHERE r.hash = \(refreshHash) AND g.client_id = \(clientId))
                  AND revoked_at IS NULL
                RETURNING id
                """).map { try $0.string("id") }
        }
    }

    /// OpenID RP-Initiated Logout: ends the client's OAuth session `familyId` of `userId`.
    public func endSession(familyId: String, userId: String, clientId: String) throws(StorageError) -> Bool {
        try pool.run { c in
            try c.execute("""
                UPDATE refresh_families SET revoked_at = now()
                WHERE id = \(familyId) AND user_id = \(userId) AND method = 'oauth' AND revoked_at IS NULL
                  AND id IN (SELECT family_id FROM oauth_grants WHERE client_id = \(clientId))
                """) > 0
        }
    }

    /// Records a client assertion's `jti` (RFC 7523 §3 item 7): false when it was seen before.
    public func recordAssertion(clientId: String, jtiHash: [UInt8], ttlSeconds: Int) throws(StorageError) -> Bool {
        try pool.run { c in
            _ = try c.execute("DELETE FROM oauth_assertion_jtis WHERE expires_at < now()")
            return try c.execute("""
                INSERT INTO oauth_assertion_jtis (client_id, jti_hash, expires_at)
                VALUES (\(clientId), \(jtiHash), now() + make_interval(secs => \(ttlSeconds))) ON CONFLICT DO NOTHING
                """) > 0
        }
    }

    /// An audit line on its own (a refused code replay, a token issue).
    public func audit(_ record: AuditRecord) throws(StorageError) {
        try pool.run { c in try AuditRepository.write([record], on: c) }
    }
}
