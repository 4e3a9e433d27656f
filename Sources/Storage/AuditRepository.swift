import JSON
import PostgreSQL

/// One line for the append-only audit log. The caller decides every field: storage writes it, in
/// the same transaction (or statement) as the change it describes.
public struct AuditRecord: Sendable, Equatable {
    public var actor: String
    public var action: String
    public var subject: String?
    public var detail: JSONValue

    public init(actor: String, action: String, subject: String?, detail: JSONValue = .object([])) {
        self.actor = actor
        self.action = action
        self.subject = subject
        self.detail = detail
    }

    /// This line with `extra` members added to its detail (what only the statement learns).
    func with(detail extra: [(key: String, value: JSONValue)]) -> AuditRecord {
        var copy = self
        copy.detail = .object((detail.objectValue ?? []) + extra)
        return copy
    }
}

/// The audit log: written by every repository through `insert`, read here.
public final class AuditRepository: Sendable {
    let pool: PostgresPool

    init(pool: PostgresPool) { self.pool = pool }

    /// The one statement that writes audit lines: `INSERT INTO audit_log …` for `records` (not
    /// empty). With `onlyIf`, the name of a CTE of the same statement, the lines are written only
    /// when that CTE returned a row (the change they describe happened).
    static func insert(_ records: [AuditRecord], onlyIf cte: String? = nil) -> SQL {
        precondition(!records.isEmpty, "an audit insert needs at least one record")
        return insert([.records(records)], onlyIf: cte)!
    }

    /// `insert` for `rows` in order: lines the caller built, and templates written once per row of
    /// another CTE of the statement (`AuditTemplate.rows`); nil when there is nothing to write.
    static func insert(_ rows: [AuditRows], onlyIf cte: String? = nil) -> SQL? {
        let sources: [SQL] = rows.compactMap { part in
            switch part {
            case .records(let records) where records.isEmpty:
                return nil
            case .records(let records):
                let values = SQL.joined(records.map { r in
                    "(\(r.actor)::text, \(r.action)::text, \(r.subject)::text, \(PostgresValue.text(r.detail.text))::jsonb)"
                }, separator: ", ")
                return "VALUES \(fragment: values)"
            case .perRow(let select):
                return select
            }
        }
        guard !sources.isEmpty else { return nil }
        let condition: SQL = cte.map { "\nWHERE EXISTS (SELECT 1 FROM \(unsafeRaw: $0))" } ?? ""
        return """
            INSERT INTO audit_log (actor, action, subject, detail)
            SELECT a.actor, a.action, a.subject, a.detail FROM (\(fragment: SQL.joined(sources, separator: "\nUNION ALL "))) \
            AS a (actor, action, subject, detail)\(fragment: condition)
            RETURNING id
            """
    }

    /// `insert(records)` as a CTE named `audit` for `SQL.with`, or nothing when there are none.
    static func cte(_ records: [AuditRecord], onlyIf cte: String? = nil) -> [(name: String, sql: SQL)] {
        Self.cte([.records(records)], onlyIf: cte)
    }

    /// `insert(rows)` as a CTE named `audit`, or nothing when there are none.
    static func cte(_ rows: [AuditRows], onlyIf cte: String? = nil) -> [(name: String, sql: SQL)] {
        insert(rows, onlyIf: cte).map { [("audit", $0)] } ?? []
    }

    /// Writes `records` on `connection` (inside the caller's transaction); nothing when empty.
    static func write(_ records: [AuditRecord], on connection: PostgresConnection) throws {
        guard !records.isEmpty else { return }
        try connection.query(insert(records))
    }

    public func append(_ record: AuditRecord) throws(StorageError) {
        try pool.run { c in try AuditRepository.write([record], on: c) }
    }

    /// Newest first; `before` is the id to page from (exclusive). `user`: lines whose actor or
    /// subject is that user id; `action`: that action, or with `actionPrefix` every action starting with it.
    public func entries(limit: Int, before: Int64?, user: String? = nil, action: String? = nil,
                        actionPrefix: Bool = false) throws(StorageError) -> [AuditEntry] {
        try entries(AuditQuery(limit: limit, before: before, user: user, action: action, actionPrefix: actionPrefix))
    }

    public func entries(_ query: AuditQuery) throws(StorageError) -> [AuditEntry] {
        try pool.run { c in try c.query(AuditRepository.reading(query)).map(AuditRepository.entry) }
    }

    /// `entries`' statement (the admin API's caller resolution pipelines it too).
    static func reading(_ query: AuditQuery) -> SQL {
        // `subject <> actor` is audit_log_subject's predicate (0014): the same rows as `subject = u`
        // alone, since a line whose actor is u is found by the first arm.
        let byUser: SQL = query.user.map { "AND (a.actor = \($0) OR (a.subject = \($0) AND a.subject <> a.actor))" } ?? ""
        let byAction: SQL = query.action.map { query.actionPrefix ? "AND starts_with(a.action, \($0))" : "AND a.action = \($0)" } ?? ""
        return """
            SELECT a.id, a.at, a.actor, a.action, a.subject, a.detail::text AS detail, u.username AS actor_username
            FROM audit_log a LEFT JOIN users u ON u.id = a.actor
            WHERE a.id < \(query.before ?? Int64.max) \(fragment: byUser) \(fragment: byAction)
            ORDER BY a.id DESC LIMIT \(query.limit)
            """
    }

    static func entry(_ r: Row) throws -> AuditEntry {
        AuditEntry(id: try r.int64("id"), at: try r.date("at"), actor: try r.string("actor"), action: try r.string("action"),
                   subject: try r.optionalString("subject"), detail: try r.jsonValue("detail"),
                   actorUsername: try r.optionalString("actor_username"))
    }
}

/// One page of the audit log: newest first, `limit` lines with ids below `before`; `user`: lines
/// whose actor or subject is that user id; `action`: that action, or with `actionPrefix` every
/// action starting with it.
public struct AuditQuery: Sendable, Equatable {
    public let limit: Int
    public let before: Int64?
    public let user: String?
    public let action: String?
    public let actionPrefix: Bool

    public init(limit: Int, before: Int64?, user: String?, action: String?, actionPrefix: Bool) {
        self.limit = limit
        self.before = before
        self.user = user
        self.action = action
        self.actionPrefix = actionPrefix
    }
}
