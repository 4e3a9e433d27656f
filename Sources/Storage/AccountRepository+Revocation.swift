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

/// What revoking a passkey needs before it decides, in one query (SPEC "Assurance"): the ways in
/// besides it (the last-way-in rule), and where and in which language the owner's notice goes.
public struct PasskeyRevocationRead: Sendable, Equatable {
    public let ways: WaysIn
    /// The account's verified address (the notice goes there).
    public let email: String?
    /// The account's mail language (`users.language`).
    public let language: String?

    public init(ways: WaysIn, email: String?, language: String?) {
        self.ways = ways
        self.email = email
        self.language = language
    }
}

/// A passkey revoked: the sessions that ended with it, and the account with the passkeys that remain.
public struct RevokedPasskey: Sendable {
    public let ended: [String]
    public let account: AccountPasskeys

    public init(ended: [String], account: AccountPasskeys) {
        self.ended = ended
        self.account = account
    }
}

extension AccountRepository {
    /// What the last-way-in rule and the notice need to know about revoking `credentialId`, in one
    /// query (the read before the step-up is asked; the revoking statement decides again under lock).
    public func revocationRead(userId: String, credentialId: [UInt8]) throws(StorageError) -> PasskeyRevocationRead {
        try pool.run { c in
            try AccountRepository.revocation(try c.query(AccountRepository.readingRevocation(userId: userId, credentialId: credentialId)))
        }
    }

    /// `revocationRead`'s one statement (also read with an admin's role: `AdminPageRequest.passkeyRevocation`).
    static func readingRevocation(userId: String, credentialId: [UInt8]) -> SQL {
        """
        SELECT EXISTS (SELECT 1 FROM credentials WHERE id = \(credentialId) AND user_id = \(userId) AND revoked_at IS NULL) AS known,
               EXISTS (SELECT 1 FROM credentials WHERE user_id = \(userId) AND revoked_at IS NULL AND id <> \(credentialId)) AS other,
               EXISTS (SELECT 1 FROM recovery_codes WHERE user_id = \(userId) AND used_at IS NULL) AS code,
               (SELECT email FROM account_emails WHERE user_id = \(userId)) AS email,
               (SELECT language FROM users WHERE id = \(userId)) AS language
        """
    }

    /// `readingRevocation`'s answer (one row: the query has no FROM).
    static func revocation(_ rows: [Row]) throws -> PasskeyRevocationRead {
        guard let r = rows.first else { throw StorageError.undecodable(column: "known") }
        let email = try r.optionalString("email")
        return PasskeyRevocationRead(ways: WaysIn(known: try r.bool("known"), otherPasskey: try r.bool("other"),
                                                  recoveryCode: try r.bool("code"), verifiedAddress: email != nil),
                                     email: email, language: try r.optionalString("language"))
    }

    /// `revokePasskey`, answering only the ids of the sessions that ended (nil: no such live passkey).
    public func revoke(userId: String, credentialId: [UInt8], audit: AuditRecord, redeeming: StepUpRedemption? = nil,
                       keeping rule: LastWayInRule? = nil, mail: [MailToSend] = [], revokedEvent: EventTemplate? = nil,
                       sessionEvent: EventTemplate? = nil) throws(StorageError) -> [String]? {
        try revokePasskey(userId: userId, credentialId: credentialId, audit: audit, redeeming: redeeming, keeping: rule, mail: mail,
                          revokedEvent: revokedEvent, sessionEvent: sessionEvent)?.ended
    }

    /// Revokes the user's live credential and, in the same statement, every live session it began
    /// (SPEC "Sessions"), with `audit`, `revokedEvent` (`credentialId`, `aaguid`, `name`), one
    /// `sessionEvent` per ended session (`sessionId`) and the `mail`. Returns those sessions' ids and
    /// the account with the passkeys that remain, or nil when the user has no such live credential
    /// (nothing written then). One statement, no transaction around it:
    /// - the account's live credentials are locked first, in one order (by id), so concurrent
    ///   revocations queue instead of deadlocking, and READ COMMITTED re-reads a row another
    ///   revocation changed: with `keeping` (SPEC "Assurance", the last way in) the passkey is
    ///   revoked only while another way in remains, decided on the locked rows, so of two
    ///   concurrent revocations of an account's last two passkeys the second sees the first and is
    ///   refused: `.conflict(.lastWayIn)`, nothing written;
    /// - with `redeeming` (the step-up that approved it), only together with that step-up's
    ///   redemption, which is spent only when the passkey is revoked (a refused revocation leaves
    ///   it unused): `.conflict(.stepUpUsed)` when it was used or its key revoked. The approving
    ///   passkey may be the one revoked here: the statement's snapshot judges it live as it was
    ///   before this change.
    public func revokePasskey(userId: String, credentialId: [UInt8], audit: AuditRecord, redeeming: StepUpRedemption? = nil,
                              keeping rule: LastWayInRule? = nil, mail: [MailToSend] = [], revokedEvent: EventTemplate? = nil,
                              sessionEvent: EventTemplate? = nil) throws(StorageError) -> RevokedPasskey? {
        let open: SQL = rule.map { rule in """
            EXISTS (SELECT 1 FROM acct WHERE id <> \(credentialId))
                OR EXISTS (SELECT 1 FROM recovery_codes WHERE user_id = \(userId) AND used_at IS NULL)
                OR (\(rule.addressCounts) AND EXISTS (SELECT 1 FROM account_emails WHERE user_id = \(userId)))
            """ } ?? "true"
        var ctes: [(name: String, sql: SQL)] = [
            ("acct", "SELECT id FROM credentials WHERE user_id = \(userId) AND revoked_at IS NULL ORDER BY id FOR UPDATE"),
            ("way", "SELECT EXISTS (SELECT 1 FROM acct WHERE id = \(credentialId)) AS known, (\(fragment: open)) AS open"),
            ("can", "SELECT 1 FROM way WHERE known AND open"),
        ]
        ctes += StepUpRedemption.cte(redeeming, onlyIf: "can")
        let redeemed: SQL = redeeming == nil ? "" : " AND EXISTS (SELECT 1 FROM redeemed)"
        let redeemable: SQL = redeeming.map { r in
            "EXISTS (SELECT 1 FROM step_up_receipts WHERE \(fragment: StepUpRedemption.redeemable(jti: r.jti, userId: r.userId, actionHash: r.actionHash)))"
        } ?? "true"
        ctes += [
            ("rev", """
                UPDATE credentials SET revoked_at = now()
                WHERE id = \(credentialId) AND user_id = \(userId) AND revoked_at IS NULL AND EXISTS (SELECT 1 FROM can)\(fragment: redeemed)
                RETURNING id, user_id, aaguid, name
                """),
            RevocationCascade.sessionsOfPasskeys(from: "rev"),
        ]
        // The statement's snapshot predates its own UPDATE: the passkeys that remain are the live
        // ones less the revoked one.
        let statement = SQL.with(ctes
            + AuditRepository.cte([audit], onlyIf: "rev")
            + OutboxRepository.ctes((revokedEvent.map { [AccountRepository.rows($0, from: "rev")] } ?? [])
                                    + (sessionEvent.map { [SessionRepository.rows($0, from: "ended")] } ?? [])
                                    + [.events(mail.map(\.event))], onlyIf: "rev")
            + MailRepository.ctes(mail, onlyIf: "rev"),
            """
            SELECT EXISTS (SELECT 1 FROM rev) AS revoked, w.known AS known, w.open AS open, \(fragment: redeemable) AS redeemable,
                   (SELECT COALESCE(json_agg(id), '[]') FROM ended)::text AS ended,
                   u.id AS account_id, u.user_handle, u.username, u.display_name, p.*
            FROM way w LEFT JOIN users u ON u.id = \(userId)
                 LEFT JOIN LATERAL (
                     SELECT \(unsafeRaw: AccountRepository.credentialColumns) FROM credentials
                     WHERE user_id = u.id AND revoked_at IS NULL AND id <> \(credentialId)
                 ) p ON true
            ORDER BY p.created_at, p.id
            """)
        return try pool.run { c in
            let rows = try c.pipeline([RevocationCascade.endingSessions(userId: userId), statement])[1]
            let first = rows[0]
            guard try first.bool("revoked") else {
                if try !first.bool("redeemable") { throw StorageError.conflict(.stepUpUsed) }
                guard try first.bool("known") else { return nil }
                if try !first.bool("open") { throw StorageError.conflict(.lastWayIn) }
                // Known and open: only the redemption can have failed (used meanwhile by another change).
                if redeeming != nil { throw StorageError.conflict(.stepUpUsed) }
                return nil
            }
            guard let account = try Self.accountPasskeys(rows) else { throw StorageError.undecodable(column: "account_id") }
            return RevokedPasskey(ended: try first.stringArray("ended"), account: account)
        }
    }
}
