import Foundation
import PostgreSQL

/// Who a mailed code would go to, as a start finds them: the account and its verified address (and
/// the language its mail is written in), or nobody.
public struct CodeRecipient: Sendable, Equatable {
    public let userId: String?
    /// The account's verified address (normalised); nil without one, or without an account.
    public let email: String?
    public let language: String?

    public init(userId: String?, email: String?, language: String?) {
        self.userId = userId
        self.email = email
        self.language = language
    }
}

/// How a start names the account: a username, or an address (normalised).
public enum CodeRecipientLookup: Sendable {
    case username(String)
    case email(String)
}

/// A fixed-window limit a start counts against: `max` uses per `windowSeconds` of `key`.
public struct CodeStartLimit: Sendable {
    public let key: [UInt8]
    public let windowSeconds: Int
    public let max: Int

    public init(key: [UInt8], windowSeconds: Int, max: Int) {
        self.key = key
        self.windowSeconds = windowSeconds
        self.max = max
    }
}

/// The whole of an email sign-in's or a recovery's start, written by one statement whether or not
/// anyone has the username or address: the same statement, the same binds by count and type.
public struct CodeChallengeStart: Sendable {
    /// `userId` is the account's only when a mail may go (`sends`); the hash is the real code's.
    public let challenge: NewCodeChallenge
    /// What is stored instead of the code's hash when no mail goes (nobody, or past the account's limit).
    public let unmatchableHash: [UInt8]
    /// Whether there is someone to mail: an account with a verified address.
    public let sends: Bool
    /// Per username or address, for everyone: past it, nothing is written and the start is refused.
    public let identifierLimit: CodeStartLimit
    /// Per account (counted only when `sends`): past it the start answers as for nobody and mails nothing.
    public let accountLimit: CodeStartLimit
    /// The code's mail, composed whether or not it goes (written only when it does).
    public let mail: MailToSend
    public let audit: AuditRecord

    public init(challenge: NewCodeChallenge, unmatchableHash: [UInt8], sends: Bool, identifierLimit: CodeStartLimit,
                accountLimit: CodeStartLimit, mail: MailToSend, audit: AuditRecord) {
        self.challenge = challenge
        self.unmatchableHash = unmatchableHash
        self.sends = sends
        self.identifierLimit = identifierLimit
        self.accountLimit = accountLimit
        self.mail = mail
        self.audit = audit
    }
}

public enum CodeChallengeStarted: Sendable, Equatable {
    /// The challenge is stored (with a mail, or answering as for nobody).
    case started(expiresAt: Date)
    /// The username's or address's limit was already spent: nothing written but the count.
    case limited(retryAfter: Int)
}

extension RecoveryRepository {
    /// The one read of a start: the account a username or verified address names, its address and
    /// mail language — one row always, all null for nobody.
    public func recipient(_ lookup: CodeRecipientLookup) throws(StorageError) -> CodeRecipient {
        let statement: SQL = switch lookup {
        case .username(let name): """
            SELECT u.id AS user_id, e.email, u.language FROM (VALUES (1)) AS one (x)
            LEFT JOIN users u ON u.username = \(name) LEFT JOIN account_emails e ON e.user_id = u.id
            """
        case .email(let address): """
            SELECT u.id AS user_id, e.email, u.language FROM (VALUES (1)) AS one (x)
            LEFT JOIN account_emails e ON e.email = \(address) LEFT JOIN users u ON u.id = e.user_id
            """
        }
        return try pool.run { c in
            let r = try c.query(statement)[0]
            return CodeRecipient(userId: try r.optionalString("user_id"), email: try r.optionalString("email"),
                                 language: try r.optionalString("language"))
        }
    }

    /// The one write of a start: the limits counted, the challenge stored (with the code's hash
    /// only when a mail goes), its mail and event (only then), the audit line, and expired
    /// challenges swept — one statement, whose text and binds do not depend on `sends`.
    public func startChallenge(_ s: CodeChallengeStart) throws(StorageError) -> CodeChallengeStarted {
        let c = s.challenge
        let statement = SQL.with([
            ("id_limit", Self.countUse(key: s.identifierLimit.key, windowSeconds: s.identifierLimit.windowSeconds)),
            ("go", "SELECT 1 FROM id_limit WHERE count <= \(s.identifierLimit.max)"),
            ("account_limit", Self.countUse(key: s.accountLimit.key, windowSeconds: s.accountLimit.windowSeconds,
                                             onlyIf: "\(s.sends) AND EXISTS (SELECT 1 FROM go)")),
            ("mails", "SELECT 1 FROM account_limit WHERE count <= \(s.accountLimit.max)"),
            ("ch", """
                INSERT INTO otp_challenges (id, purpose, user_id, email, code_hash, max_attempts, expires_at)
                SELECT \(c.id), \(c.purpose.rawValue), \(c.userId), NULL,
                       CASE WHEN EXISTS (SELECT 1 FROM mails) THEN \(c.codeHash) ELSE \(s.unmatchableHash) END,
                       \(c.maxAttempts), now() + make_interval(secs => \(c.ttlSeconds))
                FROM go
                RETURNING expires_at
                """),
            // Expired challenges go now and then (cheap: indexed).
            ("swept", "DELETE FROM otp_challenges WHERE expires_at < now() - interval '1 day'"),
        ] + MailRepository.ctes([s.mail], onlyIf: "mails") + AuditRepository.cte([s.audit], onlyIf: "go")
            + OutboxRepository.ctes([s.mail.event], onlyIf: "mails"),
            "SELECT id_limit.count, id_limit.retry, (SELECT expires_at FROM ch) AS expires_at FROM id_limit")
        return try pool.run { connection in
            let r = try connection.query(statement)[0]
            guard let expires = try r.optionalDate("expires_at") else { return .limited(retryAfter: try r.int("retry")) }
            return .started(expiresAt: expires)
        }
    }
}
