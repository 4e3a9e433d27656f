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
        /// The DPoP proof presented (RFC 9449 §5): recorded, and the grant bound to its key; a code
        /// bound at PAR (`dpop_jkt` in its grant) needs a proof by that key (§10).
        public let dpop: DPoPBinding?

        public init(clientId: String, redirectURI: String?, verifierChallenge: String?, pkceOptional: Bool, dpop: DPoPBinding? = nil) {
            self.clientId = clientId
            self.redirectURI = redirectURI
            self.verifierChallenge = verifierChallenge
            self.pkceOptional = pkceOptional
            self.dpop = dpop
        }
    }

    /// A code's redemption, in one statement (SPEC "Tokens": the code exchange is one write with its
    /// audit line).
    ///
    /// 1. RFC 6749 §4.1.2: a code is used once — its first use marks it used; any later use marks it
    ///    replayed and revokes the session the first issued, with `replayAudit`.
    /// 2. It must be live, the presenting client's, for the same redirect URI, with the PKCE
    ///    verifier of its challenge (or, issued without one, none) — checked in the statement.
    ///    Then, only while what approved it still stands (SPEC "Grants live and die": the approvers
    ///    are locked `FOR SHARE`, so a revocation running now either commits first and is seen, or
    ///    waits for this grant and its cascade revokes it): the `oauth` family, its first refresh
    ///    token, the grant and `issuedAudit` (its actor and subject: the code's user).
    /// The code's row is locked first, so a concurrent use of it waits and then sees it used.
    /// A refused code stays used up.
    public func redeemCode(hash: [UInt8], presented: CodePresentation, familyId: String, refreshHash: [UInt8], ttlSeconds: Int,
                           replayAudit: AuditRecord, issuedAudit: AuditRecord) throws(StorageError) -> OAuthCodeRedemption {
        let replayed = AuditTemplate(actor: replayAudit.actor, action: replayAudit.action, detail: replayAudit.detail)
        let issued = AuditTemplate(actor: nil, action: issuedAudit.action, detail: issuedAudit.detail)
        let jkt = presented.dpop?.jkt
        let statement = SQL.with([
            ("proof", OAuthRepository.proofRecorded(presented.dpop)),
            ("c", """
                SELECT hash, used_at IS NOT NULL AS replay, client_id, grant_data, expires_at > now() AS live,
                       approving_family, approving_credential, approving_device_key
                FROM oauth_codes WHERE hash = \(hash) AND EXISTS (SELECT 1 FROM proof) FOR UPDATE
                """),
            ("checked", """
                SELECT c.*, CASE
                    WHEN NOT c.live THEN 'the code is unknown or expired'
                    WHEN c.client_id <> \(presented.clientId) THEN 'the code was issued to another client'
                    WHEN \(presented.redirectURI)::text IS NULL OR \(presented.redirectURI)::text IS DISTINCT FROM c.grant_data->>'redirect_uri'
                        THEN 'redirect_uri does not match the authorization request'
                    WHEN (c.grant_data->>'code_challenge') IS NOT NULL
                        AND (c.grant_data->>'code_challenge') IS DISTINCT FROM \(presented.verifierChallenge)::text
                        THEN 'code_verifier does not match the code_challenge (PKCE S256)'
                    WHEN (c.grant_data->>'code_challenge') IS NULL
                        AND (\(presented.verifierChallenge)::text IS NOT NULL OR NOT \(presented.pkceOptional)::boolean)
                        THEN 'code_verifier does not match the code_challenge (PKCE S256)'
                    WHEN (c.grant_data->>'dpop_jkt') IS NOT NULL AND (c.grant_data->>'dpop_jkt') IS DISTINCT FROM \(jkt)::text
                        THEN 'the code is bound to another DPoP key (dpop_jkt)'
                    END AS refusal
                FROM c WHERE NOT c.replay
                """),
            ("approvers", """
                SELECT (checked.approving_family IS NULL OR EXISTS (SELECT 1 FROM refresh_families f WHERE f.id = checked.approving_family
                            AND (f.revoked_at IS NULL OR f.ended_by = 'logout') FOR SHARE))
                   AND (checked.approving_credential IS NULL OR EXISTS (SELECT 1 FROM credentials r
                            WHERE r.id = latchkey_from_base64url(checked.approving_credential) AND r.revoked_at IS NULL FOR SHARE))
                   AND (checked.approving_device_key IS NULL OR EXISTS (SELECT 1 FROM device_keys d
                            WHERE d.id = checked.approving_device_key AND d.revoked_at IS NULL FOR SHARE)) AS ok
                FROM checked WHERE checked.refusal IS NULL
                """),
            ("fresh", """
                UPDATE oauth_codes o SET used_at = now(), family_id = CASE WHEN (SELECT ok FROM approvers) THEN \(familyId) END
                FROM checked WHERE o.hash = checked.hash
                RETURNING o.user_id, o.grant_data, o.family_id, o.approving_family, o.approving_credential, o.approving_device_key
                """),
            ("gate", "SELECT * FROM fresh WHERE family_id IS NOT NULL"),
            ("replayed", """
                UPDATE oauth_codes o SET replayed_at = now() FROM c WHERE o.hash = c.hash AND c.replay RETURNING o.family_id
                """),
            ("rev", """
                UPDATE refresh_families SET revoked_at = now() WHERE id = (SELECT family_id FROM replayed) AND revoked_at IS NULL RETURNING id
                """),
        ] + OAuthRepository.grantStart(familyId: familyId, refreshHash: refreshHash, ttlSeconds: ttlSeconds, clientId: presented.clientId,
                                       grantData: """
                                           CASE WHEN \(jkt)::text IS NULL THEN gate.grant_data - 'dpop_jkt'
                                                ELSE gate.grant_data || jsonb_build_object('dpop_jkt', \(jkt)::text) END
                                           """)
          + AuditRepository.cte([replayed.rows(from: "replayed", subject: "\(replayAudit.subject)::text",
                                               members: [("sessionId", "replayed.family_id")]),
                                 issued.rows(from: "gate JOIN tok ON true", subject: "gate.user_id")]),
            """
            SELECT EXISTS (SELECT 1 FROM proof) AS proof_fresh, (SELECT replay FROM c) AS replay, (SELECT family_id FROM replayed) AS family, (SELECT refusal FROM checked) AS refusal,
                   EXISTS (SELECT 1 FROM tok) AS started, (SELECT user_id FROM fresh) AS user_id, (SELECT grant_data::text FROM fresh) AS grant_data
            """)
        let row = try pool.run { c in try c.query(statement)[0] }
        do {
            guard try row.bool("proof_fresh") else { return .proofReplayed }
            guard try !row.isNull("replay") else { return .invalid("the code is unknown or expired") }
            if try row.bool("replay") { return .replayed(revokedFamily: try row.optionalString("family")) }
            if let refusal = try row.optionalString("refusal") { return .invalid(refusal) }
            guard try row.bool("started"), let userId = try row.optionalString("user_id") else { return .approverRevoked }
            let grant = (try? JSONParser.parse(Array(try row.json("grant_data").utf8))) ?? .object([])
            return .started(OAuthCodeRecord(clientId: presented.clientId, userId: userId, grant: grant))
        } catch { throw StorageError(error) }
    }

    /// RFC 6749 §6 with rotation at the token endpoint: only the client's own OAuth sessions; a token
    /// presented twice revokes its family (RFC 9700 §4.14.2).
    /// `scope`: the scopes the refresh asks for (nil: the grant's); more than the grant is
    /// `.scopeExceeded`, and like every refusal it leaves the token as it was (SPEC "Tokens").
    /// A rotation writes `issuedAudit` in its one statement, as the code exchange does (its actor
    /// and subject the grant's user, with `sessionId`): every token issue is audited.
    /// `dpop`: the proof presented, recorded in the rotation's statement (a replayed one rotates
    /// nothing); `sameKey`: a grant bound to a DPoP key rotates only with a proof by that key (a
    /// public client's: RFC 9449 §5), else any proof, or none, will do (a confidential client's
    /// refresh token is bound by its client authentication).
    /// `rotates` false (a `--profile fapi2` client's token, FAPI 2.0 §5.3.2.1): the token is checked
    /// and stays as it was — no next token, no use recorded, so no reuse to detect — and lives until
    /// it expires, is revoked or its grant dies.
    public func rotate(hash: [UInt8], newHash: [UInt8], clientId: String, scope: [String]? = nil, dpop: DPoPBinding? = nil, sameKey: Bool = false,
                       rotates: Bool = true, ttlSeconds: Int, reuseAudit: AuditRecord, issuedAudit: AuditRecord) throws(StorageError) -> OAuthRefreshOutcome {
        let asked: String? = scope?.joined(separator: " ")
        let issued = AuditTemplate(actor: nil, action: issuedAudit.action, detail: issuedAudit.detail)
        // One statement (`SessionRepository.rotation`).
        let rotated = try pool.run { c in
            try c.query(SessionRepository.rotation(used: """
                UPDATE refresh_tokens r SET used_at = \(unsafeRaw: rotates ? "now()" : "NULL") FROM refresh_families f, oauth_grants g
                WHERE r.hash = \(hash) AND r.used_at IS NULL AND r.expires_at > now() AND f.id = r.family_id AND f.revoked_at IS NULL
                  AND f.method = 'oauth' AND g.family_id = f.id AND g.client_id = \(clientId)
                  AND (\(asked)::text IS NULL OR string_to_array(g.grant_data->>'scope', ' ') @> string_to_array(\(asked)::text, ' '))
                  AND (NOT \(sameKey)::boolean OR (g.grant_data->>'dpop_jkt') IS NULL OR (g.grant_data->>'dpop_jkt') = \(dpop?.jkt)::text)
                  AND EXISTS (SELECT 1 FROM proof)
                RETURNING r.family_id, f.user_id, f.auth_time, g.grant_data
                """, newHash: newHash, ttlSeconds: ttlSeconds, before: [("proof", OAuthRepository.proofRecorded(dpop))],
                also: AuditRepository.cte([issued.rows(from: "used JOIN tok ON true", subject: "used.user_id",
                                                       members: [("sessionId", "used.family_id")])]),
                rotating: rotates,
                select: """
                SELECT used.family_id, used.user_id, used.auth_time, used.grant_data::text AS grant_data, EXISTS (SELECT 1 FROM tok) AS rotated,
                       true AS proof_fresh
                FROM used
                UNION ALL SELECT NULL, NULL, NULL, NULL, false, false WHERE NOT EXISTS (SELECT 1 FROM proof)
                """)
            ).first.map { row -> OAuthRefreshOutcome in
                guard try row.bool("proof_fresh") else { return .proofReplayed }
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
                  AND (NOT \(sameKey)::boolean OR (g.grant_data->>'dpop_jkt') IS NULL OR (g.grant_data->>'dpop_jkt') = \(dpop?.jkt)::text)
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

    /// RP-Initiated Logout's one write: the OAuth sessions of `clientId` that `sid` names end (the
    /// grant issued in that session, or every grant its OP browser session approved, `op_sid`), and so does the OP browser session `sid` when the cookie `cookieHash` names
    /// exactly it. Also says whether the cookie names a live OP browser session at all (the
    /// confirmation page's question). A logout never cascades (`ended_by = 'logout'`).
    public func logout(sid: String, userId: String, clientId: String, cookieHash: [UInt8]?)
        throws(StorageError) -> (ended: [String], browserEnded: Bool, cookieSession: String?) {
        try pool.run { c in
            let rows = try c.query("""
                WITH oauth_ended AS (
                    UPDATE refresh_families SET revoked_at = now(), ended_by = 'logout'
                    WHERE user_id = \(userId) AND method = 'oauth' AND revoked_at IS NULL
                      AND id IN (SELECT family_id FROM oauth_grants
                                 WHERE client_id = \(clientId) AND (family_id = \(sid) OR grant_data->>'op_sid' = \(sid)))
                    RETURNING id),
                cookie_session AS (
                    SELECT f.id FROM refresh_tokens r JOIN refresh_families f ON f.id = r.family_id
                    WHERE r.hash = \(cookieHash) AND r.expires_at > now() AND f.browser AND f.revoked_at IS NULL),
                browser_ended AS (
                    UPDATE refresh_families SET revoked_at = now(), ended_by = 'logout'
                    WHERE id = \(sid) AND user_id = \(userId) AND browser AND revoked_at IS NULL AND id IN (SELECT id FROM cookie_session)
                    RETURNING id)
                SELECT id, 'oauth' AS kind FROM oauth_ended
                UNION ALL SELECT id, 'browser' FROM browser_ended
                UNION ALL SELECT id, 'cookie' FROM cookie_session
                """)
            var ended: [String] = [], browserEnded = false, cookieSession: String? = nil
            for r in rows {
                let id = try r.string("id")
                switch try r.string("kind") {
                case "oauth": ended.append(id)
                case "browser": browserEnded = true
                default: cookieSession = id
                }
            }
            return (ended, browserEnded, cookieSession)
        }
    }

    /// The `proof` CTE of a token request's statement: one row when the request's DPoP proof is new
    /// (or none was presented), none when it was seen before.
    static func proofRecorded(_ dpop: DPoPBinding?) -> SQL {
        guard let dpop else { return "SELECT true AS fresh" }
        return DPoPProofRepository.recording(dpop.replay)
    }

    /// A DPoP proof presented at userinfo recorded (its one write): false when it was seen before.
    public func recordDPoPProof(_ key: DPoPReplayKey) throws(StorageError) -> Bool {
        try pool.run { c in try !c.query(DPoPProofRepository.recording(key)).isEmpty }
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

extension OAuthRepository {
    /// A grant's start as CTEs of the statement that approves it: its refresh family (`fam`), its
    /// first refresh token (`tok`) and the grant (`granted`), written only when the statement's CTE
    /// `gate` holds the approved request (`user_id`, `grant_data`, `approving_family`,
    /// `approving_credential`, `approving_device_key`). `grantData` is what the grant keeps of
    /// `gate.grant_data`. A code's redemption and a CIBA request's tokens start grants this way.
    static func grantStart(familyId: String, refreshHash: [UInt8], ttlSeconds: Int, clientId: String,
                           grantData: SQL = "gate.grant_data") -> [(name: String, sql: SQL)] {
        [
            ("fam", """
                INSERT INTO refresh_families (id, user_id, method, credential_id, auth_time, last_used_at, browser)
                SELECT \(familyId), gate.user_id, 'oauth', latchkey_from_base64url(gate.grant_data->>'credential_id'),
                       to_timestamp((gate.grant_data->>'auth_time')::float8), now(), false
                FROM gate RETURNING id
                """),
            ("tok", """
                INSERT INTO refresh_tokens (hash, family_id, expires_at)
                SELECT \(refreshHash), fam.id, now() + make_interval(secs => \(ttlSeconds)) FROM fam RETURNING hash
                """),
            ("granted", """
                INSERT INTO oauth_grants (family_id, client_id, grant_data, approving_family, approving_credential, approving_device_key)
                SELECT fam.id, \(clientId), \(fragment: grantData), gate.approving_family, gate.approving_credential, gate.approving_device_key
                FROM fam, gate RETURNING family_id
                """),
        ]
    }
}
