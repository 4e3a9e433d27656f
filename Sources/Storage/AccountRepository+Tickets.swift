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

extension AccountRepository {
    // MARK: Enrolment tickets

    /// Stores a single-use ticket with its audit line (one statement); returns when it expires.
    /// With `redeeming` (an admin's approval), only together with that step-up's redemption.
    /// `holds`: the passkey it registers is held whatever the account has. `replacing`: the account's
    /// unused passkey tickets are used up in the same transaction (a fresh link replaces the old one).
    public func createTicket(hash: [UInt8], userId: String, purpose: TicketPurpose = .passkey, ttlSeconds: Int,
                             audit: AuditRecord, redeeming: StepUpRedemption? = nil, holds: Bool = false,
                             replacing: Bool = false) throws(StorageError) -> Date {
        try pool.runTransaction { c in
            try StepUpRedemption.redeem(redeeming, on: c)
            if replacing {
                try c.execute("""
                    UPDATE enrolment_tickets SET used_at = now()
                    WHERE user_id = \(userId) AND purpose = \(purpose.rawValue) AND used_at IS NULL
                    """)
            }
            let statement = SQL.with([
                ("ticket", """
                    INSERT INTO enrolment_tickets (hash, user_id, purpose, expires_at, holds)
                    VALUES (\(hash), \(userId), \(purpose.rawValue), now() + make_interval(secs => \(ttlSeconds)), \(holds))
                    RETURNING expires_at
                    """),
                ("audit", AuditRepository.insert([audit], onlyIf: "ticket")),
            ], "SELECT expires_at FROM ticket")
            return try c.query(statement)[0].date("expires_at")
        }
    }

    /// The passkey-enrolment ticket with this hash while it is valid (unused and unexpired); nil
    /// otherwise. Reading it uses nothing up: the registration verify that stores the passkey does
    /// (`register`'s `redeemingTicket`), so a ceremony that fails keeps its ticket.
    public func ticket(hash: [UInt8]) throws(StorageError) -> EnrolmentTicket? {
        try pool.run { c in try AccountRepository.ticket(hash: hash, on: c) }
    }

    /// `ticket(hash:)` on `connection` (the sessions' store reads it too, for a ticket's bearer).
    static func ticket(hash: [UInt8], on connection: PostgresConnection) throws -> EnrolmentTicket? {
        try connection.query("""
            SELECT user_id, holds FROM enrolment_tickets
            WHERE hash = \(hash) AND purpose = 'passkey' AND used_at IS NULL AND expires_at > now()
            """).first.map { EnrolmentTicket(hash: hash, userId: try $0.string("user_id"), holds: try $0.bool("holds")) }
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
