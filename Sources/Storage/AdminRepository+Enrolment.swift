import Foundation
import PostgreSQL

/// What `latchkey admins link` found.
public enum AdminLinkOutcome: Sendable, Equatable {
    /// A fresh ticket for this admin (any unused one replaced), valid until `expiresAt`.
    case issued(user: UserRecord, expiresAt: Date)
    case unknownUser
    case notAdmin
    /// The admin has a passkey: they sign in with it (nothing written).
    case hasPasskey
}

extension AdminRepository {
    /// `latchkey admins link <username>` (SPEC "Assurance": Admins): a fresh passkey-enrolment ticket
    /// `hash` for an admin with no live passkey, replacing any unused one, with `audit` about that
    /// admin — one statement, which writes nothing unless the outcome is `.issued`.
    public func enrolmentLink(username: String, hash: [UInt8], ttlSeconds: Int, audit: AuditTemplate) throws(StorageError) -> AdminLinkOutcome {
        let statement = SQL.with([
            ("usr", """
                SELECT u.id, u.user_handle, u.username, u.display_name,
                       EXISTS (SELECT 1 FROM admins a WHERE a.user_id = u.id) AS is_admin,
                       EXISTS (SELECT 1 FROM credentials c WHERE c.user_id = u.id AND c.revoked_at IS NULL) AS has_passkey
                FROM users u WHERE u.username = \(username)
                """),
            ("adm", "SELECT id FROM usr WHERE is_admin AND NOT has_passkey"),
            ("old", """
                UPDATE enrolment_tickets SET used_at = now()
                WHERE user_id = (SELECT id FROM adm) AND purpose = 'passkey' AND used_at IS NULL RETURNING hash
                """),
            ("ins", """
                INSERT INTO enrolment_tickets (hash, user_id, purpose, expires_at)
                SELECT \(hash), id, 'passkey', now() + make_interval(secs => \(ttlSeconds)) FROM adm
                RETURNING user_id, expires_at
                """),
        ] + AuditRepository.cte([audit.rows(from: "ins", subject: "ins.user_id", members: [("replaced", "(SELECT count(*) FROM old)")])]),
            """
            SELECT usr.id, usr.user_handle, usr.username, usr.display_name, usr.is_admin, usr.has_passkey,
                   (SELECT expires_at FROM ins) AS expires_at
            FROM usr
            """)
        return try pool.run { c in
            guard let r = try c.query(statement).first else { return .unknownUser }
            guard try r.bool("is_admin") else { return .notAdmin }
            guard try !r.bool("has_passkey"), !(try r.isNull("expires_at")) else { return .hasPasskey }
            return .issued(user: try AccountRepository.user(r), expiresAt: try r.date("expires_at"))
        }
    }
}
