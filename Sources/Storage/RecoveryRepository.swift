import Foundation
import JSON
import PostgreSQL

/// A one-time-code challenge to store.
public struct NewCodeChallenge: Sendable {
    public enum Purpose: String, Sendable { case emailVerify = "email-verify", emailSignIn = "email-sign-in", recovery }
    public let id: String
    public let purpose: Purpose
    /// nil: nobody has the submitted address or username (no mail; the code can never match).
    public let userId: String?
    public let email: String?
    public let codeHash: [UInt8]
    public let maxAttempts: Int
    public let ttlSeconds: Int

    public init(id: String, purpose: Purpose, userId: String?, email: String?, codeHash: [UInt8], maxAttempts: Int, ttlSeconds: Int) {
        self.id = id
        self.purpose = purpose
        self.userId = userId
        self.email = email
        self.codeHash = codeHash
        self.maxAttempts = maxAttempts
        self.ttlSeconds = ttlSeconds
    }
}

/// How a recovery was started (column `recoveries.method`).
public enum RecoveryMethod: String, Sendable, CaseIterable {
    /// A code mailed to the account's verified address.
    case email
    /// One of the account's recovery codes.
    case recoveryCode = "recovery-code"
}

/// A stored recovery.
public struct RecoveryRecord: Sendable, Equatable {
    public enum Status: String, Sendable, CaseIterable { case pending, completed, cancelled }
    public let id: String
    public let userId: String
    public let method: RecoveryMethod
    public let notBefore: Date
    public let expiresAt: Date
    public let status: Status
}

/// A recovery to start (its token hashed).
public struct NewRecovery: Sendable {
    public let id: String
    public let userId: String
    public let method: RecoveryMethod
    public let tokenHash: [UInt8]
    public let delaySeconds: Int
    public let ttlSeconds: Int

    public init(id: String, userId: String, method: RecoveryMethod, tokenHash: [UInt8], delaySeconds: Int, ttlSeconds: Int) {
        self.id = id
        self.userId = userId
        self.method = method
        self.tokenHash = tokenHash
        self.delaySeconds = delaySeconds
        self.ttlSeconds = ttlSeconds
    }
}

/// An account as an address change's guard reads it: whether it has a live passkey, and its mail language.
public struct AddressChangeAccount: Sendable, Equatable {
    public let hasPasskeys: Bool
    public let language: String?

    public init(hasPasskeys: Bool, language: String?) {
        self.hasPasskeys = hasPasskeys
        self.language = language
    }
}

/// What `setVerifiedEmail` found.
public enum VerifiedEmailOutcome: Sendable, Equatable {
    case stored
    /// The account's address was not `previous` (nil: none) — another verification landed first:
    /// nothing was written; `current` is the address now.
    case previousChanged(current: String?)
}

/// Verified addresses, one-time codes, per-account limits, recovery codes and recoveries
/// (migration 9). Storage decides no policy: limits, lifetimes and hashes come from the caller.
/// The mail these changes send goes into their statements (`MailRepository.ctes`).
public final class RecoveryRepository: Sendable {
    let pool: PostgresPool

    init(pool: PostgresPool) { self.pool = pool }

    // MARK: Limits

    /// Counts one use of `key` in its window (a fixed window of `windowSeconds` from its first use)
    /// atomically — every instance bumps the same row — and returns the count including this one and
    /// the seconds left in the window.
    public func bump(key: [UInt8], windowSeconds: Int, by delta: Int = 1) throws(StorageError) -> (count: Int, retryAfter: Int) {
        try pool.run { c in
            let r = try c.query(Self.countUse(key: key, windowSeconds: windowSeconds, delta: delta))[0]
            return (try r.int("count"), try r.int("retry"))
        }
    }

    /// The one upsert that counts `delta` uses of `key` in its fixed window of `windowSeconds` (a
    /// new window once the old one has passed), only when `condition` holds; it returns the count
    /// including these and the seconds left in the window (`retry`). Usable as a CTE.
    static func countUse(key: [UInt8], windowSeconds: Int, delta: Int = 1, onlyIf condition: SQL = "TRUE") -> SQL {
        countUse(key: key, windowSeconds: windowSeconds, delta: "\(delta)::int", onlyIf: condition)
    }

    /// `countUse` with `delta` an expression over the statement's other CTEs.
    static func countUse(key: [UInt8], windowSeconds: Int, delta: SQL, onlyIf condition: SQL = "TRUE") -> SQL {
        """
        INSERT INTO account_limits (key, window_start, count) SELECT \(key), now(), \(fragment: delta) WHERE \(fragment: condition)
        ON CONFLICT (key) DO UPDATE SET
          count = CASE WHEN account_limits.window_start + make_interval(secs => \(windowSeconds)) <= now()
                       THEN EXCLUDED.count ELSE account_limits.count + EXCLUDED.count END,
          window_start = CASE WHEN account_limits.window_start + make_interval(secs => \(windowSeconds)) <= now()
                       THEN now() ELSE account_limits.window_start END
        RETURNING count, GREATEST(1, CEIL(EXTRACT(EPOCH FROM window_start + make_interval(secs => \(windowSeconds)) - now())))::int AS retry
        """
    }

    // MARK: Addresses

    public func email(userId: String) throws(StorageError) -> String? {
        try pool.run { c in try c.query("SELECT email FROM account_emails WHERE user_id = \(userId)").first.map { try $0.string("email") } }
    }

    /// Stores `email` as the account's verified address (replacing any), with the audit line and
    /// events, in one statement — only while the account's address is still `previous` (nil: none),
    /// the one the caller composed `notice` for (the mail telling a replaced address; written with
    /// the change), else `.previousChanged` and nothing written. Replacing an address also uses up
    /// the sign-in and recovery codes mailed to it. `.conflict` when another account has verified `email`.
    public func setVerifiedEmail(userId: String, email: String, previous: String?, notice: [MailToSend], audit: AuditRecord,
                                 events: [OutboxEvent]) throws(StorageError) -> VerifiedEmailOutcome {
        let statement = SQL.with([
            // Locks the account's address: a verification landing meanwhile is seen here, and a later one waits.
            ("cur", "SELECT email FROM account_emails WHERE user_id = \(userId) FOR UPDATE"),
            ("ok", "SELECT 1 AS one WHERE (SELECT email FROM cur) IS NOT DISTINCT FROM \(previous)::text"),
            // Codes already mailed to the old address (sign-in, recovery) stop working with it.
            ("codes", """
                UPDATE otp_challenges SET used_at = now()
                WHERE user_id = \(userId) AND purpose IN ('email-sign-in', 'recovery') AND used_at IS NULL
                  AND EXISTS (SELECT 1 FROM cur WHERE email <> \(email)) AND EXISTS (SELECT 1 FROM ok)
                RETURNING id
                """),
            // Another account's verified address fails here (unique index account_emails_email): `.conflict`.
            ("addr", """
                INSERT INTO account_emails (user_id, email, verified_at) SELECT \(userId), \(email), now() WHERE EXISTS (SELECT 1 FROM ok)
                ON CONFLICT (user_id) DO UPDATE SET email = EXCLUDED.email, verified_at = now()
                RETURNING user_id
                """),
        ]
            + AuditRepository.cte([audit], onlyIf: "addr")
            + OutboxRepository.ctes(notice.map(\.event) + events, onlyIf: "addr")
            + MailRepository.ctes(notice, onlyIf: "addr"),
            "SELECT EXISTS (SELECT 1 FROM addr) AS stored, (SELECT email FROM cur) AS current")
        return try pool.run { c in
            let row = try c.query(statement)[0]
            return try row.bool("stored") ? .stored : .previousChanged(current: try row.optionalString("current"))
        }
    }

    // MARK: One-time codes

    /// Stores a challenge and, in the same statement, the mail that carries its code (when there
    /// is one), with audit lines and events.
    /// With `limit`, only within it: the use counted first, and past the limit nothing else written
    /// (`.limited`). With `redeeming` (the step-up an address change needs, SPEC "Assurance"), only
    /// together with its redemption (`.conflict(.stepUpUsed)` otherwise).
    public func insert(_ challenge: NewCodeChallenge, mail: [MailToSend], audit: [AuditRecord] = [],
                       events: [OutboxEvent] = [], redeeming: StepUpRedemption? = nil,
                       language: String? = nil, limit: CodeStartLimit? = nil) throws(StorageError) -> CodeChallengeStarted {
        // One statement: the limit counted, the step-up redeemed (when there is one; the rest is
        // written only if it was), the challenge, its mail, audit lines and events, the account's
        // language memo, and the sweep of challenges expired a day ago (cheap: indexed).
        let limited: [(name: String, sql: SQL)] = limit.map { l in
            [("lim", Self.countUse(key: l.key, windowSeconds: l.windowSeconds)), ("go", "SELECT 1 AS one FROM lim WHERE count <= \(l.max)")]
        } ?? []
        let within: SQL? = limit == nil ? nil : "EXISTS (SELECT 1 FROM go)"
        let gate = StepUpRedemption.gate(redeeming, and: within)
        let statement = SQL.with(limited + StepUpRedemption.cte(redeeming, onlyIf: limit == nil ? nil : "go") + [("ch", """
            INSERT INTO otp_challenges (id, purpose, user_id, email, code_hash, max_attempts, expires_at)
            SELECT \(challenge.id), \(challenge.purpose.rawValue), \(challenge.userId), \(challenge.email), \(challenge.codeHash),
                   \(challenge.maxAttempts), now() + make_interval(secs => \(challenge.ttlSeconds))\(fragment: gate)
            RETURNING expires_at, user_id
            """), ("swept", "DELETE FROM otp_challenges WHERE expires_at < now() - interval '1 day'")]
            + MailRepository.ctes(mail, onlyIf: "ch") + AuditRepository.cte(audit, onlyIf: "ch")
            + OutboxRepository.ctes(mail.map(\.event) + events, onlyIf: "ch")
            + (challenge.userId.map { MailRepository.languageMemo(userId: $0, language: language, onlyIf: "ch") } ?? []),
            limit == nil ? "SELECT (SELECT expires_at FROM ch) AS expires_at, true AS within, 0 AS retry"
                : "SELECT (SELECT expires_at FROM ch) AS expires_at, EXISTS (SELECT 1 FROM go) AS within, lim.retry FROM lim")
        return try pool.run { c in
            let row = try c.query(statement)[0]
            guard try row.bool("within") else { return .limited(retryAfter: try row.int("retry")) }
            // No challenge: the step-up was used, not the user's, or its key revoked since.
            guard let expires = try row.optionalDate("expires_at") else { throw StorageError.conflict(.stepUpUsed) }
            return .started(expiresAt: expires)
        }
    }

    /// What an address change's guard reads (SPEC "Assurance": an account with a passkey needs a
    /// step-up for it), with the language its mail is written in: one read.
    public func addressChange(userId: String) throws(StorageError) -> AddressChangeAccount {
        try pool.run { c in
            let r = try c.query("""
                SELECT EXISTS (SELECT 1 FROM credentials c WHERE c.user_id = q.id AND c.revoked_at IS NULL) AS has_passkeys, u.language
                FROM (SELECT \(userId)::text AS id) q LEFT JOIN users u ON u.id = q.id
                """)[0]
            return AddressChangeAccount(hasPasskeys: try r.bool("has_passkeys"), language: try r.optionalString("language"))
        }
    }

    // MARK: Recovery codes

    /// Replaces the account's recovery codes with `hashes`, with the audit line, redeeming the
    /// step-up that approved it (a used one rolls the change back: `.conflict(.stepUpUsed)`).
    public func replaceRecoveryCodes(userId: String, hashes: [[UInt8]], audit: AuditRecord,
                                     redeeming: StepUpRedemption) throws(StorageError) {
        // One statement: the redemption, then (only if it held) the old codes gone, the new ones and the audit line.
        let rows = SQL.joined(hashes.map { "(\($0)::bytea)" }, separator: ", ")
        let statement = SQL.with(StepUpRedemption.cte(redeeming) + [
            ("gone", "DELETE FROM recovery_codes WHERE user_id = \(userId) AND EXISTS (SELECT 1 FROM redeemed)"),
            ("fresh", """
                INSERT INTO recovery_codes (user_id, code_hash)
                SELECT \(userId), h.hash FROM (VALUES \(fragment: rows)) AS h (hash) WHERE EXISTS (SELECT 1 FROM redeemed)
                RETURNING code_hash
                """),
        ] + AuditRepository.cte([audit], onlyIf: "redeemed"),
            "SELECT EXISTS (SELECT 1 FROM redeemed) AS redeemed")
        try pool.run { c in
            guard try c.query(statement)[0].bool("redeemed") else { throw StorageError.conflict(.stepUpUsed) }
        }
    }

    public func unusedRecoveryCodes(userId: String) throws(StorageError) -> Int {
        try pool.run { c in
            try c.query("SELECT count(*)::int AS n FROM recovery_codes WHERE user_id = \(userId) AND used_at IS NULL")[0].int("n")
        }
    }

    // MARK: Recoveries

    /// Starts a recovery, with its mail ("recovery started"), audit line and events, in one statement.
    /// `cancelTokenHash`: the mailed cancel link's token (SPEC "Assurance"), valid as long as the recovery.
    public func start(_ r: NewRecovery, mail: [MailToSend], audit: AuditRecord, events: [OutboxEvent],
                      cancelTokenHash: [UInt8]? = nil) throws(StorageError) -> RecoveryRecord {
        let statement = SQL.with(Self.starting(r, from: nil, cancelTokenHash: cancelTokenHash)
            + MailRepository.ctes(mail) + AuditRepository.cte([audit]) + OutboxRepository.ctes(mail.map(\.event) + events),
            "SELECT \(unsafeRaw: RecoveryRepository.columns) FROM rec")
        return try pool.run { c in try RecoveryRepository.recovery(try c.query(statement)[0]) }
    }

    /// The CTEs that start a recovery: `rec` (with `from`, a CTE of the same statement, only when
    /// that returned a row) and its cancel link's token.
    static func starting(_ r: NewRecovery, from source: String?, cancelTokenHash: [UInt8]?) -> [(name: String, sql: SQL)] {
        let from: SQL = source.map { " FROM \(unsafeRaw: $0)" } ?? ""
        return [("rec", """
            INSERT INTO recoveries (id, user_id, method, token_hash, not_before, expires_at)
            SELECT \(r.id), \(r.userId), \(r.method.rawValue), \(r.tokenHash), now() + make_interval(secs => \(r.delaySeconds)),
                   now() + make_interval(secs => \(r.delaySeconds + r.ttlSeconds))\(fragment: from)
            RETURNING \(unsafeRaw: RecoveryRepository.columns)
            """)]
            + (cancelTokenHash.map { hash in [("cancel_token", """
                INSERT INTO cancel_tokens (hash, user_id, recovery_id, expires_at)
                SELECT \(hash), user_id, id, expires_at FROM rec RETURNING hash
                """)] } ?? [])
    }

    /// The recovery a token belongs to, whatever its state, with the database's clock.
    public func recovery(tokenHash: [UInt8]) throws(StorageError) -> (RecoveryRecord, now: Date)? {
        try pool.run { c in try c.query(Self.readingRecovery(tokenHash: tokenHash)).first.map(Self.recoveryAndNow) }
    }

    /// `recovery(tokenHash:)`'s statement (registration options read it with the account too).
    static func readingRecovery(tokenHash: [UInt8]) -> SQL {
        "SELECT \(unsafeRaw: RecoveryRepository.columns), now() AS db_now FROM recoveries WHERE token_hash = \(tokenHash)"
    }

    static func recoveryAndNow(_ row: Row) throws -> (RecoveryRecord, now: Date) { (try recovery(row), try row.date("db_now")) }

    /// Cancels a pending recovery of `userId`, with `audit` and `events`, in one statement; false when
    /// it has none with that id (any state: the caller tells 404 from a finished one by `recovery(id:)`).
    public func cancel(id: String, userId: String, audit: AuditRecord, events: [OutboxEvent]) throws(StorageError) -> Bool {
        let statement = SQL.with([("rec", """
            UPDATE recoveries SET status = 'cancelled', finished_at = now()
            WHERE id = \(id) AND user_id = \(userId) AND status = 'pending' RETURNING id
            """)] + AuditRepository.cte([audit], onlyIf: "rec") + OutboxRepository.ctes(events, onlyIf: "rec"),
            "SELECT id FROM rec")
        return try pool.run { c in !(try c.query(statement)).isEmpty }
    }

    public func recovery(id: String) throws(StorageError) -> RecoveryRecord? {
        try pool.run { c in
            try c.query("SELECT \(unsafeRaw: RecoveryRepository.columns) FROM recoveries WHERE id = \(id)").first.map(RecoveryRepository.recovery)
        }
    }

    /// The account's pending recoveries (the banner).
    public func pending(userId: String) throws(StorageError) -> [RecoveryRecord] {
        try pool.run { c in
            try c.query("""
                SELECT \(unsafeRaw: RecoveryRepository.columns) FROM recoveries
                WHERE user_id = \(userId) AND status = 'pending' AND expires_at > now() ORDER BY created_at DESC
                """).map(RecoveryRepository.recovery)
        }
    }

    static let columns = "id, user_id, method, not_before, expires_at, status"

    static func recovery(_ r: Row) throws -> RecoveryRecord {
        RecoveryRecord(id: try r.string("id"), userId: try r.string("user_id"), method: try r.value("method"),
                       notBefore: try r.date("not_before"), expiresAt: try r.date("expires_at"), status: try r.value("status"))
    }
}
