import PostgreSQL

/// The ways into an account besides one of its passkeys (SPEC "Assurance", the last way in), as
/// one read finds them.
public struct WaysIn: Sendable, Equatable {
    /// The passkey is a live credential of the account.
    public let known: Bool
    /// Another live passkey (held or not: a held passkey signs in).
    public let otherPasskey: Bool
    /// An unused recovery code.
    public let recoveryCode: Bool
    /// A verified address (it counts only while email recovery is available).
    public let verifiedAddress: Bool

    public init(known: Bool, otherPasskey: Bool, recoveryCode: Bool, verifiedAddress: Bool) {
        self.known = known
        self.otherPasskey = otherPasskey
        self.recoveryCode = recoveryCode
        self.verifiedAddress = verifiedAddress
    }
}

/// How a revocation keeps the account's last way in (SPEC "Assurance"): refused when the passkey
/// is the account's last one and it has no unused recovery code and no verified address that counts.
public struct LastWayInRule: Sendable, Equatable {
    /// A verified address counts: email recovery is available in this deployment.
    public let addressCounts: Bool

    public init(addressCounts: Bool) { self.addressCounts = addressCounts }
}

extension AccountRepository {
    /// What the last-way-in rule needs to know about revoking `credentialId`, in one query (the
    /// read before the step-up is asked; the revoking statement decides again under lock).
    public func waysIn(userId: String, besides credentialId: [UInt8]) throws(StorageError) -> WaysIn {
        try pool.run { c in
            let r = try c.query("""
                SELECT EXISTS (SELECT 1 FROM credentials WHERE id = \(credentialId) AND user_id = \(userId) AND revoked_at IS NULL) AS known,
                       EXISTS (SELECT 1 FROM credentials WHERE user_id = \(userId) AND revoked_at IS NULL AND id <> \(credentialId)) AS other,
                       EXISTS (SELECT 1 FROM recovery_codes WHERE user_id = \(userId) AND used_at IS NULL) AS code,
                       EXISTS (SELECT 1 FROM account_emails WHERE user_id = \(userId)) AS address
                """)[0]
            return WaysIn(known: try r.bool("known"), otherPasskey: try r.bool("other"), recoveryCode: try r.bool("code"),
                          verifiedAddress: try r.bool("address"))
        }
    }

    /// Revokes the user's live credential and, in the same statement, every live session it began
    /// (SPEC "Sessions"), with `audit`, `revokedEvent` (`credentialId`, `aaguid`, `name`), one
    /// `sessionEvent` per ended session (`sessionId`) and the `mail`. Returns the ids of those
    /// sessions, or nil when the user has no such live credential (nothing written then).
    /// With `keeping` (SPEC "Assurance", the last way in), the statement first locks the account's
    /// live credentials and revokes only while another way in remains — decided on the locked rows,
    /// so of two concurrent revocations of an account's last two passkeys the second sees the first
    /// and is refused: `.conflict(.lastWayIn)`, nothing written.
    /// With `redeeming` (an admin's approval), only together with that step-up's redemption.
    public func revoke(userId: String, credentialId: [UInt8], audit: AuditRecord, redeeming: StepUpRedemption? = nil,
                       keeping rule: LastWayInRule? = nil, mail: [MailToSend] = [], revokedEvent: EventTemplate? = nil,
                       sessionEvent: EventTemplate? = nil) throws(StorageError) -> [String]? {
        var ctes: [(name: String, sql: SQL)] = []
        var open: SQL = ""
        var known: SQL = "true"
        if let rule {
            // Locked in one order (by id), so concurrent revocations queue instead of deadlocking;
            // READ COMMITTED re-reads a row another revocation changed, so `acct` holds the live ones.
            ctes.append(("acct", """
                SELECT id FROM credentials WHERE user_id = \(userId) AND revoked_at IS NULL ORDER BY id FOR UPDATE
                """))
            ctes.append(("way", """
                SELECT EXISTS (SELECT 1 FROM acct WHERE id <> \(credentialId))
                    OR EXISTS (SELECT 1 FROM recovery_codes WHERE user_id = \(userId) AND used_at IS NULL)
                    OR (\(rule.addressCounts) AND EXISTS (SELECT 1 FROM account_emails WHERE user_id = \(userId))) AS open
                """))
            open = " AND (SELECT open FROM way)"
            known = "EXISTS (SELECT 1 FROM acct WHERE id = \(credentialId))"
        }
        ctes += [
            ("rev", """
                UPDATE credentials SET revoked_at = now()
                WHERE id = \(credentialId) AND user_id = \(userId) AND revoked_at IS NULL\(fragment: open)
                RETURNING id, user_id, aaguid, name
                """),
            RevocationCascade.sessionsOfPasskeys(from: "rev"),
        ]
        let statement = SQL.with(ctes
            + AuditRepository.cte([audit], onlyIf: "rev")
            + OutboxRepository.ctes((revokedEvent.map { [AccountRepository.rows($0, from: "rev")] } ?? [])
                                    + (sessionEvent.map { [SessionRepository.rows($0, from: "ended")] } ?? [])
                                    + [.events(mail.map(\.event))], onlyIf: "rev")
            + MailRepository.ctes(mail, onlyIf: "rev"),
            """
            SELECT EXISTS (SELECT 1 FROM rev) AS revoked, \(fragment: known) AS known,
                   (SELECT COALESCE(json_agg(id), '[]') FROM ended)::text AS ended
            """)
        let run = { (c: PostgresConnection) throws -> [String]? in
            // Redeemed first: the approving passkey may be the one revoked here, and it is judged
            // live as it was before this change.
            try StepUpRedemption.redeem(redeeming, on: c)
            let row = try c.query(statement)[0]
            guard try row.bool("revoked") else {
                if try row.bool("known"), rule != nil { throw StorageError.conflict(.lastWayIn) }
                if redeeming != nil { throw StorageError.notFound }  // rolls the redemption back
                return nil
            }
            return try row.stringArray("ended")
        }
        if redeeming == nil { return try pool.run(run) }
        do { return try pool.runTransaction(run) } catch .notFound { return nil }
    }
}
