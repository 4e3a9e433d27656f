import JSON
import PostgreSQL

/// Completing a recovery inside the registration's statement (`AccountRepository.register(…,
/// completing:)`): only a pending one whose delay has passed and whose time has not run out; then
/// every session of the account, every device key and (`revokePasskeys`) every passkey from before
/// are revoked, and the account's other pending recoveries cancelled. What that writes is built by
/// the caller as values: the completion's own line and events, and templates the statement writes
/// once per session, key, passkey or recovery it ended.
public struct RecoveryCompletion: Sendable {
    public let recoveryId: String
    /// `LATCHKEY_RECOVERY_REVOKES=all`: the account's passkeys from before too.
    public let revokePasskeys: Bool
    /// The completion's audit line and events (`recovery.completed`).
    public let audit: AuditRecord
    public let events: [OutboxEvent]
    /// Once per session ended (`sessionId`).
    public let sessionRevoked: EventTemplate
    /// Once per device key revoked (`keyId`, `deviceId`, `platform`, `attested`).
    public let deviceKeyRevoked: EventTemplate
    /// Once per passkey revoked under `revokePasskeys` (`credentialId`).
    public let passkeyRevoked: EventTemplate
    /// Once per other pending recovery of the account, cancelled by this one: each is a bearer
    /// credential that could register a passkey later and undo this recovery. The line's detail
    /// and the event get `recoveryId`, the event `method` too.
    public let otherCancelledAudit: AuditTemplate
    public let otherCancelledEvent: EventTemplate

    public init(recoveryId: String, revokePasskeys: Bool, audit: AuditRecord, events: [OutboxEvent],
                sessionRevoked: EventTemplate, deviceKeyRevoked: EventTemplate, passkeyRevoked: EventTemplate,
                otherCancelledAudit: AuditTemplate, otherCancelledEvent: EventTemplate) {
        self.recoveryId = recoveryId
        self.revokePasskeys = revokePasskeys
        self.audit = audit
        self.events = events
        self.sessionRevoked = sessionRevoked
        self.deviceKeyRevoked = deviceKeyRevoked
        self.passkeyRevoked = passkeyRevoked
        self.otherCancelledAudit = otherCancelledAudit
        self.otherCancelledEvent = otherCancelledEvent
    }
}

/// What a completed recovery revoked (the caller refuses those sessions in memory at once).
public struct RecoveryRevocations: Sendable, Equatable {
    public let sessions: [String]
    public let deviceKeys: [String]
    public let passkeys: [[UInt8]]
}

extension RecoveryCompletion {
    /// The CTE that completed the recovery: no row, and nothing of the registration may be written.
    static let completed = "rec_done"

    /// The completion as CTEs of the registration's statement (a shared fragment). They see the
    /// database as it was before the statement, so the registration's own passkey and session
    /// (`keeping`, and the family inserted beside them) are never among what they revoke. With
    /// `onlyIf` (a CTE of the same statement), only when that CTE returned a row.
    func ctes(userId: String, keeping credentialId: [UInt8], onlyIf: String? = nil) -> [(name: String, sql: SQL)] {
        let done: SQL = "EXISTS (SELECT 1 FROM \(unsafeRaw: Self.completed))"
        let gate: SQL = onlyIf.map { " AND EXISTS (SELECT 1 FROM \(unsafeRaw: $0))" } ?? ""
        return [
            (Self.completed, """
                UPDATE recoveries SET status = 'completed', finished_at = now()
                WHERE id = \(recoveryId) AND user_id = \(userId) AND status = 'pending' AND not_before <= now() AND expires_at > now()\(fragment: gate)
                RETURNING id
                """),
            ("rec_others", """
                UPDATE recoveries SET status = 'cancelled', finished_at = now()
                WHERE user_id = \(userId) AND status = 'pending' AND id <> \(recoveryId) AND \(fragment: done)
                RETURNING id, user_id, method
                """),
            ("rec_sessions", """
                UPDATE refresh_families SET revoked_at = now() WHERE user_id = \(userId) AND revoked_at IS NULL AND \(fragment: done)
                RETURNING id, user_id
                """),
            ("rec_keys", """
                UPDATE device_keys SET revoked_at = now() WHERE user_id = \(userId) AND revoked_at IS NULL AND \(fragment: done)
                RETURNING id, user_id, device_id, platform, attested
                """),
        ] + (revokePasskeys ? [("rec_passkeys", """
                UPDATE credentials SET revoked_at = now()
                WHERE user_id = \(userId) AND revoked_at IS NULL AND id <> \(credentialId) AND \(fragment: done)
                RETURNING id, user_id
                """)] : [])
    }

    /// The audit lines, in order: the completion's, then one per recovery it cancelled.
    var auditRows: [AuditRows] {
        [.records([audit]), otherCancelledAudit.rows(from: "rec_others", subject: "rec_others.user_id", members: [("recoveryId", "rec_others.id")])]
    }

    /// The events, in order: the completion's, the sessions, device keys and passkeys it revoked,
    /// the recoveries it cancelled.
    var eventRows: [EventRows] {
        [.events(events), SessionRepository.rows(sessionRevoked, from: "rec_sessions"),
         DeviceKeyRepository.rows(deviceKeyRevoked, from: "rec_keys")]
            + (revokePasskeys ? [AccountRepository.rows(passkeyRevoked, from: "rec_passkeys", idOnly: true)] : [])
            + [otherCancelledEvent.rows(from: "rec_others", account: "rec_others.user_id", key: "rec_others.id",
                                        members: [("recoveryId", "rec_others.id"), ("method", "rec_others.method")])]
    }

    /// Columns for the statement's final SELECT, read back by `revocations`.
    var revokedColumns: SQL {
        let passkeys: SQL = revokePasskeys ? "(SELECT string_agg(encode(id, 'hex'), ',') FROM rec_passkeys)" : "NULL::text"
        return """
            , (SELECT COALESCE(json_agg(id), '[]') FROM rec_sessions)::text AS rec_sessions,
              (SELECT COALESCE(json_agg(id), '[]') FROM rec_keys)::text AS rec_keys, \(fragment: passkeys) AS rec_passkeys
            """
    }

    static func revocations(_ row: Row) throws -> RecoveryRevocations {
        RecoveryRevocations(sessions: try row.stringArray("rec_sessions"), deviceKeys: try row.stringArray("rec_keys"),
                            passkeys: try row.hexList("rec_passkeys"))
    }
}
