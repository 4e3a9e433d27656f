import Foundation
import PostgreSQL

/// A recovery code submitted with a username, for the one statement that counts it and, when it
/// is right, starts the recovery.
public struct RecoveryCodeSubmission: Sendable {
    /// The account the username named (nil: nobody; the code is then always wrong).
    public let userId: String?
    public let hash: [UInt8]
    /// The username's wrong codes: at most `limit.max` in each window, a right one past it refused too.
    public let limit: CodeStartLimit
    /// Written once when the code is wrong (within the limit).
    public let rejected: AuditRecord

    public init(userId: String?, hash: [UInt8], limit: CodeStartLimit, rejected: AuditRecord) {
        self.userId = userId
        self.hash = hash
        self.limit = limit
        self.rejected = rejected
    }
}

/// What a recovery code's statement did.
public enum RecoveryCodeOutcome: Sendable, Equatable {
    /// Past the username's limit: counted, nothing else written.
    case limited(retryAfter: Int)
    /// Wrong or used: counted and audited.
    case wrong
    case started(RecoveryRecord)
}

extension RecoveryRepository {
    /// A recovery by recovery code, in one statement: the account's unused code locked (a
    /// concurrent submission of the same code waits, then finds it used and counts as wrong); the
    /// username's limit counted — a wrong code counts one, a right one nothing, and a right one is
    /// refused as well once the wrong ones have filled the window; within it, the code used up and
    /// the recovery started with its mail, audit line, events and cancel link (as `start`), or the
    /// rejection audited.
    public func recover(_ s: RecoveryCodeSubmission, recovery r: NewRecovery, mail: [MailToSend], audit: AuditRecord,
                        events: [OutboxEvent], cancelTokenHash: [UInt8]?) throws(StorageError) -> RecoveryCodeOutcome {
        let statement = SQL.with([
            ("code", """
                SELECT code_hash FROM recovery_codes WHERE user_id = \(s.userId)::text AND code_hash = \(s.hash) AND used_at IS NULL
                FOR UPDATE
                """),
            ("lim", Self.countUse(key: s.limit.key, windowSeconds: s.limit.windowSeconds,
                                  delta: "CASE WHEN EXISTS (SELECT 1 FROM code) THEN 0 ELSE 1 END")),
            ("within", "SELECT 1 AS one FROM lim WHERE lim.count + CASE WHEN EXISTS (SELECT 1 FROM code) THEN 1 ELSE 0 END <= \(s.limit.max)"),
            ("used", """
                UPDATE recovery_codes SET used_at = now()
                WHERE user_id = \(s.userId)::text AND code_hash IN (SELECT code_hash FROM code) AND EXISTS (SELECT 1 FROM within)
                RETURNING user_id
                """),
            ("refused", "SELECT 1 AS one FROM within WHERE NOT EXISTS (SELECT 1 FROM used)"),
        ] + Self.starting(r, from: "used", cancelTokenHash: cancelTokenHash) + MailRepository.ctes(mail, onlyIf: "rec")
            + AuditRepository.cte([(s.rejected, "refused"), (audit, "rec")].map { a, cte in
                AuditTemplate(actor: a.actor, action: a.action, detail: a.detail).rows(from: "\(unsafeRaw: cte)", subject: "\(a.subject)::text")
            })
            + OutboxRepository.ctes(mail.map(\.event) + events, onlyIf: "rec"),
            "SELECT lim.count, lim.retry, EXISTS (SELECT 1 FROM within) AS within, rec.* FROM lim LEFT JOIN rec ON true")
        return try pool.run { c in
            let row = try c.query(statement)[0]
            guard try row.bool("within") else { return .limited(retryAfter: try row.int("retry")) }
            return try row.isNull("id") ? .wrong : .started(try RecoveryRepository.recovery(row))
        }
    }
}
