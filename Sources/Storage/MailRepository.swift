import JSON
import PostgreSQL

/// A mail to send, written with the change that makes it (migration 9): the message row and its
/// outbox event (channel `mail`, target = `id`) go in the same statement.
public struct MailToSend: Sendable {
    public let id: String
    public let recipient: String
    /// The whole RFC 5322 message.
    public let message: [UInt8]
    /// The outbox event that carries it (no address, no code in its data).
    public let event: OutboxEvent

    public init(id: String, recipient: String, message: [UInt8], event: OutboxEvent) {
        self.id = id
        self.recipient = recipient
        self.message = message
        self.event = event
    }
}

/// Mail waiting to go out (`mail_messages`, migration 9). A change that mails writes the message
/// with `ctes` inside its own statement (and the message's `event` with its other events); the
/// mail consumer (`MailService`, the outbox channel `channel`) gets it with its delivery's claim
/// (`OutboxRepository.claim`, `ClaimedDelivery.mail`) and clears it with `sent(id:)`.
public final class MailRepository: Sendable {
    let pool: PostgresPool

    init(pool: PostgresPool) { self.pool = pool }

    /// The outbox channel mail goes out on; a delivery's target is the message's id.
    public static let channel = OutboxChannel.mail

    /// A data-modifying CTE storing `mail`'s rows, for `SQL.with` (a shared fragment, like
    /// `AuditRepository.cte`); nothing when there is none. With `onlyIf` (a CTE of the same
    /// statement), only when that CTE returned a row. The caller writes `mail.map(\.event)` with
    /// the statement's other events.
    static func ctes(_ mail: [MailToSend], onlyIf cte: String? = nil) -> [(name: String, sql: SQL)] {
        guard !mail.isEmpty else { return [] }
        let rows = SQL.joined(mail.map { m in "(\(m.id)::text, \(m.recipient)::text, \(m.message)::bytea)" }, separator: ", ")
        let condition: SQL = cte.map { "\nWHERE EXISTS (SELECT 1 FROM \(unsafeRaw: $0))" } ?? ""
        return [("mail_rows", """
            INSERT INTO mail_messages (id, recipient, message)
            SELECT m.id, m.recipient, m.message FROM (VALUES \(fragment: rows)) AS m (id, recipient, message)\(fragment: condition)
            RETURNING id
            """)]
    }

    /// A mail went out: its text (which may hold a code) is cleared.
    public func sent(id: String) throws(StorageError) {
        try pool.run { c in try c.execute("UPDATE mail_messages SET sent_at = now(), message = NULL WHERE id = \(id)") }
    }

    /// The language the account last used (a catalog tag such as `de`, migration 19); nil when it never said.
    public func language(userId: String) throws(StorageError) -> String? {
        try pool.run { c in try c.query("SELECT language FROM users WHERE id = \(userId)").first.flatMap { try $0.optionalString("language") } }
    }

    /// The language memo (the account's mail language from now on: the one it last used) as a CTE
    /// `lang` of the change's own statement, written only when it changed and only when `onlyIf`'s
    /// CTE returned a row; nothing when `language` is nil.
    static func languageMemo(userId: String, language: String?, onlyIf cte: String) -> [(name: String, sql: SQL)] {
        guard let language else { return [] }
        return [("lang", """
            UPDATE users SET language = \(language)
            WHERE id = \(userId) AND language IS DISTINCT FROM \(language) AND EXISTS (SELECT 1 FROM \(unsafeRaw: cte))
            RETURNING id
            """)]
    }
}
