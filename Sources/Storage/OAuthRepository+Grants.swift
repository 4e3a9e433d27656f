import Foundation
import JSON
import PostgreSQL

/// Codes, grants and their refresh tokens (SPEC "OpenID Provider" → "Tokens", "Grants live and die").
extension OAuthRepository {
    // MARK: Codes and grants

    /// What the token request presents with a code (RFC 6749 §4.1.3, RFC 7636 §4.5).
    public struct CodePresentation: Sendable {
        public let clientId: String
        public let redirectURI: String?
        /// BASE64URL(SHA-256(code_verifier)), or nil when no verifier was sent.
        public let verifierChallenge: String?
        /// The client may go without PKCE (`--pkce optional`).
        public let pkceOptional: Bool

        public init(clientId: String, redirectURI: String?, verifierChallenge: String?, pkceOptional: Bool) {
            self.clientId = clientId
            self.redirectURI = redirectURI
            self.verifierChallenge = verifierChallenge
            self.pkceOptional = pkceOptional
        }
    }

    /// A code's redemption, in one transaction (BEGIN, the code and its approvers read, one write,
    /// COMMIT): used once (RFC 6749 §4.1.2: a second use revokes the session the first issued, with
    /// `replayAudit`); it must be live, the presenting client's, for the same redirect URI, with the
    /// PKCE verifier of its challenge (or, issued without one, none); and what approved it must still
    /// stand (SPEC "Grants live and die": the approvers are locked `FOR SHARE`, so a revocation
    /// running now either commits first and is seen here, or waits for this grant and its cascade
    /// revokes it). Then the `oauth` family (the session), its first refresh token, the grant and
    /// `issuedAudit` (its actor and subject: the code's user) are written. A refused code is used up
    /// all the same.
    public func redeemCode(hash: [UInt8], presented: CodePresentation, familyId: String, refreshHash: [UInt8], ttlSeconds: Int,
                           replayAudit: AuditRecord, issuedAudit: AuditRecord) throws(StorageError) -> OAuthCodeRedemption {
        try pool.runTransaction { t in
            guard let row = try t.query("""
                SELECT c.client_id, c.user_id, c.grant_data::text AS grant_data, c.used_at, c.family_id, c.expires_at > now() AS live,
                       c.approving_family, c.approving_credential, c.approving_device_key,
                       (c.approving_family IS NULL OR EXISTS (SELECT 1 FROM refresh_families f WHERE f.id = c.approving_family
                            AND (f.revoked_at IS NULL OR f.ended_by = 'logout') FOR SHARE))
                   AND (c.approving_credential IS NULL OR EXISTS (SELECT 1 FROM credentials k
                            WHERE k.id = latchkey_from_base64url(c.approving_credential) AND k.revoked_at IS NULL FOR SHARE))
                   AND (c.approving_device_key IS NULL OR EXISTS (SELECT 1 FROM device_keys d
                            WHERE d.id = c.approving_device_key AND d.revoked_at IS NULL FOR SHARE)) AS approvers_live
                FROM oauth_codes c WHERE c.hash = \(hash) FOR UPDATE OF c
                """).first else { return OAuthCodeRedemption.invalid("the code is unknown or expired") }
            if try !row.isNull("used_at") {
                let family = try row.optionalString("family_id")
                let revoked: SQL = family.map { "UPDATE refresh_families SET revoked_at = now() WHERE id = \($0) AND revoked_at IS NULL RETURNING id" }
                    ?? "SELECT NULL::text AS id WHERE false"
                _ = try t.query(SQL.with([("replay", "UPDATE oauth_codes SET replayed_at = now() WHERE hash = \(hash) RETURNING hash"),
                                          ("rev", revoked)]
                                         + AuditRepository.cte([replayAudit.with(detail: [("sessionId", family.map { .string($0) } ?? .null)])]),
                                         "SELECT 1 FROM replay"))
                return .replayed(revokedFamily: family)
            }
            let grant = (try? JSONParser.parse(Array(try row.json("grant_data").utf8))) ?? .object([])
            let challenge = grant["code_challenge"]?.stringValue
            let refusal: String? =
                try !row.bool("live") ? "the code is unknown or expired"
                : try row.string("client_id") != presented.clientId ? "the code was issued to another client"
                : presented.redirectURI == nil || presented.redirectURI != grant["redirect_uri"]?.stringValue
                    ? "redirect_uri does not match the authorization request"
                : challenge.map { !Self.constantTimeEqual($0, presented.verifierChallenge) } ?? (presented.verifierChallenge != nil || !presented.pkceOptional)
                    ? "code_verifier does not match the code_challenge (PKCE S256)"
                : nil
            if let refusal {
                _ = try t.execute("UPDATE oauth_codes SET used_at = now() WHERE hash = \(hash)")
                return .invalid(refusal)
            }
            guard try row.bool("approvers_live") else {
                _ = try t.execute("UPDATE oauth_codes SET used_at = now() WHERE hash = \(hash)")
                return .approverRevoked
            }
            let userId = try row.string("user_id")
            let session = NewSession(familyId: familyId, userId: userId, refreshHash: refreshHash, ttlSeconds: ttlSeconds, method: .oauth,
                                     credentialId: grant["credential_id"]?.stringValue.flatMap(Self.bytes(base64url:)),
                                     authTime: Date(timeIntervalSince1970: grant["auth_time"]?.doubleValue ?? 0))
            let (family, credential, deviceKey) = (try row.optionalString("approving_family"), try row.optionalString("approving_credential"),
                                                   try row.optionalString("approving_device_key"))
            _ = try t.query(SQL.with([("used", "UPDATE oauth_codes SET used_at = now(), family_id = \(familyId) WHERE hash = \(hash) RETURNING hash")]
                                     + SessionRepository.ctes(session, from: "used")
                                     + [("granted", """
                                        INSERT INTO oauth_grants (family_id, client_id, grant_data, approving_family, approving_credential, approving_device_key)
                                        SELECT fam.id, \(presented.clientId), \(PostgresValue.json(grant.text))::jsonb, \(family), \(credential), \(deviceKey)
                                        FROM fam RETURNING family_id
                                        """)]
                                     + AuditRepository.cte([AuditRecord(actor: userId, action: issuedAudit.action, subject: userId,
                                                                        detail: issuedAudit.detail)], onlyIf: "tok"),
                                     "SELECT hash FROM tok"))
            return .started(OAuthCodeRecord(clientId: presented.clientId, userId: userId, grant: grant))
        }
    }

    /// `a` and `b` equal, compared in time independent of where they differ (nil equals nothing).
    static func constantTimeEqual(_ a: String, _ b: String?) -> Bool {
        guard let b else { return false }
        let (x, y) = (Array(a.utf8), Array(b.utf8))
        guard x.count == y.count else { return false }
        return zip(x, y).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    static func bytes(base64url text: String) -> [UInt8]? {
        var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.utf8.count % 4 != 0 { s += "=" }
        return Data(base64Encoded: s).map { Array($0) }
    }

    /// The credential id as step-up receipts and grants spell it (base64url, no padding).
    static func base64url(_ bytes: [UInt8]) -> String {
        var text = Data(bytes).base64EncodedString()
        while text.hasSuffix("=") { text.removeLast() }
        return String(text.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
    }

    /// RFC 6749 §6 with rotation at the token endpoint: only the client's own OAuth sessions; a token
    /// presented twice revokes its family (RFC 9700 §4.14.2).
    /// `scope`: the scopes the refresh asks for (nil: the grant's); more than the grant is
    /// `.scopeExceeded`, and like every refusal it leaves the token as it was (SPEC "Tokens").
    public func rotate(hash: [UInt8], newHash: [UInt8], clientId: String, scope: [String]? = nil,
                       ttlSeconds: Int, reuseAudit: AuditRecord) throws(StorageError) -> OAuthRefreshOutcome {
        let asked: String? = scope?.joined(separator: " ")
        // The rotation is one statement: the token used up, the family's last use (its row lock: a
        // revocation committed meanwhile is seen, one that comes later waits for this refresh) and
        // the next token, only while the family lives.
        let rotated = try pool.run { c in
            try c.query("""
                WITH used AS (
                    UPDATE refresh_tokens r SET used_at = now() FROM refresh_families f, oauth_grants g
                    WHERE r.hash = \(hash) AND r.used_at IS NULL AND r.expires_at > now() AND f.id = r.family_id AND f.revoked_at IS NULL
                      AND f.method = 'oauth' AND g.family_id = f.id AND g.client_id = \(clientId)
                      AND (\(asked)::text IS NULL OR string_to_array(g.grant_data->>'scope', ' ') @> string_to_array(\(asked)::text, ' '))
                    RETURNING r.family_id, f.user_id, f.auth_time, g.grant_data),
                fam AS (UPDATE refresh_families SET last_used_at = now() WHERE id = (SELECT family_id FROM used) AND revoked_at IS NULL
                        RETURNING id),
                tok AS (INSERT INTO refresh_tokens (hash, family_id, expires_at)
                        SELECT \(newHash), fam.id, now() + make_interval(secs => \(ttlSeconds)) FROM fam RETURNING hash)
                SELECT used.family_id, used.user_id, used.auth_time, used.grant_data::text AS grant_data, EXISTS (SELECT 1 FROM tok) AS rotated
                FROM used
                """).first.map { row -> OAuthRefreshOutcome in
                guard try row.bool("rotated") else { return .invalid }
                return .rotated(userId: try row.string("user_id"), familyId: try row.string("family_id"), authTime: try row.date("auth_time"),
                                grant: (try? JSONParser.parse(Array(try row.json("grant_data").utf8))) ?? .object([]))
            }
        }
        if let rotated { return rotated }
        // Refused: a reuse revokes the family (RFC 9700 §4.14.2), with its audit line, in one statement.
        let reused = try pool.run { c in
            try c.query(SQL.with([("reused", """
                UPDATE refresh_families SET revoked_at = now()
                WHERE id = (SELECT r.family_id FROM refresh_tokens r JOIN oauth_grants g ON g.family_id = r.family_id
                            WHERE r.hash = \(hash) AND r.used_at IS NOT NULL AND g.client_id = \(clientId))
                  AND revoked_at IS NULL
                RETURNING id, user_id
                """)] + AuditRepository.cte([AuditTemplate(actor: reuseAudit.actor, action: reuseAudit.action, detail: reuseAudit.detail)
                    .rows(from: "reused", subject: "\(clientId)::text", members: [("sessionId", "reused.id")])]),
                "SELECT id FROM reused")).first.map { try $0.string("id") }
        }
        if let reused { return .reused(familyId: reused) }
        let usable = try pool.run { c in
            try c.query("""
                SELECT 1 FROM refresh_tokens r JOIN refresh_families f ON f.id = r.family_id JOIN oauth_grants g ON g.family_id = f.id
                WHERE r.hash = \(hash) AND r.used_at IS NULL AND r.expires_at > now() AND f.revoked_at IS NULL AND g.client_id = \(clientId)
                """)
        }
        return usable.isEmpty ? .invalid : .scopeExceeded
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

    /// OpenID RP-Initiated Logout: ends the client's OAuth sessions of `userId` that an id_token's
    /// `sid` names — the `oauth` family itself, or those the OP browser session `sid` approved —
    /// as a logout (no cascade). Returns the ids ended.
    public func endSession(sid: String, userId: String, clientId: String) throws(StorageError) -> [String] {
        try pool.run { c in
            try c.query("""
                UPDATE refresh_families SET revoked_at = now(), ended_by = 'logout'
                WHERE user_id = \(userId) AND method = 'oauth' AND revoked_at IS NULL
                  AND id IN (SELECT family_id FROM oauth_grants
                             WHERE client_id = \(clientId) AND (family_id = \(sid) OR grant_data->>'op_sid' = \(sid)))
                RETURNING id
                """).map { try $0.string("id") }
        }
    }

    /// Records a client assertion's `jti` (RFC 7523 §3 item 7): false when it was seen before.
    public func recordAssertion(clientId: String, jtiHash: [UInt8], ttlSeconds: Int) throws(StorageError) -> Bool {
        try pool.run { c in
            try !c.query("""
                WITH gone AS (DELETE FROM oauth_assertion_jtis WHERE expires_at < now())
                INSERT INTO oauth_assertion_jtis (client_id, jti_hash, expires_at)
                VALUES (\(clientId), \(jtiHash), now() + make_interval(secs => \(ttlSeconds))) ON CONFLICT DO NOTHING
                RETURNING 1
                """).isEmpty
        }
    }
}
