import Foundation
import JSON
import PostgreSQL

// Storage is called, never calls back: what a change writes besides itself (audit lines, outbox
// events, mail) is handed to the repository as values built before the call. When what is written
// depends on what the change found — one `session.revoked` per session a revocation ended, the
// recoveries a completed one cancelled — the caller hands a template instead, and the statement
// writes it once per row of the CTE that made the change (`INSERT … SELECT … FROM that_cte`), with
// the members only that row knows. No closure runs inside a transaction, and the change and
// everything it writes stay one statement.

/// An outbox event a statement writes once for every row its change returned — none, one or many.
/// Each is about that row's account (`accountId`, and `userId` in `data`); the repository method
/// that takes the template says which other members of `data` it adds from the row.
public struct EventTemplate: Sendable, Equatable {
    /// Each event's id is `idPrefix` followed by 22 base64url characters of SHA-256(`seed` "/" the
    /// row's key): unique per row, and still drawn from the caller's randomness.
    public let idPrefix: String
    public let seed: String
    public let type: EventType
    /// The members the caller knows (a JSON object); the row's win over these.
    public let data: JSONValue
    /// As `OutboxEvent.maxAgeSeconds`. Templates fan out to the subscribed webhooks only.
    public let maxAgeSeconds: Int
    /// As `OutboxEvent.createdAt`: the app's clock (one clock, rule 2).
    public let createdAt: Date

    public init(idPrefix: String, seed: String, type: EventType, data: JSONValue = .object([]), maxAgeSeconds: Int, createdAt: Date) {
        self.idPrefix = idPrefix
        self.seed = seed
        self.type = type
        self.data = data
        self.maxAgeSeconds = maxAgeSeconds
        self.createdAt = createdAt
    }
}

/// An audit line a statement writes once for every row its change returned. The repository method
/// that takes it sets `subject` from the row (the account the row belongs to, or the origin an app
/// sync added) and says which `detail` members it adds.
public struct AuditTemplate: Sendable, Equatable {
    /// nil: the row's subject acted itself (the owner of a cancel link, who has no session).
    public var actor: String?
    public var action: String
    /// The members the caller knows (a JSON object); the row's win over these.
    public var detail: JSONValue

    public init(actor: String?, action: String, detail: JSONValue = .object([])) {
        self.actor = actor
        self.action = action
        self.detail = detail
    }
}

/// What one `outbox_events` insert writes, in this order (the order becomes the events' `seq`).
enum EventRows {
    case events([OutboxEvent])
    /// A SELECT of the insert's columns (`EventTemplate.rows`).
    case perRow(SQL)
}

/// What one `audit_log` insert writes, in this order.
enum AuditRows {
    case records([AuditRecord])
    /// A SELECT of the insert's columns (`AuditTemplate.rows`).
    case perRow(SQL)
}

/// A member name and the SQL expression (over the template's rows) that gives its value.
typealias RowMember = (name: String, value: SQL)

extension EventTemplate {
    /// This template once per row of `from` (a CTE of the same statement, or a join of them): about
    /// `account`, its id derived from `key` (text, unique per row), with `members` added to `data`.
    func rows(from: SQL, account: SQL, key: SQL, members: [RowMember]) -> EventRows {
        let digest: SQL = "substring(sha256(convert_to(\(seed)::text || '/' || (\(fragment: key)), 'UTF8')) FROM 1 FOR 16)"
        return .perRow("""
            SELECT \(idPrefix)::text || \(fragment: SQL.base64url(digest)) AS id, \(type.rawValue)::text AS type,
                   (\(fragment: account))::text AS account_id,
                   jsonb_build_object('userId', (\(fragment: account))::text) || \(PostgresValue.text(data.text))::jsonb
                       || \(fragment: SQL.object(members)) AS data,
                   \(createdAt)::timestamptz AS created_at,
                   \(createdAt.addingTimeInterval(Double(maxAgeSeconds)))::timestamptz AS expires_at, true AS webhooks, false AS direct
            FROM \(fragment: from)
            """)
    }
}

extension AuditRecord {
    /// This line once for every row of `from` (a CTE of the same statement): written only when
    /// the change it describes, of those the statement may make, is the one that happened.
    func rows(from: SQL) -> AuditRows {
        .perRow("""
            SELECT \(actor)::text, \(action)::text, \(subject)::text, \(PostgresValue.text(detail.text))::jsonb FROM \(fragment: from)
            """)
    }
}

extension AuditTemplate {
    /// This template once per row of `from`, about `subject`, with `members` added to `detail`.
    func rows(from: SQL, subject: SQL, members: [RowMember] = []) -> AuditRows {
        .perRow("""
            SELECT COALESCE(\(actor)::text, (\(fragment: subject))::text) AS actor, \(action)::text AS action,
                   (\(fragment: subject))::text AS subject,
                   \(PostgresValue.text(detail.text))::jsonb || \(fragment: SQL.object(members)) AS detail
            FROM \(fragment: from)
            """)
    }
}

extension SQL {
    /// `jsonb_build_object(name, value, …)`; the names are binds too.
    static func object(_ members: [RowMember]) -> SQL {
        let pairs = SQL.joined(members.map { m in "\(m.name)::text, \(fragment: m.value)" }, separator: ", ")
        return "jsonb_build_object(\(fragment: pairs))"
    }

    /// A bytea expression as `Base64URL.encode` writes it: base64url without padding (`encode`'s
    /// base64 breaks lines every 76 characters; those go too).
    static func base64url(_ bytes: SQL) -> SQL {
        "translate(rtrim(replace(encode(\(fragment: bytes), 'base64'), E'\\n', ''), '='), '+/', '-_')"
    }

    /// An AAGUID as `formatUUID` writes it: 8-4-4-4-12 lowercase hex for 16 bytes, plain hex otherwise.
    static func uuidText(_ bytes: SQL) -> SQL {
        "CASE WHEN length(\(fragment: bytes)) = 16 THEN encode(\(fragment: bytes), 'hex')::uuid::text ELSE encode(\(fragment: bytes), 'hex') END"
    }
}
