import Foundation
import JSON
import PostgreSQL

/// Every query Latchkey runs, in one place. Values are always bind parameters.
public final class Store: Sendable {
    public let pool: PostgresPool
    /// Connections with `synchronous_commit = off`, for challenge rows only. A challenge that a
    /// crash forgets costs the client a retry; a consumed challenge that a crash brings back is
    /// harmless, because a login's own (synchronous) commit comes later in the WAL and flushes the
    /// consume with it. Everything else (credentials, tokens, audit) stays fully durable.
    public let challengePool: PostgresPool

    public init(pool: PostgresPool, challengePool: PostgresPool? = nil) {
        self.pool = pool
        self.challengePool = challengePool ?? pool
    }

    /// `url` with `synchronous_commit=off` for every session (URI or key=value conninfo).
    public static func asynchronousCommitURL(_ url: String) -> String {
        if url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") {
            return url + (url.contains("?") ? "&" : "?") + "options=-c%20synchronous_commit%3Doff"
        }
        return url + " options='-c synchronous_commit=off'"
    }

    // MARK: Challenges

    public func insertChallenge(hash: [UInt8], purpose: String, userId: String?, rpId: String, policy: String, ttlSeconds: Int) throws {
        try challengePool.withConnection { c in
            _ = try c.execute("INSERT INTO challenges (hash, purpose, user_id, rp_id, policy, expires_at) VALUES (\(hash), \(purpose), \(userId), \(rpId), \(PostgresValue.text(policy))::jsonb, now() + make_interval(secs => \(ttlSeconds)))")
        }
    }

    /// Consumes a challenge atomically: of N concurrent callers exactly one gets the row. With
    /// `purpose`/`userId`, only a challenge issued for that ceremony and user is touched (a stranger
    /// cannot burn someone else's step-up challenge).
    public func consumeChallenge(hash: [UInt8], purpose: String? = nil, userId: String? = nil) throws -> ChallengeRecord? {
        try challengePool.withConnection { c in
            let rows = try c.query("""
                DELETE FROM challenges
                WHERE hash = \(hash) AND (\(purpose)::text IS NULL OR purpose = \(purpose)) AND (\(userId)::text IS NULL OR user_id = \(userId))
                RETURNING purpose, user_id, rp_id, policy::text AS policy, expires_at <= now() AS expired
                """)
            guard let r = rows.first else { return nil }
            return ChallengeRecord(purpose: try r.string("purpose"), userId: try r.optionalString("user_id"), rpId: try r.string("rp_id"),
                                   policy: try r.string("policy"), expired: try r.bool("expired"))
        }
    }

    /// A login's first round trip: consumes the challenge and fetches the credential with its owner
    /// (nil when unknown or revoked) in one statement.
    public func consumeChallengeForLogin(hash: [UInt8], credentialId: [UInt8]) throws -> (ChallengeRecord?, (CredentialRecord, UserRecord)?) {
        try challengePool.withConnection { c in
            let rows = try c.query("""
                WITH ch AS (
                    DELETE FROM challenges WHERE hash = \(hash)
                    RETURNING purpose, user_id AS bound_user, rp_id, policy::text AS policy, expires_at <= now() AS expired
                )
                SELECT ch.purpose, ch.bound_user, ch.rp_id, ch.policy, ch.expired, \(unsafeRaw: Store.loginColumns)
                FROM ch LEFT JOIN credentials c ON c.id = \(credentialId) AND c.revoked_at IS NULL
                        LEFT JOIN users u ON u.id = c.user_id
                """)
            guard let r = rows.first else { return (nil, nil) }
            let challenge = ChallengeRecord(purpose: try r.string("purpose"), userId: try r.optionalString("bound_user"),
                                            rpId: try r.string("rp_id"), policy: try r.string("policy"), expired: try r.bool("expired"))
            guard try !r.isNull("id") else { return (challenge, nil) }
            return (challenge, try Store.login(r))
        }
    }

    public func purgeExpiredChallenges() throws {
        try pool.withConnection { c in _ = try c.execute("DELETE FROM challenges WHERE expires_at < now() - interval '1 hour'") }
    }

    // MARK: Users

    static let userColumns = "id, user_handle, username, display_name"

    static func user(_ r: Row) throws -> UserRecord {
        UserRecord(id: try r.string("id"), userHandle: try r.bytes("user_handle"), username: try r.string("username"),
                   displayName: try r.string("display_name"))
    }

    public func user(username: String) throws -> UserRecord? {
        try pool.withConnection { c in
            try c.query("SELECT \(unsafeRaw: Store.userColumns) FROM users WHERE username = \(username)").first.map(Store.user)
        }
    }

    public func user(id: String) throws -> UserRecord? {
        try pool.withConnection { c in
            try c.query("SELECT \(unsafeRaw: Store.userColumns) FROM users WHERE id = \(id)").first.map(Store.user)
        }
    }

    /// The user an app backend knows as `externalId`, created on first use.
    public func upsertExternalUser(externalId: String, candidate: UserRecord) throws -> (UserRecord, created: Bool) {
        try pool.withConnection { c in
            if let existing = try c.query("SELECT \(unsafeRaw: Store.userColumns) FROM users WHERE external_id = \(externalId)").first {
                return (try Store.user(existing), false)
            }
            let rows = try c.query("""
                INSERT INTO users (id, user_handle, username, display_name, external_id)
                VALUES (\(candidate.id), \(candidate.userHandle), \(candidate.username), \(candidate.displayName), \(externalId))
                ON CONFLICT (external_id) DO NOTHING RETURNING id
                """)
            if rows.isEmpty, let existing = try c.query("SELECT \(unsafeRaw: Store.userColumns) FROM users WHERE external_id = \(externalId)").first {
                return (try Store.user(existing), false)
            }
            return (candidate, true)
        }
    }

    // MARK: Credentials

    static let credentialColumns = "id, user_id, public_key, alg, sign_count, aaguid, transports::text AS transports, backup_eligible, backed_up, attestation_format, attestation_type, name, flagged, created_at, last_used_at"

    static func credential(_ r: Row) throws -> CredentialRecord {
        let transportsText = try r.string("transports")
        let transports = (try? JSONParser.parse(transportsText))?.arrayValue?.compactMap(\.stringValue) ?? []
        return CredentialRecord(
            id: try r.bytes("id"), userId: try r.string("user_id"), publicKey: try r.bytes("public_key"), alg: try r.int("alg"),
            signCount: try r.int64("sign_count"), aaguid: try r.bytes("aaguid"), transports: transports,
            backupEligible: try r.bool("backup_eligible"), backedUp: try r.bool("backed_up"),
            attestationFormat: try r.string("attestation_format"), attestationType: try r.string("attestation_type"),
            name: try r.string("name"), flagged: try r.bool("flagged"), createdAt: try r.date("created_at"),
            lastUsedAt: try r.optionalDate("last_used_at"))
    }

    /// A credential joined with its owner, as a login reads it (`credentials c JOIN users u`).
    static let loginColumns = """
        c.id, c.user_id, c.public_key, c.alg, c.sign_count, c.aaguid, c.transports::text AS transports, c.backup_eligible, \
        c.backed_up, c.attestation_format, c.attestation_type, c.name, c.flagged, c.created_at, c.last_used_at, \
        u.user_handle, u.username, u.display_name
        """

    static func login(_ r: Row) throws -> (CredentialRecord, UserRecord) {
        let credential = try Store.credential(r)
        let user = UserRecord(id: credential.userId, userHandle: try r.bytes("user_handle"), username: try r.string("username"),
                              displayName: try r.string("display_name"))
        return (credential, user)
    }

    public func credentials(userId: String) throws -> [CredentialRecord] {
        try pool.withConnection { c in
            try c.query("SELECT \(unsafeRaw: Store.credentialColumns) FROM credentials WHERE user_id = \(userId) AND revoked_at IS NULL ORDER BY created_at")
                .map(Store.credential)
        }
    }

    /// The credential and its owner for a login; nil when unknown or revoked.
    public func credentialForLogin(id: [UInt8]) throws -> (CredentialRecord, UserRecord)? {
        try pool.withConnection { c in
            let rows = try c.query("""
                SELECT \(unsafeRaw: Store.loginColumns)
                FROM credentials c JOIN users u ON u.id = c.user_id
                WHERE c.id = \(id) AND c.revoked_at IS NULL
                """)
            guard let r = rows.first else { return nil }
            return try Store.login(r)
        }
    }

    public enum RegistrationConflict: Error { case usernameTaken, credentialExists }

    /// Stores a new credential (and, for a new account, its user) in one transaction: either both
    /// rows exist afterwards or neither does.
    public func register(newUser: UserRecord?, credential: CredentialRecord, audit: (actor: String, detail: String)) throws {
        do {
            try pool.withConnection { c in
                try c.transaction { t in
                    if let u = newUser {
                        _ = try t.execute("INSERT INTO users (id, user_handle, username, display_name) VALUES (\(u.id), \(u.userHandle), \(u.username), \(u.displayName))")
                    }
                    let transports = JSONValue.array(credential.transports.map { .string($0) }).text
                    _ = try t.execute("""
                        INSERT INTO credentials (id, user_id, public_key, alg, sign_count, aaguid, transports, backup_eligible, backed_up,
                                                 attestation_format, attestation_type, name)
                        VALUES (\(credential.id), \(credential.userId), \(credential.publicKey), \(credential.alg), \(credential.signCount),
                                \(credential.aaguid), \(PostgresValue.text(transports))::jsonb, \(credential.backupEligible), \(credential.backedUp),
                                \(credential.attestationFormat), \(credential.attestationType), \(credential.name))
                        """)
                    try Store.audit(t, actor: audit.actor, action: "passkey.registered", subject: credential.userId, detail: audit.detail)
                }
            }
        } catch let e as PostgresError where e.isUniqueViolation {
            if e.constraint == "users_username_key" { throw RegistrationConflict.usernameTaken }
            if e.constraint == "credentials_pkey" { throw RegistrationConflict.credentialExists }
            throw e
        }
    }

    /// Records a successful login: counter, flags, last use, a new refresh-token family and an audit
    /// line, in one round trip. The counter only moves forward (a concurrent login cannot lower it).
    public func recordLogin(credentialId: [UInt8], userId: String, signCount: Int64, backedUp: Bool, flag: Bool,
                            refreshHash: [UInt8], familyId: String, refreshTTL: Int, auditDetail: String) throws {
        try pool.withConnection { c in
            _ = try c.query("""
                WITH cred AS (
                    UPDATE credentials SET sign_count = GREATEST(sign_count, \(signCount)), backed_up = \(backedUp),
                        flagged = flagged OR \(flag), last_used_at = now()
                    WHERE id = \(credentialId) RETURNING id
                ), fam AS (
                    INSERT INTO refresh_families (id, user_id) VALUES (\(familyId), \(userId)) RETURNING id
                ), tok AS (
                    INSERT INTO refresh_tokens (hash, family_id, expires_at)
                    SELECT \(refreshHash), fam.id, now() + make_interval(secs => \(refreshTTL)) FROM fam RETURNING hash
                )
                INSERT INTO audit_log (actor, action, subject, detail)
                SELECT \(userId), 'passkey.login', \(userId), \(PostgresValue.text(auditDetail))::jsonb FROM tok
                RETURNING id
                """)
        }
    }

    /// Marks a credential as a possible clone (sign count regression).
    public func flagCredential(id: [UInt8], userId: String, detail: String) throws {
        try pool.withConnection { c in
            _ = try c.query("""
                WITH f AS (UPDATE credentials SET flagged = true WHERE id = \(id) RETURNING id)
                INSERT INTO audit_log (actor, action, subject, detail) SELECT 'latchkey', 'passkey.flagged', \(userId), \(PostgresValue.text(detail))::jsonb FROM f
                RETURNING id
                """)
        }
    }

    public func renameCredential(userId: String, id: [UInt8], name: String) throws -> CredentialRecord? {
        try pool.withConnection { c in
            try c.query("UPDATE credentials SET name = \(name) WHERE id = \(id) AND user_id = \(userId) AND revoked_at IS NULL RETURNING \(unsafeRaw: Store.credentialColumns)")
                .first.map(Store.credential)
        }
    }

    public func revokeCredential(userId: String, id: [UInt8], actor: String) throws -> Bool {
        try pool.withConnection { c in
            try c.transaction { t in
                let n = try t.execute("UPDATE credentials SET revoked_at = now() WHERE id = \(id) AND user_id = \(userId) AND revoked_at IS NULL")
                if n > 0 {
                    try Store.audit(t, actor: actor, action: "passkey.revoked", subject: userId)
                }
                return n > 0
            }
        }
    }

    // MARK: Origins

    public func origins() throws -> [(origin: String, source: String)] {
        try pool.withConnection { c in
            try c.query("SELECT origin, source FROM origins ORDER BY origin").map { (try $0.string("origin"), try $0.string("source")) }
        }
    }

    /// True when the origin was added, false when it was already present.
    public func addOrigin(_ origin: String, source: String, actor: String) throws -> Bool {
        try pool.withConnection { c in
            try c.transaction { t in
                let n = try t.execute("INSERT INTO origins (origin, source) VALUES (\(origin), \(source)) ON CONFLICT (origin) DO NOTHING")
                if n > 0 { try Store.audit(t, actor: actor, action: "origin.added", subject: origin) }
                return n > 0
            }
        }
    }

    public func removeOrigin(_ origin: String, actor: String) throws -> Bool {
        try pool.withConnection { c in
            try c.transaction { t in
                let n = try t.execute("DELETE FROM origins WHERE origin = \(origin)")
                if n > 0 { try Store.audit(t, actor: actor, action: "origin.removed", subject: origin) }
                return n > 0
            }
        }
    }

    // MARK: Audit

    /// Appends one line to the append-only audit log on `connection`, inside the caller's transaction.
    static func audit(_ connection: PostgresConnection, actor: String, action: String, subject: String?, detail: String = "{}") throws {
        _ = try connection.execute("INSERT INTO audit_log (actor, action, subject, detail) VALUES (\(actor), \(action), \(subject), \(PostgresValue.text(detail))::jsonb)")
    }

    public func auditEntries(limit: Int, before: Int64?) throws -> [AuditEntry] {
        try pool.withConnection { c in
            try c.query("""
                SELECT id, at, actor, action, subject, detail::text AS detail FROM audit_log
                WHERE id < \(before ?? Int64.max) ORDER BY id DESC LIMIT \(limit)
                """).map { r in
                AuditEntry(id: try r.int64("id"), at: try r.date("at"), actor: try r.string("actor"), action: try r.string("action"),
                           subject: try r.optionalString("subject"), detail: try r.string("detail"))
            }
        }
    }

    // MARK: Refresh tokens

    /// Rotates a refresh token: the presented one is used up and `newHash` joins its family. A
    /// token presented a second time revokes its whole family.
    public func rotateRefreshToken(hash: [UInt8], newHash: [UInt8], ttlSeconds: Int) throws -> RefreshOutcome {
        try pool.withConnection { c in
            try c.transaction { t in
                let used = try t.query("""
                    UPDATE refresh_tokens r SET used_at = now() FROM refresh_families f
                    WHERE r.hash = \(hash) AND r.used_at IS NULL AND r.expires_at > now() AND f.id = r.family_id AND f.revoked_at IS NULL
                    RETURNING r.family_id, f.user_id
                    """)
                if let row = used.first {
                    let family = try row.string("family_id")
                    _ = try t.execute("INSERT INTO refresh_tokens (hash, family_id, expires_at) VALUES (\(newHash), \(family), now() + make_interval(secs => \(ttlSeconds)))")
                    return .rotated(userId: try row.string("user_id"), familyId: family)
                }
                let reused = try t.query("""
                    UPDATE refresh_families SET revoked_at = now()
                    WHERE id = (SELECT family_id FROM refresh_tokens WHERE hash = \(hash) AND used_at IS NOT NULL) AND revoked_at IS NULL
                    RETURNING user_id
                    """)
                if let row = reused.first {
                    let userId = try row.string("user_id")
                    try Store.audit(t, actor: "latchkey", action: "refresh.reuse_detected", subject: userId)
                    return .reused
                }
                return .invalid
            }
        }
    }

    public func revokeRefreshFamilies(userId: String, familyId: String?) throws {
        try pool.withConnection { c in
            if let familyId {
                _ = try c.execute("UPDATE refresh_families SET revoked_at = now() WHERE id = \(familyId) AND user_id = \(userId) AND revoked_at IS NULL")
            } else {
                _ = try c.execute("UPDATE refresh_families SET revoked_at = now() WHERE user_id = \(userId) AND revoked_at IS NULL")
            }
        }
    }


    // MARK: Signing keys and secrets

    public func signingKeys() throws -> [(kid: String, pem: String, createdAt: Date)] {
        try pool.withConnection { c in
            try c.query("SELECT kid, private_pem, created_at FROM signing_keys WHERE retired_at IS NULL ORDER BY created_at DESC")
                .map { (try $0.string("kid"), try $0.string("private_pem"), try $0.date("created_at")) }
        }
    }

    public func insertSigningKey(kid: String, pem: String) throws {
        try pool.withConnection { c in
            try c.transaction { t in
                _ = try t.execute("INSERT INTO signing_keys (kid, private_pem) VALUES (\(kid), \(pem))")
                // Keep the newest two: the current key and the previous one, so tokens it signed still verify.
                _ = try t.execute("""
                    UPDATE signing_keys SET retired_at = now() WHERE retired_at IS NULL AND kid NOT IN
                        (SELECT kid FROM signing_keys WHERE retired_at IS NULL ORDER BY created_at DESC LIMIT 2)
                    """)
            }
        }
    }

    /// A per-deployment secret, created once and shared by all instances.
    public func secret(named name: String, generate: () -> [UInt8]) throws -> [UInt8] {
        try pool.withConnection { c in
            _ = try c.execute("INSERT INTO server_secrets (name, value) VALUES (\(name), \(generate())) ON CONFLICT (name) DO NOTHING")
            guard let row = try c.query("SELECT value FROM server_secrets WHERE name = \(name)").first else { return [] }
            return try row.bytes("value")
        }
    }

    // MARK: Enrolment tickets

    public func createTicket(hash: [UInt8], userId: String, ttlSeconds: Int, actor: String) throws -> Date {
        try pool.withConnection { c in
            let rows = try c.query("INSERT INTO enrolment_tickets (hash, user_id, expires_at) VALUES (\(hash), \(userId), now() + make_interval(secs => \(ttlSeconds))) RETURNING expires_at")
            try Store.audit(c, actor: actor, action: "ticket.issued", subject: userId)
            return try rows[0].date("expires_at")
        }
    }

    /// Uses a ticket up; returns its user when it was valid.
    public func consumeTicket(hash: [UInt8]) throws -> String? {
        try pool.withConnection { c in
            try c.query("UPDATE enrolment_tickets SET used_at = now() WHERE hash = \(hash) AND used_at IS NULL AND expires_at > now() RETURNING user_id")
                .first.map { try $0.string("user_id") }
        }
    }

    public func ping() -> Bool {
        (try? pool.withConnection { c in try c.query("SELECT 1 AS one").count == 1 }) ?? false
    }
}

extension Store {
    /// A new refresh-token family with its first token (after a registration).
    public func createRefreshFamily(userId: String, familyId: String, hash: [UInt8], ttlSeconds: Int) throws {
        try pool.withConnection { c in
            _ = try c.query("""
                WITH fam AS (INSERT INTO refresh_families (id, user_id) VALUES (\(familyId), \(userId)) RETURNING id)
                INSERT INTO refresh_tokens (hash, family_id, expires_at)
                SELECT \(hash), fam.id, now() + make_interval(secs => \(ttlSeconds)) FROM fam RETURNING hash
                """)
        }
    }
}
