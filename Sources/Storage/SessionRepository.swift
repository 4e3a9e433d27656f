import Foundation
import PostgreSQL

/// How a session began (SPEC "Sessions"); stored in `refresh_families.method`.
public enum SessionMethod: String, Sendable, Equatable {
    /// A passkey ceremony (registration or login); the session records the credential id.
    case passkey
    case ticket
    case email
    case recovery
    /// An OpenID Provider session (SPEC "OpenID Provider"): a client's grant, rotated at /oauth2/token only.
    case oauth
}

/// A new session = a refresh-token family with its first token, bound to how it began.
public struct NewSession: Sendable, Equatable {
    public let familyId: String
    public let userId: String
    /// SHA-256 of the refresh token handed to the client.
    public let refreshHash: [UInt8]
    public let ttlSeconds: Int
    public let method: SessionMethod
    /// The passkey that began it (method `.passkey`): revoking that passkey revokes this session.
    public let credentialId: [UInt8]?
    /// When the authentication that began the session happened: every access token of the session
    /// carries it as `auth_time`, and a refresh never moves it.
    public let authTime: Date
    /// The OP session of the `/authorize` page's cookie (SPEC "Who may approve"): its one refresh
    /// token is the cookie's hash, never rotated and never accepted as a refresh token.
    public let browser: Bool
    /// The DPoP proof that came with the request starting it (SPEC "Sender-constrained tokens"):
    /// its `jti` recorded by the session's own statement, which writes the session only for a proof
    /// not seen before, and its key the session's `dpop_jkt`.
    public var dpop: DPoPBinding? = nil

    public init(familyId: String, userId: String, refreshHash: [UInt8], ttlSeconds: Int, method: SessionMethod,
                credentialId: [UInt8]?, authTime: Date, browser: Bool = false) {
        self.familyId = familyId
        self.userId = userId
        self.refreshHash = refreshHash
        self.ttlSeconds = ttlSeconds
        self.method = method
        self.credentialId = credentialId
        self.authTime = authTime
        self.browser = browser
    }
}

/// A live session as `GET /v1/sessions` lists it.
public struct SessionRecord: Sendable, Equatable {
    public let id: String
    public let method: SessionMethod
    public let credentialId: [UInt8]?
    public let createdAt: Date
    public let lastUsedAt: Date
    public let authTime: Date
    /// The OP browser session (SPEC "Sessions": `"browser": true`).
    public let browser: Bool
    /// An `oauth` session's client (SPEC "Sessions": `clientId`, `clientName`).
    public let clientId: String?
    public let clientName: String?
}

/// Refresh-token families (sessions) and their tokens, rotated with reuse detection; the feed of
/// revocations (NOTIFY `latchkey_sessions`, migration 5, with a heartbeat) and the one-row check
/// behind it.
public final class SessionRepository: Sendable {
    let pool: PostgresPool
    /// Where LISTEN connects; nil: no LISTEN (a transaction pooler without a direct URL).
    let listenURL: String?

    /// The NOTIFY channel migration 5's trigger raises, payload = the session id.
    static let channel = "latchkey_sessions"

    init(pool: PostgresPool, listenURL: String?) {
        self.pool = pool
        self.listenURL = listenURL
    }

    /// The one way to create a session, in one statement (one durable commit). With `use`, the
    /// credential's use is recorded in that same statement (a compare-and-set on its counter, see
    /// `AccountRepository.recording`), and the session exists only if the use was stored: unknown
    /// credential → `.notFound`, counter refused → `.conflict(.signCountRegression)`, nothing
    /// written either way. A passkey login writes the same statement through `LoginRepository.login`. Returns the
    /// credential as the use left it (nil without a use).
    @discardableResult
    /// `language`: the account's mail language from now on, written with the session.
    public func start(_ session: NewSession, recording use: CredentialUse? = nil,
                      audit: [AuditRecord] = [], events: [OutboxEvent] = [], language: String? = nil) throws(StorageError) -> RecordedUse? {
        try pool.run { c in try SessionRepository.start(session, recording: use, audit: audit, events: events, language: language, on: c) }
    }

    /// `start` on `connection`.
    @discardableResult
    static func start(_ session: NewSession, recording use: CredentialUse?, audit: [AuditRecord], events: [OutboxEvent] = [],
                      language: String? = nil, on connection: PostgresConnection) throws -> RecordedUse? {
        // The family's row source: the recorded credential when there is one, so a use and its
        // session are written together or not at all.
        let ctes = (use.map { SessionRepository.started(session, by: $0) } ?? SessionRepository.ctes(session, from: nil))
            + AuditRepository.cte(audit, onlyIf: "tok")
            + OutboxRepository.ctes(events, onlyIf: "tok")
            + MailRepository.languageMemo(userId: session.userId, language: language, onlyIf: "tok")
        guard let use else {
            guard !(try connection.query(SQL.with(ctes, "SELECT hash FROM tok"))).isEmpty else { throw StorageError.notFound }
            return nil
        }
        return try AccountRepository.recorded(try connection.query(SQL.with(ctes, AccountRepository.recordedOrWhy(use)))[0])
    }

    /// A sign-in's session with its credential's use, as CTEs `cred`, `fam` and `tok`: the session
    /// exists only if the use was stored. A session that carries the credential it asserted keeps
    /// that passkey's last use, and the row is left alone when only its last use would change
    /// (`AccountRepository.recordingLastUseOnSession`). With `onlyIf` (a CTE of the same
    /// statement), only when that CTE returned a row.
    static func started(_ session: NewSession, by use: CredentialUse, onlyIf gate: String? = nil) -> [(name: String, sql: SQL)] {
        let asserted = use.credentialId == session.credentialId
        let cred = asserted ? AccountRepository.recordingLastUseOnSession(use, onlyIf: gate)
                            : [("cred", AccountRepository.recording(use, onlyIf: gate))]
        return cred + ctes(session, from: "cred", asserted: asserted)
    }

    /// The one refresh-family insert, as CTEs `fam` (the family) and `tok` (its first token) for
    /// `SQL.with` — a shared fragment, like `AuditRepository.cte`. With `source` (a CTE of the same
    /// statement), only when that CTE returned a row.
    /// `asserted`: the session began with an assertion of its credential (a sign-in, not the
    /// registration), so its `auth_time` is that passkey's last use (`credential_last_use`).
    /// With `session.dpop`, the proof's `jti` is recorded first (CTE `dpop`) and the family is
    /// written only when that proof is new: a replayed proof starts no session. `proofRecorded`: the
    /// statement has recorded it already, in an earlier CTE `dpop` that gates more than the session.
    static func ctes(_ session: NewSession, from source: String?, asserted: Bool = false,
                     proofRecorded: Bool = false) -> [(name: String, sql: SQL)] {
        let from: SQL = source.map { " FROM \(unsafeRaw: $0)" } ?? ""
        let proof = proofRecorded ? [] : DPoPProofRepository.cte(session.dpop)
        let gate: SQL = session.dpop == nil ? "" : " WHERE EXISTS (SELECT 1 FROM dpop)"
        return proof + [("fam", """
                    INSERT INTO refresh_families (id, user_id, method, credential_id, auth_time, last_used_at, browser, asserted, dpop_jkt)
                    SELECT \(session.familyId), \(session.userId), \(session.method.rawValue), \(session.credentialId),
                           \(session.authTime), now(), \(session.browser), \(asserted), \(session.dpop?.jkt)::text\(fragment: from)\(fragment: gate)
                    RETURNING id
                    """),
                ("tok", """
                    INSERT INTO refresh_tokens (hash, family_id, expires_at)
                    SELECT \(session.refreshHash), fam.id, now() + make_interval(secs => \(session.ttlSeconds)) FROM fam RETURNING hash
                    """)]
    }

    /// `template` once per refresh-family row of `from` (`id`, `user_id`): `session.revoked`'s `sessionId`.
    static func rows(_ template: EventTemplate, from: String) -> EventRows {
        template.rows(from: "\(unsafeRaw: from)", account: "\(unsafeRaw: from).user_id", key: "\(unsafeRaw: from).id",
                      members: [("sessionId", "\(unsafeRaw: from).id")])
    }

    /// Rotates a refresh token: the presented one is used up and `newHash` joins its family, which
    /// must be live (a revoked session's tokens are `.invalid`). A token presented a second time
    /// revokes its whole family (RFC 9700 §4.14.2) and, in the same statement, writes `reuseAudit`
    /// and `reuseEvent` (`sessionId`) about the family's owner. The session's `auth_time` comes back
    /// unchanged; `last_used_at` moves.
    public func rotate(hash: [UInt8], newHash: [UInt8], ttlSeconds: Int, reuseAudit: AuditTemplate,
                       reuseEvent: EventTemplate? = nil, dpop: DPoPBinding? = nil) throws(StorageError) -> RefreshOutcome {
        // One statement (`SessionRepository.rotation`). A family bound to a DPoP key rotates only
        // with a proof by that key; a proof is recorded (`dpop`) and the token used only when the
        // proof is new; an unbound family is bound by the first proof that refreshes it.
        let proof = DPoPProofRepository.cte(dpop)
        let fresh: SQL = dpop == nil ? "true" : "EXISTS (SELECT 1 FROM dpop)"
        let rotated = try pool.run { c in
            try c.query(Self.rotation(used: """
                UPDATE refresh_tokens r SET used_at = now() FROM refresh_families f
                WHERE r.hash = \(hash) AND r.used_at IS NULL AND r.expires_at > now() AND f.id = r.family_id AND f.revoked_at IS NULL
                  AND f.method <> 'oauth' AND NOT f.browser
                  AND (f.dpop_jkt IS NULL OR f.dpop_jkt = \(dpop?.jkt)::text) AND \(fragment: fresh)
                RETURNING r.family_id, f.user_id
                """, newHash: newHash, ttlSeconds: ttlSeconds, before: proof, binding: dpop?.jkt,
                select: """
                    SELECT used.family_id, used.user_id, fam.auth_time, fam.method, fam.dpop_jkt, EXISTS (SELECT 1 FROM tok) AS rotated,
                           \(fragment: fresh) AS fresh,
                           (SELECT f.dpop_jkt FROM refresh_tokens r JOIN refresh_families f ON f.id = r.family_id WHERE r.hash = \(hash)) AS bound
                    FROM (VALUES (1)) AS one (x) LEFT JOIN used ON true LEFT JOIN fam ON true
                    """)
            ).first.flatMap { row -> RefreshOutcome? in
                guard try !row.isNull("family_id") else {
                    guard try row.bool("fresh") else { return .proofReplayed }
                    if try !row.isNull("bound"), try row.string("bound") != dpop?.jkt { return .proofRequired }
                    return nil
                }
                guard try row.bool("rotated") else { return .invalid }
                return .rotated(userId: try row.string("user_id"), familyId: try row.string("family_id"), authTime: try row.date("auth_time"),
                                method: try row.value("method"), jkt: try row.isNull("dpop_jkt") ? nil : try row.string("dpop_jkt"))
            }
        }
        if let rotated { return rotated }
        // Refused: a token presented a second time revokes its family, with the audit line and the
        // event, in a statement of its own (a new snapshot: a concurrent first use is seen).
        let reused = try pool.run { c in
            try c.query(SQL.with([("reused", """
                UPDATE refresh_families SET revoked_at = now()
                WHERE id = (SELECT family_id FROM refresh_tokens WHERE hash = \(hash) AND used_at IS NOT NULL) AND revoked_at IS NULL
                RETURNING id, user_id
                """)]
                + AuditRepository.cte([reuseAudit.rows(from: "reused", subject: "reused.user_id")])
                + OutboxRepository.ctes(reuseEvent.map { [SessionRepository.rows($0, from: "reused")] } ?? []),
                "SELECT id FROM reused")).first.map { try $0.string("id") }
        }
        return reused.map { .reused(familyId: $0) } ?? .invalid
    }

    /// A refresh token's rotation as one statement, for first-party sessions and OAuth grants alike:
    /// `used` (a CTE that uses the presented token up, returning its `family_id`), then the family's
    /// last use — its row lock: a revocation committed meanwhile is seen, one that comes later waits
    /// for this refresh — as `fam`, and the next token as `tok`, only while the family lives; then
    /// `also` (the caller's audit line over `tok`, written only when the token rotated).
    /// `binding`: a first-party family not yet bound to a DPoP key is bound to this one (`dpop_jkt`).
    /// `rotating` false (a refresh token that does not rotate, SPEC "FAPI 2.0"): no next token;
    /// `tok` is then the live family's row, so the same checks and audit line hold.
    static func rotation(used: SQL, newHash: [UInt8], ttlSeconds: Int, before: [(name: String, sql: SQL)] = [], binding: String? = nil,
                         also: [(name: String, sql: SQL)] = [], rotating: Bool = true, select: SQL) -> SQL {
        let bind: SQL = binding.map { ", dpop_jkt = COALESCE(dpop_jkt, \($0)::text)" } ?? ""
        return SQL.with(before + [
            ("used", used),
            ("fam", """
                UPDATE refresh_families SET last_used_at = now()\(fragment: bind) WHERE id = (SELECT family_id FROM used) AND revoked_at IS NULL
                RETURNING id, auth_time, method, dpop_jkt
                """),
            ("tok", rotating ? """
                INSERT INTO refresh_tokens (hash, family_id, expires_at)
                SELECT \(newHash), fam.id, now() + make_interval(secs => \(ttlSeconds)) FROM fam RETURNING hash
                """ : "SELECT fam.id AS hash FROM fam"),
        ] + also, select)
    }

    /// One session of the user, not revoked (nil: unknown, another user's, or revoked), with the
    /// approval hold of the passkey that began it (nil: none, or not a passkey session) — one round trip.
    public func session(id: String, userId: String) throws(StorageError) -> (record: SessionRecord, passkeyApprovesFrom: Date?, passkeyHardware: Bool)? {
        try pool.run { c in try c.query(SessionRepository.standing(id: id, userId: userId)).first.map(SessionRepository.standing) }
    }

    /// `session(id:userId:)`'s statement and its row (the admin API's caller reads it with the admin role).
    static func standing(id: String, userId: String) -> SQL {
        """
        SELECT f.id, f.method, f.credential_id, f.created_at, f.last_used_at, f.auth_time, f.browser,
               NULL::text AS client_id, NULL::text AS client_name, c.approves_from, COALESCE(c.hardware_bound, false) AS hardware_bound
        FROM refresh_families f LEFT JOIN credentials c ON c.id = f.credential_id
        WHERE f.id = \(id) AND f.user_id = \(userId) AND f.revoked_at IS NULL
        """
    }

    static func standing(_ r: Row) throws -> (record: SessionRecord, passkeyApprovesFrom: Date?, passkeyHardware: Bool) {
        (try SessionRepository.record(r), try r.optionalDate("approves_from"), try r.bool("hardware_bound"))
    }

    static func record(_ r: Row) throws -> SessionRecord {
        SessionRecord(id: try r.string("id"), method: try r.value("method"),
                      credentialId: try r.optionalBytes("credential_id"), createdAt: try r.date("created_at"),
                      lastUsedAt: try r.date("last_used_at"), authTime: try r.date("auth_time"), browser: try r.bool("browser"),
                      clientId: try r.optionalString("client_id"), clientName: try r.optionalString("client_name"))
    }

    /// The user's live sessions (not revoked, with a refresh token still usable), newest first.
    public func list(userId: String) throws(StorageError) -> [SessionRecord] {
        try pool.run { c in try c.query(SessionRepository.live(userId: userId)).map(SessionRepository.record) }
    }

    /// `list`'s statement (the admin console's user page reads it in its one pipelined read too).
    static func live(userId: String) -> SQL {
        """
        SELECT f.id, f.method, f.credential_id, f.created_at, f.last_used_at, f.auth_time, f.browser,
               g.client_id, oc.name AS client_name
        FROM refresh_families f LEFT JOIN oauth_grants g ON g.family_id = f.id LEFT JOIN oauth_clients oc ON oc.id = g.client_id
        WHERE f.user_id = \(userId) AND f.revoked_at IS NULL
          AND EXISTS (SELECT 1 FROM refresh_tokens t WHERE t.family_id = f.id AND t.used_at IS NULL AND t.expires_at > now())
        ORDER BY f.created_at DESC, f.id
        """
    }

    /// Revokes one live session of the user (`familyId`), or all of them (nil); returns the ids
    /// revoked (empty: none of the user's sessions matched), with one `revokedEvent` (`sessionId`)
    /// per session revoked, in one statement. `logout`: the ending is a logout, which ends this
    /// session alone (SPEC "Grants live and die": the OAuth grants it approved live on); any other
    /// revocation is a security one and revokes them (migration 20's trigger, same transaction).
    @discardableResult
    public func revoke(userId: String, familyId: String?, logout: Bool = false, revokedEvent: EventTemplate? = nil) throws(StorageError) -> [String] {
        let one: SQL = familyId.map { "id = \($0) AND " } ?? ""
        let endedBy: String? = logout ? "logout" : nil
        let statement = SQL.with([("rev", """
            UPDATE refresh_families SET revoked_at = now(), ended_by = \(endedBy) WHERE \(fragment: one)user_id = \(userId) AND revoked_at IS NULL
            RETURNING id, user_id
            """)] + OutboxRepository.ctes(revokedEvent.map { [SessionRepository.rows($0, from: "rev")] } ?? []),
            "SELECT id FROM rev")
        // Every session ended: a login in flight commits first and is among them (RevocationCascade).
        let statements = familyId == nil ? [RevocationCascade.endingSessions(userId: userId), statement] : [statement]
        return try pool.run { c in try c.pipeline(statements).last!.map { try $0.string("id") } }
    }

    /// An admin ends one of a user's live sessions, with `audit` (and the admin's step-up, when
    /// `redeeming`) in the same transaction; false when there is no such live session (nothing written).
    public func revoke(userId: String, familyId: String, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> Bool {
        try pool.runTransaction { t in
            let n = try t.execute("""
                UPDATE refresh_families SET revoked_at = now() WHERE id = \(familyId) AND user_id = \(userId) AND revoked_at IS NULL
                """)
            guard n > 0 else { return false }
            try StepUpRedemption.redeem(redeeming, on: t)
            try AuditRepository.write([audit], on: t)
            return true
        }
    }

    // MARK: Revocation feed

    /// The sessions revoked after `since` (nil: in the last `lookbackSeconds`), with the database's
    /// clock at the time of the query, for the next call. One indexed query (`refresh_families_revoked`).
    /// `revoked_at` is its transaction's start time, so a caller passes a `since` some seconds
    /// before the last `at`, to catch revocations whose transaction was still open at that query.
    public func revoked(since: Date?, lookbackSeconds: Int) throws(StorageError) -> (ids: [String], at: Date) {
        try pool.run { c in
            let rows: [Row]
            if let since {
                rows = try c.query("""
                    SELECT now() AS at, f.id FROM (SELECT 1) AS one
                    LEFT JOIN refresh_families f ON f.revoked_at > \(since)
                    """)
            } else {
                rows = try c.query("""
                    SELECT now() AS at, f.id FROM (SELECT 1) AS one
                    LEFT JOIN refresh_families f ON f.revoked_at > now() - make_interval(secs => \(lookbackSeconds))
                    """)
            }
            return (try rows.compactMap { try $0.optionalString("id") }, try rows[0].date("at"))
        }
    }

    /// Whether session `id` is revoked as the database says now (an unknown id counts as revoked):
    /// one primary-key read, the check an instance makes before accepting a token while its
    /// revocation feed is stale (SPEC "Sessions" → "How fast."; "Performance targets" → "Round trips").
    public func isRevoked(id: String) throws(StorageError) -> Bool {
        try pool.run { c in
            guard let row = try c.query("SELECT revoked_at IS NOT NULL AS revoked FROM refresh_families WHERE id = \(id)").first else {
                return true
            }
            return try row.bool("revoked")
        }
    }

    /// Calls `onRevoked(ids)` on every NOTIFY `latchkey_sessions`, from a thread of its own, until
    /// `stop()`. After every (re)connect, `onConnect()` runs once the LISTEN is in place (a gap may
    /// have hidden revocations: it fetches them); `heartbeat` says how alive the feed is.
    /// Without a listen URL nothing listens (`isListening` stays false, `heartbeat.alive` never runs).
    public func watchRevocations(heartbeat: NotificationWatch.Heartbeat, onConnect: @escaping @Sendable () throws -> Void,
                                 onRevoked: @escaping @Sendable ([String]) -> Void) -> NotificationWatch {
        NotificationWatch(url: listenURL, channel: SessionRepository.channel, threadName: "latchkey-session-watcher",
                          heartbeat: heartbeat, onConnect: onConnect, onNotifications: onRevoked)
    }
}

extension SessionRepository {
    /// The passkey-enrolment ticket with this hash while it is valid (the bearer of an enrolment
    /// ticket, as a request's caller is resolved); the same read as `AccountRepository.ticket(hash:)`.
    public func ticket(hash: [UInt8]) throws(StorageError) -> EnrolmentTicket? {
        try pool.run { c in try AccountRepository.ticket(hash: hash, on: c) }
    }
}
