import Foundation
import JSON
import PostgreSQL

// MARK: Cancel links (SPEC "Assurance": the owner can undo it without a session)

/// A cancel link for a held passkey, written with its registration.
public struct NewCancelToken: Sendable {
    public let hash: [UInt8]
    public let userId: String
    public let credentialId: [UInt8]
    public let expiresAt: Date

    public init(hash: [UInt8], userId: String, credentialId: [UInt8], expiresAt: Date) {
        self.hash = hash
        self.userId = userId
        self.credentialId = credentialId
        self.expiresAt = expiresAt
    }
}

/// What a used cancel link undid.
public enum CancelTarget: Sendable {
    case recovery(userId: String, recoveryId: String, method: RecoveryMethod)
    /// The held passkey, revoked, and the sessions it began, ended.
    case passkey(userId: String, credential: CredentialRecord, endedSessions: [String])
}

/// What using a cancel link writes for what it undid, about the link's owner — the subject of each
/// line and, having no session, its actor too (`AuditTemplate.actor` nil).
public struct CancelLinkRecords: Sendable {
    /// A recovery cancelled: the line's detail and the event get `recoveryId`, the event `method` too.
    public let recoveryAudit: AuditTemplate
    public let recoveryEvent: EventTemplate
    /// A held passkey revoked: the line's detail gets `credentialId`; `passkeyEvent` gets
    /// `credentialId`, `aaguid` and `name`; `sessionEvent` is written once per session the passkey
    /// began (`sessionId`).
    public let passkeyAudit: AuditTemplate
    public let passkeyEvent: EventTemplate
    public let sessionEvent: EventTemplate

    public init(recoveryAudit: AuditTemplate, recoveryEvent: EventTemplate, passkeyAudit: AuditTemplate,
                passkeyEvent: EventTemplate, sessionEvent: EventTemplate) {
        self.recoveryAudit = recoveryAudit
        self.recoveryEvent = recoveryEvent
        self.passkeyAudit = passkeyAudit
        self.passkeyEvent = passkeyEvent
        self.sessionEvent = sessionEvent
    }
}

extension RecoveryRepository {
    /// Uses a cancel link's token and undoes what it names, in one statement: a recovery still
    /// pending is cancelled; a passkey still held is revoked with every session it began, and
    /// `records` are written for what was undone. nil (and nothing written) when the token is
    /// unknown, used or expired, or what it names is already over (the recovery finished, the hold
    /// ended, the passkey gone). `now`: the server's clock, which set the passkey's hold (one clock:
    /// a hold is the app's instant, rule 1; a recovery's lifetime is the database's, rule 3).
    public func useCancelToken(hash: [UInt8], now: Date, records: CancelLinkRecords) throws(StorageError) -> CancelTarget? {
        let statement = SQL.with([
            // The token found and locked; it is used up below only when what it names could be undone.
            ("tok", """
                SELECT user_id AS owner, recovery_id AS recovery, credential_id AS credential FROM cancel_tokens
                WHERE hash = \(hash) AND used_at IS NULL
                  AND expires_at > CASE WHEN recovery_id IS NULL THEN \(now)::timestamptz ELSE now() END
                FOR UPDATE
                """),
            ("rec", """
                UPDATE recoveries r SET status = 'cancelled', finished_at = now() FROM tok
                WHERE r.id = tok.recovery AND r.user_id = tok.owner AND r.status = 'pending' AND r.expires_at > now()
                RETURNING r.id, r.user_id, r.method
                """),
            ("pk", """
                UPDATE credentials c SET revoked_at = now() FROM tok
                WHERE c.id = tok.credential AND c.user_id = tok.owner AND c.revoked_at IS NULL AND c.approves_from > \(now)::timestamptz
                RETURNING \(unsafeRaw: AccountRepository.credentialColumns)
                """),
            RevocationCascade.sessionsOfPasskeys(from: "pk"),
            ("spent", """
                UPDATE cancel_tokens SET used_at = now()
                WHERE hash = \(hash) AND (EXISTS (SELECT 1 FROM rec) OR EXISTS (SELECT 1 FROM pk))
                RETURNING hash
                """),
        ]
            + AuditRepository.cte([
                records.recoveryAudit.rows(from: "rec", subject: "rec.user_id", members: [("recoveryId", "rec.id")]),
                records.passkeyAudit.rows(from: "pk", subject: "pk.user_id", members: [("credentialId", SQL.base64url("pk.id"))]),
            ])
            + OutboxRepository.ctes([
                records.recoveryEvent.rows(from: "rec", account: "rec.user_id", key: "rec.id",
                                           members: [("recoveryId", "rec.id"), ("method", "rec.method")]),
                AccountRepository.rows(records.passkeyEvent, from: "pk"),
                SessionRepository.rows(records.sessionEvent, from: "ended"),
            ]),
            """
            SELECT tok.owner, rec.id AS recovery_id, rec.method AS recovery_method, pk.*,
                   (SELECT COALESCE(json_agg(id), '[]') FROM ended)::text AS ended
            FROM tok LEFT JOIN rec ON true LEFT JOIN pk ON true
            """)
        return try pool.run { c -> CancelTarget? in
            // A passkey's cancel link revokes it: its owner's sessions lock first (RevocationCascade).
            let lock = RevocationCascade.endingSessions(ownerOf: """
                SELECT user_id FROM cancel_tokens WHERE hash = \(hash) AND used_at IS NULL AND credential_id IS NOT NULL
                """)
            // No row: an unknown, used or expired token. A row naming neither: what it names is
            // over, and the token stayed unused (nothing was written).
            guard let row = try c.pipeline([lock, statement])[1].first else { return nil }
            let userId = try row.string("owner")
            if let recoveryId = try row.optionalString("recovery_id") {
                return .recovery(userId: userId, recoveryId: recoveryId, method: try row.value("recovery_method"))
            }
            if !(try row.isNull("id")) {
                return .passkey(userId: userId, credential: try AccountRepository.credential(row), endedSessions: try row.stringArray("ended"))
            }
            return nil
        }
    }
}
