import Foundation
import PostgreSQL

/// What a code's verify reads before it decides: the live challenge of that purpose with that id
/// (unused, unexpired, attempts left) and the account it names, with that account's verified
/// address and mail language. All account fields nil for nobody.
public struct CodeChallengeRead: Sendable {
    public let userId: String?
    /// The address the code was mailed to when the challenge keeps it (an address verification's new address).
    public let email: String?
    public let user: UserRecord?
    /// The account's verified address now.
    public let accountEmail: String?
    public let language: String?

    public init(userId: String?, email: String?, user: UserRecord?, accountEmail: String?, language: String?) {
        self.userId = userId
        self.email = email
        self.user = user
        self.accountEmail = accountEmail
        self.language = language
    }
}

/// One submission of a mailed code, for the statement that tries it and does what a right one does.
public struct CodeSubmission: Sendable {
    public let id: String
    public let purpose: NewCodeChallenge.Purpose
    /// The account the read found (nil: nobody); the challenge must still name it.
    public let userId: String?
    public let presentedHash: [UInt8]
    /// Written once when the code is wrong, about the challenge's account.
    public let rejected: AuditTemplate

    public init(id: String, purpose: NewCodeChallenge.Purpose, userId: String?, presentedHash: [UInt8], rejected: AuditTemplate) {
        self.id = id
        self.purpose = purpose
        self.userId = userId
        self.presentedHash = presentedHash
        self.rejected = rejected
    }
}

/// What one submission of a mailed code found.
public enum CodeOutcome<Value: Sendable>: Sendable {
    /// No live challenge of that purpose with that id for that account (unknown, used, expired, out
    /// of attempts): nothing written.
    case noChallenge
    /// The attempt was counted and the code was wrong (the rejection's audit line written with it).
    case wrong
    /// The attempt was counted, the challenge used up, and what a right code does written.
    case right(Value)
}

/// What an address verification's one statement did.
public enum AddressVerification: Sendable, Equatable {
    case noChallenge
    case wrong
    case stored
    /// The account's address was not the `previous` the caller composed the notice for (another
    /// verification landed first): nothing was written, the attempt not counted; `current` is the address now.
    case previousChanged(current: String?)
}

extension RecoveryRepository {
    /// The one read of a code's verify (`CodeChallengeRead`); nil when there is no live challenge.
    public func codeChallenge(id: String, purpose: NewCodeChallenge.Purpose) throws(StorageError) -> CodeChallengeRead? {
        try pool.run { c in
            try c.query("""
                SELECT o.user_id AS challenge_user, o.email AS sent_to, e.email AS account_email, u.language,
                       u.id, u.user_handle, u.username, u.display_name
                FROM otp_challenges o LEFT JOIN users u ON u.id = o.user_id LEFT JOIN account_emails e ON e.user_id = o.user_id
                WHERE o.id = \(id) AND o.purpose = \(purpose.rawValue) AND o.used_at IS NULL AND o.expires_at > now()
                  AND o.attempts < o.max_attempts
                """).first.map { r in
                CodeChallengeRead(userId: try r.optionalString("challenge_user"), email: try r.optionalString("sent_to"),
                                  user: try r.isNull("id") ? nil : try AccountRepository.user(r),
                                  accountEmail: try r.optionalString("account_email"), language: try r.optionalString("language"))
            }
        }
    }

    /// The CTEs that try a code: `att` counts the attempt (so concurrent guesses never exceed the
    /// attempts) and uses the challenge up when `presentedHash` is its code's hash (single use even
    /// under concurrent submissions: a second one waits on the row and then finds it used), only
    /// while `condition` holds; `missed` is its row when the code was wrong, `hit` when right.
    /// Comparing the hashes in SQL leaks nothing a timing could use: both sides are HMACs under the
    /// deployment's secret, whose bytes a guesser cannot steer.
    static func attempt(_ s: CodeSubmission, onlyIf condition: SQL = "TRUE") -> [(name: String, sql: SQL)] {
        [("att", """
            UPDATE otp_challenges SET attempts = attempts + 1,
                used_at = CASE WHEN code_hash = \(s.presentedHash) THEN now() END
            WHERE id = \(s.id) AND purpose = \(s.purpose.rawValue) AND user_id IS NOT DISTINCT FROM \(s.userId)::text
              AND used_at IS NULL AND expires_at > now() AND attempts < max_attempts AND \(fragment: condition)
            RETURNING id, user_id, email, used_at IS NOT NULL AS matched
            """),
         ("missed", "SELECT user_id FROM att WHERE NOT matched"),
         ("hit", "SELECT id, user_id, email FROM att WHERE matched")]
    }

    /// The statement's audit lines: the rejection once when the code was wrong, `records` once
    /// when `cte` (what a right code wrote) returned a row.
    static func audit(_ s: CodeSubmission, _ records: [AuditRecord], onlyIf cte: String) -> [(name: String, sql: SQL)] {
        AuditRepository.cte([s.rejected.rows(from: "missed", subject: "missed.user_id")] + records.map { r in
            AuditTemplate(actor: r.actor, action: r.action, detail: r.detail).rows(from: "\(unsafeRaw: cte)", subject: "\(r.subject)::text")
        })
    }

    static let matched: SQL = "(SELECT matched FROM att) AS matched"

    /// `matched` read back: nil → no challenge, false → wrong.
    static func outcome<T>(_ row: Row, right: () throws -> T) throws -> CodeOutcome<T> {
        guard try !row.isNull("matched") else { return .noChallenge }
        return try row.bool("matched") ? .right(try right()) : .wrong
    }

    /// An address verification, in one statement: only while the account's address is still
    /// `previous` (the one `notice` was composed for; else `.previousChanged`, nothing written),
    /// the code tried (`attempt`), and with a right one the challenge's address stored as the
    /// account's verified one, the sign-in and recovery codes mailed to a replaced address used up,
    /// `audit`, `events` and the notice. `.conflict` (nothing written) when another account has
    /// verified the address.
    public func verifyAddress(_ s: CodeSubmission, previous: String?, notice: [MailToSend], audit: AuditRecord,
                              events: [OutboxEvent]) throws(StorageError) -> AddressVerification {
        let statement = SQL.with([
            // Locks the account's address: a verification landing meanwhile is seen here, and a later one waits.
            ("cur", "SELECT email FROM account_emails WHERE user_id = \(s.userId) FOR UPDATE"),
            ("ok", "SELECT 1 AS one WHERE (SELECT email FROM cur) IS NOT DISTINCT FROM \(previous)::text"),
        ] + Self.attempt(s, onlyIf: "EXISTS (SELECT 1 FROM ok)") + [
            // Codes already mailed to the old address (sign-in, recovery) stop working with it.
            ("codes", """
                UPDATE otp_challenges SET used_at = now()
                WHERE user_id = \(s.userId) AND purpose IN ('email-sign-in', 'recovery') AND used_at IS NULL
                  AND EXISTS (SELECT 1 FROM cur, hit WHERE cur.email <> hit.email)
                RETURNING id
                """),
            // Another account's verified address fails here (unique index account_emails_email): `.conflict`.
            ("addr", """
                INSERT INTO account_emails (user_id, email, verified_at) SELECT user_id, email, now() FROM hit
                ON CONFLICT (user_id) DO UPDATE SET email = EXCLUDED.email, verified_at = now()
                RETURNING user_id
                """),
        ]
            + Self.audit(s, [audit], onlyIf: "addr")
            + OutboxRepository.ctes(notice.map(\.event) + events, onlyIf: "addr")
            + MailRepository.ctes(notice, onlyIf: "addr"),
            "SELECT EXISTS (SELECT 1 FROM ok) AS ok, (SELECT email FROM cur) AS current, \(fragment: Self.matched)")
        return try pool.run { c in
            let row = try c.query(statement)[0]
            guard try row.bool("ok") else { return .previousChanged(current: try row.optionalString("current")) }
            switch try Self.outcome(row, right: {}) {
            case .noChallenge: return .noChallenge
            case .wrong: return .wrong
            case .right: return .stored
            }
        }
    }

    /// An email sign-in, in one statement: the code tried (`attempt`) and with a right one the
    /// session started (`SessionRepository.ctes`), `audit` and the account's language memo.
    public func signIn(_ s: CodeSubmission, session: NewSession, audit: [AuditRecord],
                       language: String?) throws(StorageError) -> CodeOutcome<Bool> {
        let statement = SQL.with(Self.attempt(s) + SessionRepository.ctes(session, from: "hit")
            + Self.audit(s, audit, onlyIf: "tok")
            + MailRepository.languageMemo(userId: session.userId, language: language, onlyIf: "tok"),
            "SELECT \(fragment: Self.matched), EXISTS (SELECT 1 FROM tok) AS started")
        return try pool.run { c in
            let row = try c.query(statement)[0]
            return try Self.outcome(row) { try row.bool("started") }
        }
    }

    /// A recovery by mailed code, in one statement: the code tried (`attempt`) only while the
    /// account's verified address is still `address` (the one the notice was composed for), and
    /// with a right one the recovery started with its mail, audit line, events and cancel link (as `start`).
    public func recover(_ s: CodeSubmission, address: String?, recovery r: NewRecovery, mail: [MailToSend], audit: AuditRecord,
                        events: [OutboxEvent], cancelTokenHash: [UInt8]?) throws(StorageError) -> CodeOutcome<RecoveryRecord> {
        let unchanged: SQL = "(SELECT email FROM account_emails WHERE user_id = \(s.userId)::text) IS NOT DISTINCT FROM \(address)::text"
        let statement = SQL.with(Self.attempt(s, onlyIf: unchanged) + Self.starting(r, from: "hit", cancelTokenHash: cancelTokenHash)
            + MailRepository.ctes(mail, onlyIf: "rec") + Self.audit(s, [audit], onlyIf: "rec")
            + OutboxRepository.ctes(mail.map(\.event) + events, onlyIf: "rec"),
            "SELECT \(fragment: Self.matched), rec.* FROM (VALUES (1)) AS one (x) LEFT JOIN rec ON true")
        return try pool.run { c in
            let row = try c.query(statement)[0]
            return try Self.outcome(row) { try RecoveryRepository.recovery(row) }
        }
    }
}
