import Foundation
import JSON
import PostgreSQL

/// Quorum approvals (migration 27): policies, approvals, their entries and cancel links. Every
/// change is one statement with its audit lines, events, mail and the step-up it redeems.
public final class ApprovalRepository: Sendable {
    let pool: PostgresPool

    init(pool: PostgresPool) { self.pool = pool }

    // MARK: Policies

    public func policies() throws(StorageError) -> [ApprovalPolicyRecord] {
        try pool.run { c in
            try c.query("SELECT name, document, updated_at, updated_by FROM approval_policies ORDER BY name").map(Self.policy)
        }
    }

    public func policy(name: String) throws(StorageError) -> ApprovalPolicyRecord? {
        try pool.run { c in
            try c.query("SELECT name, document, updated_at, updated_by FROM approval_policies WHERE name = \(name)").first.map(Self.policy)
        }
    }

    /// Creates or replaces the policy, with `audit` and the redemption; true when it was created.
    /// `.conflict(.stepUpUsed)`, nothing written, when the step-up cannot be redeemed.
    public func setPolicy(name: String, document: String, by actor: String, audit: AuditRecord,
                          redeeming: StepUpRedemption?) throws(StorageError) -> Bool {
        let statement = SQL.with(StepUpRedemption.cte(redeeming) + [
            ("before", "SELECT name FROM approval_policies WHERE name = \(name)"),
            ("put", """
                INSERT INTO approval_policies (name, document, updated_by) SELECT \(name), \(document), \(actor)\(fragment: StepUpRedemption.gate(redeeming))
                ON CONFLICT (name) DO UPDATE SET document = EXCLUDED.document, updated_by = EXCLUDED.updated_by, updated_at = now()
                RETURNING name
                """),
        ] + AuditRepository.cte([audit], onlyIf: "put"),
            "SELECT EXISTS (SELECT 1 FROM put) AS put, EXISTS (SELECT 1 FROM before) AS existed")
        return try pool.run { c in
            let row = try c.query(statement)[0]
            guard try row.bool("put") else { throw StorageError.conflict(.stepUpUsed) }
            return !(try row.bool("existed"))
        }
    }

    /// Deletes the policy with `audit` and the redemption (spent only when there is a policy to
    /// delete); false when there is none. Approvals opened under it keep their copy.
    public func deletePolicy(name: String, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> Bool {
        let statement = SQL.with([("target", "SELECT name FROM approval_policies WHERE name = \(name) FOR UPDATE")]
            + StepUpRedemption.cte(redeeming, onlyIf: "target") + [("removed", """
            DELETE FROM approval_policies\(fragment: StepUpRedemption.gate(redeeming, and: "name IN (SELECT name FROM target)"))
            RETURNING name
            """)] + AuditRepository.cte([audit], onlyIf: "removed"),
            "SELECT EXISTS (SELECT 1 FROM target) AS present, EXISTS (SELECT 1 FROM removed) AS removed")
        return try pool.run { c in
            let row = try c.query(statement)[0]
            if try row.bool("present"), !(try row.bool("removed")) { throw StorageError.conflict(.stepUpUsed) }
            return try row.bool("removed")
        }
    }

    static func policy(_ r: Row) throws -> ApprovalPolicyRecord {
        ApprovalPolicyRecord(name: try r.string("name"), document: try r.string("document"), updatedAt: try r.date("updated_at"),
                             updatedBy: try r.string("updated_by"))
    }

    // MARK: Opening

    /// Opening's one read (`ApprovalOpenRead`).
    public func openRead(policy: String, requester: String, subject: String?, since: Date) throws(StorageError) -> ApprovalOpenRead {
        try pool.run { c in try Self.openRead(try c.query(Self.opening(policy: policy, requester: requester, subject: subject, since: since))) }
    }

    /// An opening caller's session standing and the opening's read (`openRead`), in one pipelined round trip.
    public func standingAndOpenRead(sessionId: String, userId: String, policy: String, subject: String?, since: Date) throws(StorageError)
        -> (session: (record: SessionRecord, passkeyApprovesFrom: Date?, passkeyHardware: Bool)?, opening: ApprovalOpenRead) {
        try pool.run { c in
            let rows = try c.pipeline([SessionRepository.standing(id: sessionId, userId: userId),
                                       Self.opening(policy: policy, requester: userId, subject: subject, since: since)])
            return (try rows[0].first.map(SessionRepository.standing), try Self.openRead(rows[1]))
        }
    }

    static func opening(policy: String, requester: String, subject: String?, since: Date) -> SQL {
        """
        SELECT p.name, p.document, p.updated_at, p.updated_by,
               EXISTS (SELECT 1 FROM admins WHERE user_id = \(requester)) AS requester_admin,
               (SELECT count(*) FROM approvals WHERE requester = \(requester) AND created_at > \(since)) AS recent,
               (SELECT min(created_at) FROM approvals WHERE requester = \(requester) AND created_at > \(since)) AS oldest,
               s.id AS subject_id, e.email AS subject_email, s.language AS subject_language
        FROM (SELECT 1) one
        LEFT JOIN approval_policies p ON p.name = \(policy)
        LEFT JOIN users s ON s.id = \(subject)::text
        LEFT JOIN account_emails e ON e.user_id = s.id
        """
    }

    static func openRead(_ rows: [Row]) throws -> ApprovalOpenRead {
        let row = rows[0]
        return ApprovalOpenRead(policy: try row.isNull("name") ? nil : try Self.policy(row),
                                requesterIsAdmin: try row.bool("requester_admin"), subjectExists: !(try row.isNull("subject_id")),
                                subjectEmail: try row.optionalString("subject_email"),
                                subjectLanguage: try row.optionalString("subject_language"),
                                openedSince: Int(try row.int64("recent")), oldestSince: try row.optionalDate("oldest"))
    }

    /// Stores the approval — only while its requester opened fewer than `limit` since `since` — with
    /// the subject's cancel link (`cancelHash`, valid until the approval expires), `mail`, `audit`
    /// and `requested` (written about the new row; nil: no event). False: the limit was reached,
    /// nothing written.
    public func open(_ a: ApprovalRecord, limit: Int, since: Date, cancelHash: [UInt8]?, mail: [MailToSend], audit: AuditRecord,
                     requested: ApprovalEventTemplate?) throws(StorageError) -> Bool {
        var ctes: [(name: String, sql: SQL)] = [("made", """
            INSERT INTO approvals (id, policy, policy_document, requester, subject, action, action_hash, display, needed, delay_seconds,
                                   break_glass, created_at, expires_at)
            SELECT \(a.id), \(a.policy), \(a.policyDocument), \(a.requester), \(a.subject)::text, \(a.action), \(a.actionHash),
                   \(a.display)::text, \(a.needed), \(a.delaySeconds), \(a.breakGlass), \(a.createdAt)::timestamptz,
                   \(a.expiresAt)::timestamptz
            WHERE (SELECT count(*) FROM approvals WHERE requester = \(a.requester) AND created_at > \(since)) < \(limit)
            RETURNING id, policy, subject, requester, action_hash
            """)]
        if let cancelHash {
            ctes.append(("tok", """
                INSERT INTO approval_cancel_tokens (hash, approval_id, expires_at) SELECT \(cancelHash), id, \(a.expiresAt)::timestamptz FROM made
                RETURNING hash
                """))
        }
        ctes += MailRepository.ctes(mail, onlyIf: "made")
        ctes += AuditRepository.cte([audit], onlyIf: "made")
        ctes += OutboxRepository.ctes([.events(mail.map(\.event))] + (requested.map { [Self.rows($0, from: "made")] } ?? []), onlyIf: "made")
        return try pool.run { c in try c.query(SQL.with(ctes, "SELECT EXISTS (SELECT 1 FROM made) AS made"))[0].bool("made") }
    }

    // MARK: One approval

    /// The approval `id` with its entries, and what `caller` is to it; nil when there is none.
    public func read(id: String, caller: String) throws(StorageError) -> ApprovalRead? {
        try pool.run { c in try Self.approvalRead(try c.query(Self.reading(id: id, caller: caller))) }
    }

    /// The session `sessionId` of `userId` as its standing reads it, and the approval `id` as
    /// `read(id:caller:)` sees it for that user: one pipelined round trip (the approval routes'
    /// caller and what they act on).
    public func standingAndApproval(sessionId: String, userId: String, id: String) throws(StorageError)
        -> (session: (record: SessionRecord, passkeyApprovesFrom: Date?, passkeyHardware: Bool)?, approval: ApprovalRead?) {
        try pool.run { c in
            let rows = try c.pipeline([SessionRepository.standing(id: sessionId, userId: userId), Self.reading(id: id, caller: userId)])
            return (try rows[0].first.map(SessionRepository.standing), try Self.approvalRead(rows[1]))
        }
    }

    static func reading(id: String, caller: String) -> SQL {
        """
        SELECT a.*, \(unsafeRaw: Self.entriesColumn),
               EXISTS (SELECT 1 FROM admins WHERE user_id = \(caller)) AS caller_admin,
               e.email AS subject_email, s.language AS subject_language
        FROM approvals a LEFT JOIN users s ON s.id = a.subject LEFT JOIN account_emails e ON e.user_id = a.subject
        WHERE a.id = \(id)
        """
    }

    static func approvalRead(_ rows: [Row]) throws -> ApprovalRead? {
        guard let row = rows.first else { return nil }
        return ApprovalRead(approval: try Self.approval(row), callerIsAdmin: try row.bool("caller_admin"),
                            subjectEmail: try row.optionalString("subject_email"), subjectLanguage: try row.optionalString("subject_language"))
    }

    /// Counts `userId`'s approval of `id` (its step-up `redeeming` used up, `receiptId` recorded) —
    /// only while the approval is collecting, unexpired at `now` and `userId` not counted yet (the
    /// approval's row locked: concurrent approvals of one account count once). When this approval
    /// makes `needed`, the approval waits until `now` + its delay; with no delay it is approved at
    /// once and `approved` is written. `mail`, `audit` and `breakGlass` are written with the count.
    /// nil: not counted, nothing written (the approval changed since it was read).
    public func approve(id: String, userId: String, receiptId: String, now: Date, redeeming: StepUpRedemption, mail: [MailToSend],
                        audit: AuditRecord, approved: ApprovalEventTemplate, breakGlass: ApprovalEventTemplate?) throws(StorageError) -> ApprovalChange? {
        var ctes: [(name: String, sql: SQL)] = [("target", """
            SELECT id FROM approvals
            WHERE id = \(id) AND state = 'collecting' AND expires_at > \(now)::timestamptz AND NOT (\(userId)::text = ANY (counted))
            FOR UPDATE
            """)]
        ctes += StepUpRedemption.cte(redeeming, onlyIf: "target")
        ctes.append(("upd", """
            UPDATE approvals SET counted = array_append(counted, \(userId)::text),
                   state = CASE WHEN cardinality(counted) + 1 >= needed THEN 'waiting' ELSE 'collecting' END,
                   usable_at = CASE WHEN cardinality(counted) + 1 >= needed
                                    THEN \(now)::timestamptz + make_interval(secs => delay_seconds) END,
                   announced = CASE WHEN cardinality(counted) + 1 >= needed AND delay_seconds = 0 THEN 'approved' ELSE announced END
            WHERE id IN (SELECT id FROM target) AND EXISTS (SELECT 1 FROM redeemed)
            RETURNING id, policy, subject, requester, action_hash, state, announced, usable_at
            """))
        ctes.append(("entry", """
            INSERT INTO approval_entries (approval_id, user_id, receipt_id, approved_at, break_glass)
            SELECT upd.id, \(userId), \(receiptId), \(now)::timestamptz, a.break_glass FROM upd JOIN approvals a ON a.id = upd.id
            RETURNING approval_id
            """))
        ctes.append(("reached", "SELECT * FROM upd WHERE announced = 'approved'"))
        ctes += MailRepository.ctes(mail, onlyIf: "upd")
        ctes += AuditRepository.cte([audit], onlyIf: "upd")
        ctes += OutboxRepository.ctes([Self.rows(approved, from: "reached")] + (breakGlass.map { [Self.rows($0, from: "upd")] } ?? [])
                                      + [.events(mail.map(\.event))], onlyIf: "upd")
        return try pool.run { c in
            let row = try c.query(SQL.with(ctes, """
                SELECT \(fragment: StepUpRedemption.held(redeeming)) AS redeemed, EXISTS (SELECT 1 FROM target) AS found, upd.state,
                       upd.announced, upd.usable_at
                FROM (SELECT 1) one LEFT JOIN upd ON true
                """))[0]
            guard try row.bool("found") else { return nil }
            guard try row.bool("redeemed") else { throw StorageError.conflict(.stepUpUsed) }
            return try Self.change(row)
        }
    }

    /// Vetoes `id` (while collecting or waiting, unexpired at `now`), by `by`, with `audit` and
    /// `vetoed`; nil when it could not be vetoed (nothing written).
    public func veto(id: String, by: String, now: Date, audit: AuditRecord, vetoed: ApprovalEventTemplate) throws(StorageError) -> ApprovalChange? {
        let statement = SQL.with([("upd", Self.vetoing("id = \(id)", by: by, now: now))]
            + AuditRepository.cte([audit], onlyIf: "upd") + OutboxRepository.ctes([Self.rows(vetoed, from: "upd")]),
            "SELECT state, announced, usable_at FROM upd")
        return try pool.run { c in try c.query(statement).first.map(Self.change) }
    }

    /// Uses the subject's cancel link `hash` (unused, unexpired at `now`) and vetoes its approval, in
    /// one statement: `audit` (about the approval's subject, acting itself) and `vetoed` are written.
    /// nil (nothing written) when the link is unknown, used or expired, or its approval can no
    /// longer be vetoed.
    public func veto(cancelHash hash: [UInt8], now: Date, audit: AuditTemplate, vetoed: ApprovalEventTemplate) throws(StorageError) -> String? {
        let statement = SQL.with([
            ("tok", """
                SELECT approval_id FROM approval_cancel_tokens WHERE hash = \(hash) AND used_at IS NULL AND expires_at > \(now)::timestamptz
                FOR UPDATE
                """),
            ("upd", Self.vetoing("id IN (SELECT approval_id FROM tok)", by: nil, now: now)),
            ("spent", "UPDATE approval_cancel_tokens SET used_at = \(now)::timestamptz WHERE hash = \(hash) AND EXISTS (SELECT 1 FROM upd) RETURNING hash"),
        ] + AuditRepository.cte([audit.rows(from: "upd", subject: "COALESCE(upd.subject, upd.requester)", members: [("approvalId", "upd.id")])])
            + OutboxRepository.ctes([Self.rows(vetoed, from: "upd")]),
            "SELECT id FROM upd")
        return try pool.run { c in try c.query(statement).first.map { try $0.string("id") } }
    }

    /// Uses the approval: only the requester's, approved at `now` (waiting, its delay over, not
    /// expired) and for `actionHash`; `audit` written, and `approved` too when nobody announced the
    /// approval yet. nil: not used, nothing written.
    public func consume(id: String, requester: String, actionHash: [UInt8], now: Date, audit: AuditRecord,
                        approved: ApprovalEventTemplate) throws(StorageError) -> ApprovalChange? {
        let statement = SQL.with([
            ("target", """
                SELECT id, announced AS was FROM approvals
                WHERE \(fragment: Self.usable(id: id, requester: requester, actionHash: actionHash, at: "\(now)::timestamptz"))
                FOR UPDATE
                """),
            ("upd", """
                UPDATE approvals SET \(fragment: Self.used(at: "\(now)::timestamptz"))
                WHERE id IN (SELECT id FROM target)
                RETURNING id, policy, subject, requester, action_hash, state, announced, usable_at
                """),
            ("unannounced", "SELECT upd.* FROM upd JOIN target ON target.id = upd.id WHERE target.was = 'requested'"),
        ] + AuditRepository.cte([audit], onlyIf: "upd") + OutboxRepository.ctes([Self.rows(approved, from: "unannounced")]),
            "SELECT state, announced, usable_at FROM upd")
        return try pool.run { c in try c.query(statement).first.map(Self.change) }
    }

    /// Writes `event` for the approval, once: only while its announced state is still `from`
    /// (`announced` becomes `to`). False: someone announced it first, nothing written.
    public func announce(id: String, from: String, to: String, event: ApprovalEventTemplate) throws(StorageError) -> Bool {
        let statement = SQL.with([("upd", """
            UPDATE approvals SET announced = \(to) WHERE id = \(id) AND announced = \(from)
            RETURNING id, policy, subject, requester, action_hash
            """)] + OutboxRepository.ctes([Self.rows(event, from: "upd")]),
            "SELECT EXISTS (SELECT 1 FROM upd) AS done")
        return try pool.run { c in try c.query(statement)[0].bool("done") }
    }

    /// The approvals of `policy` not yet used, vetoed or expired at `now` (stored `collecting` or
    /// `waiting`: an approved one is a `waiting` one whose delay is over), oldest first, at most
    /// `limit`, with their entries: the console's changes waiting for other admins, and the approved
    /// ones waiting for the admin who asked.
    public func pending(policy: String, now: Date, limit: Int) throws(StorageError) -> [ApprovalRecord] {
        try pool.run { c in
            try c.query("""
                SELECT a.*, \(unsafeRaw: Self.entriesColumn) FROM approvals a
                WHERE a.policy = \(policy) AND a.state IN ('collecting', 'waiting') AND a.expires_at > \(now)::timestamptz
                ORDER BY a.created_at, a.id LIMIT \(limit)
                """).map(Self.approval)
        }
    }

    // MARK: Fragments

    /// The approval `id` can be used at `at`: `requester`'s, for exactly `actionHash`, approved (its
    /// quorum reached and its delay over) and unexpired. Every use of an approval checks this one
    /// predicate: `consume`, and an admin change's `StepUpRedemption` under the admin quorum.
    static func usable(id: String, requester: String, actionHash: [UInt8], at: SQL) -> SQL {
        """
        id = \(id) AND requester = \(requester) AND action_hash = \(actionHash) AND state = 'waiting'
          AND usable_at <= \(fragment: at) AND expires_at > \(fragment: at)
        """
    }

    /// What using an approval at `at` sets (`announced` too: a used approval announces nothing more).
    static func used(at: SQL) -> SQL { "state = 'used', used_at = \(fragment: at), announced = 'used'" }

    static func vetoing(_ which: SQL, by: String?, now: Date) -> SQL {
        """
        UPDATE approvals SET state = 'vetoed', vetoed_at = \(now)::timestamptz, vetoed_by = COALESCE(\(by)::text, subject), announced = 'vetoed'
        WHERE \(fragment: which) AND state IN ('collecting', 'waiting') AND expires_at > \(now)::timestamptz
        RETURNING id, policy, subject, requester, action_hash, state, announced, usable_at
        """
    }

    /// `t` once per row of `from` (approval rows: `id`, `policy`, `subject`, `requester`,
    /// `action_hash`), about the subject (else the requester), with SPEC's data and nothing else.
    static func rows(_ t: ApprovalEventTemplate, from: String) -> EventRows {
        let e = t.template
        let digest: SQL = "substring(sha256(convert_to(\(e.seed)::text || '/' || src.id, 'UTF8')) FROM 1 FOR 16)"
        return .perRow("""
            SELECT \(e.idPrefix)::text || \(fragment: SQL.base64url(digest)) AS id, \(e.type.rawValue)::text AS type,
                   COALESCE(src.subject, src.requester) AS account_id,
                   jsonb_build_object('approvalId', src.id, 'policy', src.policy, 'subject', src.subject,
                                      'actionHash', \(fragment: SQL.base64url("src.action_hash"))) AS data,
                   \(e.createdAt)::timestamptz AS created_at,
                   \(e.createdAt.addingTimeInterval(Double(e.maxAgeSeconds)))::timestamptz AS expires_at, true AS webhooks, false AS direct
            FROM \(unsafeRaw: from) src
            """)
    }

    static let entriesColumn = """
        (SELECT COALESCE(json_agg(json_build_object('userId', e.user_id, 'receiptId', e.receipt_id,
                                                    'approvedAt', extract(epoch FROM e.approved_at), 'breakGlass', e.break_glass)
                                  ORDER BY e.approved_at, e.user_id), '[]')
         FROM approval_entries e WHERE e.approval_id = a.id)::text AS entries
        """

    static func change(_ r: Row) throws -> ApprovalChange {
        ApprovalChange(state: try r.value("state"), announced: try r.string("announced"), usableAt: try r.optionalDate("usable_at"))
    }

    static func approval(_ r: Row) throws -> ApprovalRecord {
        guard let list = try r.jsonValue("entries").arrayValue else { throw ColumnDecodeError(column: "entries", reason: "not a JSON array") }
        let entries = try list.map { e throws -> ApprovalEntryRecord in
            guard let userId = e["userId"]?.stringValue, let receiptId = e["receiptId"]?.stringValue, let at = e["approvedAt"]?.doubleValue else {
                throw ColumnDecodeError(column: "entries", reason: "an entry without its members")
            }
            return ApprovalEntryRecord(userId: userId, receiptId: receiptId, approvedAt: Date(timeIntervalSince1970: at),
                                       breakGlass: e["breakGlass"]?.boolValue ?? false)
        }
        return ApprovalRecord(id: try r.string("id"), policy: try r.string("policy"), policyDocument: try r.string("policy_document"),
                              requester: try r.string("requester"), subject: try r.optionalString("subject"), action: try r.string("action"),
                              actionHash: try r.bytes("action_hash"), display: try r.optionalString("display"), needed: try r.int("needed"),
                              delaySeconds: try r.int("delay_seconds"), breakGlass: try r.bool("break_glass"), state: try r.value("state"),
                              announced: try r.string("announced"), createdAt: try r.date("created_at"), expiresAt: try r.date("expires_at"),
                              usableAt: try r.optionalDate("usable_at"), entries: entries)
    }
}
