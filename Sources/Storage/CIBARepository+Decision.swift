import Foundation
import JSON
import PostgreSQL

/// What an approval's or denial's one write did.
public enum CIBADecision: Sendable, Equatable {
    case decided
    /// Not the account's pending, unexpired request (any more).
    case notPending
    /// The caller is a device-key session and the step-up was not made by a live device key that
    /// session enrolled (SPEC "CIBA approval"): nothing written.
    case notTheSessionsKey
}

/// A CIBA request's decision (SPEC "CIBA approval"): the approving caller's read and the approval's
/// or denial's one write, with the request's ping notification (CIBA Core §10.2).
extension OAuthRepository {
    /// The session `sessionId` of `userId` as its standing reads it, how many live device keys it
    /// enrolled (a device-key session's), and the request `id`: one pipelined round trip (a CIBA
    /// approval's caller and the request it acts on).
    public func standingAndCIBARequest(sessionId: String, userId: String, id: String?) throws(StorageError)
        -> (session: (record: SessionRecord, passkeyApprovesFrom: Date?, passkeyHardware: Bool)?, sessionDeviceKeys: Int,
            request: CIBARequestRecord?) {
        try pool.run { c in
            let keys: SQL = """
                SELECT count(*) AS keys FROM device_keys
                WHERE enrolled_session = \(sessionId) AND user_id = \(userId) AND revoked_at IS NULL
                """
            let rows = try c.pipeline([SessionRepository.standing(id: sessionId, userId: userId), keys] + (id.map { [Self.cibaRequestQuery(id: $0)] } ?? []))
            return (try rows[0].first.map(SessionRepository.standing), try rows[1].first?.int("keys") ?? 0,
                    try rows.count > 2 ? rows[2].first.map(Self.cibaRequest) : nil)
        }
    }

    /// The approval's or denial's one write: only while the request is the account's, pending and
    /// unexpired, with the step-up's receipt redeemed (an approval), its approvers (the approving
    /// session, and the step-up's key by its receipt), the audit line and the events; the request's
    /// ping notification made due at `now` (the outbox's clock). `keyOfSession`: the caller is a
    /// device-key session, and the step-up must be a live device key's that this session enrolled
    /// (else `.notTheSessionsKey`, nothing written). `.notPending`: not pending any more;
    /// `.conflict(.stepUpUsed)` when the step-up was used.
    public func cibaDecide(id: String, userId: String, grant: JSONValue?, approvers: OAuthApprovers?, redeeming: StepUpRedemption?,
                           keyOfSession: String?, audit: AuditRecord, events: [OutboxEvent], now: Date) throws(StorageError) -> CIBADecision {
        var ctes: [(name: String, sql: SQL)] = [("pending", """
            SELECT id, ping_event FROM ciba_requests
            WHERE id = \(id) AND user_id = \(userId) AND status = 'pending' AND expires_at > now() FOR UPDATE
            """)]
        let sessionBound = keyOfSession != nil && redeeming != nil
        ctes.append(("keyok", sessionBound ? """
            SELECT 1 FROM step_up_receipts s JOIN device_keys d ON d.id = s.key_id AND d.user_id = s.user_id
            WHERE s.token_jti = \(redeeming?.jti) AND s.user_id = \(userId) AND s.method = 'device-key'
              AND d.enrolled_session = \(keyOfSession) AND d.revoked_at IS NULL
            """ : "SELECT 1"))
        if let r = redeeming {
            ctes.append(("red", StepUpRedemption.use(r, onlyIf: "EXISTS (SELECT 1 FROM pending) AND EXISTS (SELECT 1 FROM keyok)")))
            ctes.append(("go", "SELECT id FROM pending WHERE EXISTS (SELECT 1 FROM red)"))
        } else {
            ctes.append(("go", "SELECT id FROM pending"))
        }
        let status = grant == nil ? "denied" : "approved"
        let credential = approvers?.sessionCredential
        ctes.append(("decided", """
            UPDATE ciba_requests q SET status = \(status), decided_at = now(), grant_data = \(grant.map { $0.text })::jsonb,
                   approving_family = \(approvers?.familyId),
                   approving_credential = CASE WHEN \(grant == nil) THEN NULL WHEN r.method IS NULL THEN latchkey_base64url(\(credential)::bytea)
                                               WHEN r.method = 'passkey' THEN r.key_id END,
                   approving_device_key = CASE WHEN r.method = 'device-key' THEN r.key_id END
            FROM go LEFT JOIN step_up_receipts r ON r.token_jti = \(approvers?.stepUpJTI)
            WHERE q.id = go.id RETURNING q.id
            """))
        ctes.append(("pinged", "SELECT p.ping_event FROM pending p JOIN decided d ON d.id = p.id"))
        ctes += Self.pingsDue(from: "pinged", at: now)
        ctes += AuditRepository.cte([audit], onlyIf: "decided") + OutboxRepository.ctes(events, onlyIf: "decided")
        let row = try pool.run { c in
            try c.query(SQL.with(ctes, """
                SELECT EXISTS (SELECT 1 FROM decided) AS done, EXISTS (SELECT 1 FROM pending) AS pending,
                       EXISTS (SELECT 1 FROM keyok) AS keyok, (SELECT count(*) FROM ping_wake) AS woke
                """))[0]
        }
        let (done, pending, keyOK) = ((try? row.bool("done")) ?? false, (try? row.bool("pending")) ?? false, (try? row.bool("keyok")) ?? false)
        if done { return .decided }
        guard pending else { return .notPending }
        if !keyOK { return .notTheSessionsKey }
        if redeeming != nil { throw StorageError.conflict(.stepUpUsed) }
        return .notPending
    }

    /// The ping deliveries of the requests `events` (a CTE returning `ping_event`) made due at
    /// `now` (the outbox's clock), and every instance's ping workers woken (migration 22's channel).
    static func pingsDue(from events: String, at now: Date) -> [(name: String, sql: SQL)] {
        [("ping_due", """
            UPDATE outbox_deliveries SET next_attempt_at = LEAST(next_attempt_at, \(now)::timestamptz)
            WHERE event_id IN (SELECT ping_event FROM \(unsafeRaw: events)) AND channel = \(OutboxChannel.cibaPing.rawValue)
              AND status = 'pending'
            RETURNING event_id
            """),
         ("ping_wake", "SELECT pg_notify('latchkey_outbox', \(OutboxChannel.cibaPing.rawValue)) FROM (SELECT 1 FROM ping_due LIMIT 1) AS w")]
    }
}
