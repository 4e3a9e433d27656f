import Foundation
import PostgreSQL

/// A valid (unused, unexpired) passkey-enrolment ticket, as the registration options read it.
public struct EnrolmentTicket: Sendable, Equatable {
    public let hash: [UInt8]
    public let userId: String
    /// Issued by an admin by Latchkey's account id: the passkey it registers is held even when the
    /// account has no passkey (SPEC "Admin console" → "Tickets.").
    public let holds: Bool

    public init(hash: [UInt8], userId: String, holds: Bool) {
        self.hash = hash
        self.userId = userId
        self.holds = holds
    }
}

/// A single-use ticket to store: its hash, what it enrols, how long it lives, and whether the
/// passkey it registers is held whatever the account has.
public struct NewTicket: Sendable, Equatable {
    public let hash: [UInt8]
    public let purpose: TicketPurpose
    public let ttlSeconds: Int
    public let holds: Bool

    public init(hash: [UInt8], purpose: TicketPurpose, ttlSeconds: Int, holds: Bool = false) {
        self.hash = hash
        self.purpose = purpose
        self.ttlSeconds = ttlSeconds
        self.holds = holds
    }
}

/// The account a ticket is for: by Latchkey's id, or by the id its app backend knows it by.
public enum TicketAccount: Sendable, Equatable {
    case id(String)
    case externalId(String)
}

/// A stored ticket: the account it is for, and when it expires.
public struct IssuedTicketRow: Sendable, Equatable {
    public let userId: String
    public let expiresAt: Date

    public init(userId: String, expiresAt: Date) {
        self.userId = userId
        self.expiresAt = expiresAt
    }
}

extension AccountRepository {
    // MARK: Enrolment tickets

    /// Stores a single-use ticket with its audit line and, with `redeeming` (an admin's approval),
    /// that step-up's redemption, in one statement; returns when it expires. A redemption that
    /// fails: `.conflict(.stepUpUsed)`, nothing written. `holds`: the passkey it registers is held
    /// whatever the account has.
    public func createTicket(hash: [UInt8], userId: String, purpose: TicketPurpose = .passkey, ttlSeconds: Int,
                             audit: AuditRecord, redeeming: StepUpRedemption? = nil, holds: Bool = false) throws(StorageError) -> Date {
        let ticket = NewTicket(hash: hash, purpose: purpose, ttlSeconds: ttlSeconds, holds: holds)
        let statement = SQL.with(StepUpRedemption.cte(redeeming) + [
            ("ticket", Self.inserting(ticket, for: "SELECT \(userId)::text AS id", redeeming)),
        ] + AuditRepository.cte([audit], onlyIf: "ticket"),
            "SELECT \(fragment: StepUpRedemption.held(redeeming)) AS redeemed, (SELECT expires_at FROM ticket) AS expires_at")
        return try pool.run { c in
            let row = try c.query(statement)[0]
            guard try row.bool("redeemed") else { throw StorageError.conflict(.stepUpUsed) }
            return try row.date("expires_at")
        }
    }

    /// A ticket for the account an app backend knows as `externalId`, made from `candidate` (with
    /// `events`) on first use, with `audit` (about the account) and the redemption: one statement.
    /// The account is made or found by one `INSERT … ON CONFLICT (external_id)`, which finds a
    /// concurrent first use's account once that commits. `.conflict(.usernameTaken)` when the
    /// candidate's username is another account's, `.conflict(.stepUpUsed)` when the redemption
    /// fails: nothing written either way, the account neither.
    public func externalTicket(externalId: String, candidate: UserRecord, events: [OutboxEvent], ticket: NewTicket, audit: AuditTemplate,
                               redeeming: StepUpRedemption?) throws(StorageError) -> IssuedTicketRow {
        let statement = SQL.with(StepUpRedemption.cte(redeeming) + [
            // The no-op update makes the found row this statement's, so RETURNING gives it.
            ("account", """
                INSERT INTO users (id, user_handle, username, display_name, external_id)
                SELECT \(candidate.id), \(candidate.userHandle), \(candidate.username), \(candidate.displayName),
                       \(externalId)\(fragment: StepUpRedemption.gate(redeeming))
                ON CONFLICT (external_id) DO UPDATE SET external_id = EXCLUDED.external_id
                RETURNING id
                """),
            ("made", "SELECT id FROM account WHERE id = \(candidate.id)"),
            ("ticket", Self.inserting(ticket, for: "SELECT id FROM account", nil)),
        ] + AuditRepository.cte([audit.rows(from: "ticket", subject: "ticket.user_id")]) + OutboxRepository.ctes(events, onlyIf: "made"),
            """
            SELECT \(fragment: StepUpRedemption.held(redeeming)) AS redeemed, ticket.user_id, ticket.expires_at
            FROM (VALUES (1)) AS one (x) LEFT JOIN ticket ON true
            """)
        return try pool.run { c in
            let row = try c.query(statement)[0]
            guard try row.bool("redeemed") else { throw StorageError.conflict(.stepUpUsed) }
            return IssuedTicketRow(userId: try row.string("user_id"), expiresAt: try row.date("expires_at"))
        }
    }

    /// A ticket for an account that exists, with `audit` (about the account) and the redemption:
    /// one statement. nil when there is no such account: nothing written, the step-up not used.
    /// `.conflict(.stepUpUsed)` when the redemption fails (nothing written).
    public func accountTicket(_ account: TicketAccount, ticket: NewTicket, audit: AuditTemplate,
                              redeeming: StepUpRedemption?) throws(StorageError) -> IssuedTicketRow? {
        let target: SQL = switch account {
        case .id(let id): "SELECT id FROM users WHERE id = \(id)"
        case .externalId(let externalId): "SELECT id FROM users WHERE external_id = \(externalId)"
        }
        let statement = SQL.with([("target", target)] + StepUpRedemption.cte(redeeming, onlyIf: "target") + [
            ("ticket", Self.inserting(ticket, for: "SELECT id FROM target", redeeming)),
        ] + AuditRepository.cte([audit.rows(from: "ticket", subject: "ticket.user_id")]),
            """
            SELECT EXISTS (SELECT 1 FROM target) AS present, ticket.user_id, ticket.expires_at
            FROM (VALUES (1)) AS one (x) LEFT JOIN ticket ON true
            """)
        return try pool.run { c in
            let row = try c.query(statement)[0]
            guard try row.bool("present") else { return nil }
            guard try !row.isNull("user_id") else { throw StorageError.conflict(.stepUpUsed) }
            return IssuedTicketRow(userId: try row.string("user_id"), expiresAt: try row.date("expires_at"))
        }
    }

    /// The CTE that stores `ticket` for the account `account` selects (a query of one `id`), only
    /// with `redeeming`'s redemption when there is one.
    static func inserting(_ ticket: NewTicket, for account: SQL, _ redeeming: StepUpRedemption?) -> SQL {
        """
        INSERT INTO enrolment_tickets (hash, user_id, purpose, expires_at, holds)
        SELECT \(ticket.hash), a.id, \(ticket.purpose.rawValue), now() + make_interval(secs => \(ticket.ttlSeconds)), \(ticket.holds)
        FROM (\(fragment: account)) AS a\(fragment: StepUpRedemption.gate(redeeming))
        RETURNING user_id, expires_at
        """
    }

    /// The passkey-enrolment ticket with this hash while it is valid (unused and unexpired); nil
    /// otherwise. Reading it uses nothing up: the registration verify that stores the passkey does
    /// (`register`'s `redeemingTicket`), so a ceremony that fails keeps its ticket.
    public func ticket(hash: [UInt8]) throws(StorageError) -> EnrolmentTicket? {
        try pool.run { c in try AccountRepository.ticket(hash: hash, on: c) }
    }

    /// `ticket(hash:)` on `connection` (the sessions' store reads it too, for a ticket's bearer).
    static func ticket(hash: [UInt8], on connection: PostgresConnection) throws -> EnrolmentTicket? {
        try connection.query(readingTicket(hash: hash)).first.map { try ticket($0, hash: hash) }
    }

    /// A row of `readingTicket(hash:)`.
    static func ticket(_ row: Row, hash: [UInt8]) throws -> EnrolmentTicket {
        EnrolmentTicket(hash: hash, userId: try row.string("user_id"), holds: try row.bool("holds"))
    }

    /// A passkey-enrolment ticket that can still be used: its user and whether it holds.
    static func readingTicket(hash: [UInt8]) -> SQL {
        "SELECT user_id, holds FROM enrolment_tickets WHERE hash = \(hash) AND purpose = 'passkey' AND used_at IS NULL AND expires_at > now()"
    }

    /// Uses a passkey-enrolment ticket up; returns its user when it was valid (unused and unexpired).
    /// Device-key tickets are used up only by `DeviceKeyRepository.enrol` (`EnrolmentGate.ticket`).
    public func consumeTicket(hash: [UInt8]) throws(StorageError) -> String? {
        try pool.run { c in
            try c.query("""
                UPDATE enrolment_tickets SET used_at = now()
                WHERE hash = \(hash) AND purpose = 'passkey' AND used_at IS NULL AND expires_at > now()
                RETURNING user_id
                """).first.map { try $0.string("user_id") }
        }
    }
}
