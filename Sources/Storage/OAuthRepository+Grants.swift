import Foundation
import JSON
import PostgreSQL

/// Codes, grants and their refresh tokens (SPEC "OpenID Provider" → "Tokens", "Grants live and die").
extension OAuthRepository {
    // MARK: Codes and grants

    /// RFC 6749 §4.1.2: a code is used once. A second use revokes the session the first issued.
    /// `replayAudit` is written with a replay's revocation, in its transaction.
    public func consumeCode(hash: [UInt8], replayAudit: AuditRecord) throws(StorageError) -> OAuthCodeOutcome {
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
                try AuditRepository.write([replayAudit.with(detail: [("sessionId", family.map { .string($0) } ?? .null)])], on: t)
                return .replayed(revokedFamily: family)
            }
            _ = try t.execute("UPDATE oauth_codes SET used_at = now() WHERE hash = \(hash)")
            guard try row.bool("live") else { return .invalid }
            return .fresh(OAuthCodeRecord(clientId: try row.string("client_id"), userId: try row.string("user_id"),
                                          grant: (try? JSONParser.parse(Array(try row.json("grant_data").utf8))) ?? .object([])))
        }
    }

    /// Starts the OAuth session a code's first use issues (family of method `oauth`, its first refresh
    /// token, the grant with its approvers), unless the code was replayed meanwhile (`.replayed`) or
    /// what approved it was revoked since (`.approverRevoked`): nothing written either way. The
    /// approvers are locked `FOR SHARE`, so a revocation running now either commits first (and is
    /// seen here) or waits for this grant (and its cascade revokes it).
    public func startGrant(codeHash: [UInt8], session: NewSession, clientId: String, grant: JSONValue,
                           audit: AuditRecord) throws(StorageError) -> OAuthGrantStart {
        try pool.runTransaction { t in
            guard let code = try t.query("""
                SELECT approving_family, approving_credential, approving_device_key FROM oauth_codes
                WHERE hash = \(codeHash) AND replayed_at IS NULL FOR UPDATE
                """).first else { return OAuthGrantStart.replayed }
            let family = try code.optionalString("approving_family")
            let credential = try code.optionalString("approving_credential")
            let deviceKey = try code.optionalString("approving_device_key")
            let live = try t.query("""
                SELECT (\(family)::text IS NULL OR EXISTS (
                            SELECT 1 FROM refresh_families WHERE id = \(family) AND (revoked_at IS NULL OR ended_by = 'logout') FOR SHARE))
                   AND (\(credential)::text IS NULL OR EXISTS (
                            SELECT 1 FROM credentials WHERE id = latchkey_from_base64url(\(credential)) AND revoked_at IS NULL FOR SHARE))
                   AND (\(deviceKey)::text IS NULL OR EXISTS (
                            SELECT 1 FROM device_keys WHERE id = \(deviceKey) AND revoked_at IS NULL FOR SHARE)) AS live
                """)
            guard try live[0].bool("live") else { return .approverRevoked }
            _ = try t.execute("UPDATE oauth_codes SET family_id = \(session.familyId) WHERE hash = \(codeHash)")
            _ = try t.query(SQL.with(SessionRepository.ctes(session, from: nil), "SELECT hash FROM tok"))
            _ = try t.execute("""
                INSERT INTO oauth_grants (family_id, client_id, grant_data, approving_family, approving_credential, approving_device_key)
                VALUES (\(session.familyId), \(clientId), \(PostgresValue.json(grant.text))::jsonb, \(family), \(credential), \(deviceKey))
                """)
            try AuditRepository.write([audit], on: t)
            return .started
        }
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
        return try pool.runTransaction { t in
            let used = try t.query("""
                UPDATE refresh_tokens r SET used_at = now() FROM refresh_families f, oauth_grants g
                WHERE r.hash = \(hash) AND r.used_at IS NULL AND r.expires_at > now() AND f.id = r.family_id AND f.revoked_at IS NULL
                  AND f.method = 'oauth' AND g.family_id = f.id AND g.client_id = \(clientId)
                  AND (\(asked)::text IS NULL OR string_to_array(g.grant_data->>'scope', ' ') @> string_to_array(\(asked)::text, ' '))
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
            if let row = reused.first {
                let family = try row.string("id")
                try AuditRepository.write([reuseAudit.with(detail: [("sessionId", .string(family))])], on: t)
                return .reused(familyId: family)
            }
            let usable = try t.query("""
                SELECT 1 FROM refresh_tokens r JOIN refresh_families f ON f.id = r.family_id JOIN oauth_grants g ON g.family_id = f.id
                WHERE r.hash = \(hash) AND r.used_at IS NULL AND r.expires_at > now() AND f.revoked_at IS NULL AND g.client_id = \(clientId)
                """)
            return usable.isEmpty ? .invalid : .scopeExceeded
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
