import Foundation
import JSON
import PostgreSQL

/// The outbox: events and their deliveries. Writers go through `ctes` / `write` (inside another
/// repository's statement or transaction), and their commit NOTIFYs every instance (`wakeUps`);
/// consumers (webhooks, mail) go through `claim` and the outcome calls. Storage decides no policy: the caller says how long a lease lasts, when to retry
/// and when to give up.
///
/// Time: the outbox runs on the caller's clock (`Runtime.now` in the server), never the database's.
/// Every instant it stores or compares — an event's `created_at` and `expires_at`, a delivery's
/// `next_attempt_at`, `leased_until` and `finished_at` — is a bind the caller passes, so what the
/// worker decides and what SQL compares read one clock, and a test steps it. (The one `now()` left
/// is `cancelPending`'s `finished_at`, a record stamped with the endpoint's `deleted_at` beside it
/// in the deleting statement, which no decision reads.)
public final class OutboxRepository: Sendable {
    let pool: PostgresPool

    init(pool: PostgresPool) { self.pool = pool }

    public static let webhookChannel = OutboxChannel.webhook

    // MARK: Writing (called by the other repositories)

    /// Data-modifying CTEs that store `events` and their deliveries, for `SQL.with`; nothing when
    /// `events` is empty. With `onlyIf` (a CTE of the same statement), only when that CTE returned a
    /// row — the change they report happened.
    static func ctes(_ events: [OutboxEvent], onlyIf cte: String? = nil) -> [(name: String, sql: SQL)] {
        ctes([.events(events)], onlyIf: cte)
    }

    /// `ctes` for `rows` in order: events the caller built, and templates written once per row of
    /// another CTE of the statement (`EventTemplate.rows`, which fan out to webhooks only). Every
    /// row carries its `created_at` and `expires_at` from the app's clock (one clock, rule 2).
    static func ctes(_ rows: [EventRows], onlyIf cte: String? = nil) -> [(name: String, sql: SQL)] {
        var events: [OutboxEvent] = []
        var sources: [SQL] = []
        var perRow = false
        for part in rows {
            switch part {
            case .events(let list) where list.isEmpty:
                continue
            case .events(let list):
                events += list
                let values = SQL.joined(list.map { e in
                    let direct = e.fanOut.contains { if case .direct = $0 { true } else { false } }
                    return """
                        (\(e.id)::text, \(e.type.rawValue)::text, \(e.accountId)::text, \(PostgresValue.text(e.data.text))::jsonb, \
                        \(e.createdAt)::timestamptz, \(e.expiresAt)::timestamptz, \(e.fanOut.contains(.webhooks))::bool, \(direct)::bool)
                        """
                }, separator: ", ")
                sources.append("VALUES \(fragment: values)")
            case .perRow(let select):
                perRow = true
                sources.append(select)
            }
        }
        guard !sources.isEmpty else { return [] }
        let condition: SQL = cte.map { " AND EXISTS (SELECT 1 FROM \(unsafeRaw: $0))" } ?? ""
        var out: [(name: String, sql: SQL)] = [("outbox_ev", """
            INSERT INTO outbox_events (id, type, account_id, data, created_at, expires_at)
            SELECT v.id, v.type, v.account_id, v.data, v.created_at, v.expires_at
            FROM (\(fragment: SQL.joined(sources, separator: "\nUNION ALL "))) AS v (id, type, account_id, data, created_at, expires_at, webhooks, direct)
            WHERE (v.direct OR (v.webhooks AND EXISTS (
                SELECT 1 FROM webhook_endpoints w WHERE w.deleted_at IS NULL AND w.events ? v.type)))\(fragment: condition)
            RETURNING id, type, seq, account_id, created_at, expires_at
            """)]
        // Every event fans out to webhooks but those the caller sent elsewhere only (mail).
        let elsewhereOnly = events.filter { !$0.fanOut.contains(.webhooks) }.map { JSONValue.string($0.id) }
        if perRow || elsewhereOnly.count < events.count {
            let filter: SQL = elsewhereOnly.isEmpty ? "" : "\nWHERE NOT (\(PostgresValue.text(JSONValue.array(elsewhereOnly).text))::jsonb ? ev.id)"
            out.append(("outbox_wh", """
                INSERT INTO outbox_deliveries (event_id, channel, target, seq, account_id, next_attempt_at, expires_at)
                SELECT ev.id, \(webhookChannel.rawValue)::text, w.id, ev.seq, ev.account_id, ev.created_at, ev.expires_at
                FROM outbox_ev ev JOIN webhook_endpoints w ON w.deleted_at IS NULL AND w.events ? ev.type\(fragment: filter)
                -- An endpoint being deleted is either seen deleted (the lock waits for its delete to commit
                -- and re-checks deleted_at) or its delete waits for these rows, then cancels them: a
                -- statement that began before the delete can never leave a pending delivery behind it.
                FOR SHARE OF w
                RETURNING event_id
                """))
        }
        let direct: [SQL] = events.flatMap { e in
            e.fanOut.compactMap { f -> SQL? in
                guard case .direct(let channel, let target) = f else { return nil }
                return "(\(e.id)::text, \(channel.rawValue)::text, \(target)::text, \(e.notBefore)::timestamptz)"
            }
        }
        if !direct.isEmpty {
            out.append(("outbox_dd", """
                INSERT INTO outbox_deliveries (event_id, channel, target, seq, account_id, next_attempt_at, expires_at)
                SELECT ev.id, d.channel, d.target, ev.seq, ev.account_id, COALESCE(d.not_before, ev.created_at), ev.expires_at
                FROM outbox_ev ev JOIN (VALUES \(fragment: SQL.joined(direct, separator: ", "))) AS d (event_id, channel, target, not_before)
                  ON d.event_id = ev.id
                RETURNING event_id
                """))
        }
        return out
    }

    /// Writes `events` on `connection` (inside the caller's transaction); nothing when empty.
    static func write(_ events: [OutboxEvent], on connection: PostgresConnection) throws {
        guard !events.isEmpty else { return }
        try connection.query(SQL.with(ctes(events), "SELECT 1 AS one"))
    }

    /// Writes events on their own (a change with no row of its own to make, or a test).
    public func append(_ events: [OutboxEvent]) throws(StorageError) {
        try pool.runTransaction { t in try OutboxRepository.write(events, on: t) }
    }

    // MARK: Consuming

    /// Claims up to `limit` deliveries on `channel` due at `now`, leased until `now + leaseSeconds`:
    /// rows locked by another claim right now are skipped (`FOR UPDATE SKIP LOCKED`), rows whose
    /// lease has not run out at `now` are not due, so no two workers hold one delivery at once; a
    /// worker that dies holding one gives it back when its lease ends. A delivery waits while an
    /// earlier pending delivery (lower `seq`) for the same target and account exists: per target, an
    /// account's events go out in write order. Targets in `excluding` (the caller's busy ones) are skipped.
    /// The same statement returns what sending needs — the live webhook endpoint, the unsent mail —
    /// so a delivery costs no read of its own.
    public func claim(channel: OutboxChannel, limit: Int, leaseSeconds: Double, leaseId: String,
                      excluding targets: [String] = [], now: Date) throws(StorageError) -> [ClaimedDelivery] {
        guard limit > 0 else { return [] }
        let busy = PostgresValue.text(JSONValue.array(targets.map { .string($0) }).text)
        let leasedUntil = now.addingTimeInterval(leaseSeconds)
        return try pool.run { c in
            try c.query("""
                UPDATE outbox_deliveries d SET lease_id = \(leaseId), leased_until = \(leasedUntil), attempts = d.attempts + 1
                FROM (SELECT c.event_id, c.channel, c.target FROM outbox_deliveries c
                      WHERE c.channel = \(channel.rawValue) AND c.status = 'pending' AND c.next_attempt_at <= \(now)
                        AND (c.leased_until IS NULL OR c.leased_until <= \(now))
                        AND NOT (\(busy)::jsonb ? c.target)
                        AND NOT EXISTS (SELECT 1 FROM outbox_deliveries p
                                        WHERE p.channel = c.channel AND p.target = c.target AND p.account_id = c.account_id
                                          AND p.status = 'pending' AND p.seq < c.seq)
                      ORDER BY c.next_attempt_at, c.seq LIMIT \(limit)
                      FOR UPDATE SKIP LOCKED) AS pick
                     JOIN outbox_events e ON e.id = pick.event_id
                     LEFT JOIN webhook_endpoints w
                       ON pick.channel = \(OutboxChannel.webhook.rawValue) AND w.id = pick.target AND w.deleted_at IS NULL
                     LEFT JOIN mail_messages m
                       ON pick.channel = \(OutboxChannel.mail.rawValue) AND m.id = pick.target AND m.sent_at IS NULL AND m.message IS NOT NULL
                WHERE d.event_id = pick.event_id AND d.channel = pick.channel AND d.target = pick.target
                RETURNING d.event_id, e.type, e.account_id, e.data::text AS data, e.created_at, d.channel, d.target, d.attempts,
                          d.leased_until, d.expires_at, d.seq,
                          w.id AS endpoint_id, w.url AS endpoint_url, w.events::text AS endpoint_events, w.secret AS endpoint_secret,
                          w.created_at AS endpoint_created_at, m.recipient AS mail_recipient, m.message AS mail_message
                """).sorted { (try? $0.int64("seq")) ?? 0 < (try? $1.int64("seq")) ?? 0 }.map { r in
                let endpoint = try r.optionalString("endpoint_id") == nil ? nil : try WebhookRepository.endpoint(r, prefix: "endpoint_")
                let mail = try r.optionalBytes("mail_message").map { QueuedMail(recipient: try r.string("mail_recipient"), message: $0) }
                return ClaimedDelivery(eventId: try r.string("event_id"), type: try r.value("type"), accountId: try r.string("account_id"),
                                       data: try r.jsonValue("data"), createdAt: try r.date("created_at"), channel: try r.value("channel"),
                                       target: try r.string("target"), attempt: try r.int("attempts"), leaseId: leaseId,
                                       leasedUntil: try r.date("leased_until"), expiresAt: try r.date("expires_at"),
                                       endpoint: endpoint, mail: mail)
            }
        }
    }

    /// Records a success at `now`. False when the lease was no longer this claim's (it ran out and
    /// another worker claimed the delivery, or the endpoint was deleted): nothing changes then.
    @discardableResult
    public func delivered(_ d: ClaimedDelivery, statusCode: Int?, now: Date) throws(StorageError) -> Bool {
        try pool.run { c in
            try c.execute("""
                UPDATE outbox_deliveries SET status = 'delivered', last_status_code = \(statusCode), last_error = NULL,
                    finished_at = \(now), lease_id = NULL, leased_until = NULL
                WHERE event_id = \(d.eventId) AND channel = \(d.channel.rawValue) AND target = \(d.target) AND lease_id = \(d.leaseId)
                  AND status = 'pending'
                """) > 0
        }
    }

    /// Records a failed attempt to be tried again at `next` (the caller decided it falls before
    /// the delivery's `expiresAt`). False when the lease was no longer this claim's.
    @discardableResult
    public func retry(_ d: ClaimedDelivery, statusCode: Int?, error: String?, at next: Date) throws(StorageError) -> Bool {
        try pool.run { c in
            try c.execute("""
                UPDATE outbox_deliveries SET last_status_code = \(statusCode), last_error = \(error.map { String($0.prefix(500)) }),
                    lease_id = NULL, leased_until = NULL, next_attempt_at = \(next)
                WHERE event_id = \(d.eventId) AND channel = \(d.channel.rawValue) AND target = \(d.target) AND lease_id = \(d.leaseId)
                  AND status = 'pending'
                """) > 0
        }
    }

    /// Records a failed attempt that is not tried again (`failed`, at `now`): the caller gave up —
    /// the failure is final, or its next try would fall on or after `expiresAt`. False when the
    /// lease was no longer this claim's.
    @discardableResult
    public func failed(_ d: ClaimedDelivery, statusCode: Int?, error: String?, now: Date) throws(StorageError) -> Bool {
        try pool.run { c in
            try c.execute("""
                UPDATE outbox_deliveries SET last_status_code = \(statusCode), last_error = \(error.map { String($0.prefix(500)) }),
                    lease_id = NULL, leased_until = NULL, status = 'failed', finished_at = \(now)
                WHERE event_id = \(d.eventId) AND channel = \(d.channel.rawValue) AND target = \(d.target) AND lease_id = \(d.leaseId)
                  AND status = 'pending'
                """) > 0
        }
    }

    /// Hands a claim back untried (the worker had no room for it): due again at once, the attempt not counted.
    public func release(_ d: ClaimedDelivery) throws(StorageError) {
        try pool.run { c in
            try c.execute("""
                UPDATE outbox_deliveries SET lease_id = NULL, leased_until = NULL, attempts = attempts - 1
                WHERE event_id = \(d.eventId) AND channel = \(d.channel.rawValue) AND target = \(d.target) AND lease_id = \(d.leaseId)
                  AND status = 'pending'
                """)
        }
    }

    /// Gives up pending deliveries whose time ran out by `now` without a claim (an endpoint nobody
    /// could reach while no instance ran); returns how many.
    @discardableResult
    public func expire(now: Date) throws(StorageError) -> Int {
        try pool.run { c in
            try c.execute("""
                UPDATE outbox_deliveries SET status = 'failed', finished_at = \(now), last_error = COALESCE(last_error, 'expired')
                WHERE status = 'pending' AND expires_at <= \(now) AND (leased_until IS NULL OR leased_until <= \(now))
                """)
        }
    }

    /// Deletes events written before `cutoff` whose deliveries are all finished (their deliveries
    /// go with them); returns how many events.
    @discardableResult
    public func purgeFinished(writtenBefore cutoff: Date) throws(StorageError) -> Int {
        try pool.run { c in
            try c.execute("""
                DELETE FROM outbox_events e WHERE e.created_at < \(cutoff)
                  AND NOT EXISTS (SELECT 1 FROM outbox_deliveries d WHERE d.event_id = e.id AND d.status = 'pending')
                """)
        }
    }

    // MARK: Wake-ups

    /// The NOTIFY channel migration 21's trigger raises at the commit of every statement that wrote
    /// deliveries, once per outbox channel written to (the payload: `webhook`, `mail`).
    static let wakeUpChannel = "latchkey_outbox"

    /// The outbox's wake-ups as one more feed on a shared LISTEN connection (`ConfigRepository.watch`):
    /// `wake` gets the outbox channels deliveries were just written to, and all of them after every
    /// (re)connect (notifications sent while the connection was down are lost).
    public static func wakeUps(_ wake: @escaping @Sendable (Set<OutboxChannel>) -> Void) -> NotificationWatch.Feed {
        NotificationWatch.Feed(channel: wakeUpChannel, onConnect: { wake(Set(OutboxChannel.allCases)) }, onNotifications: { payloads in
            let channels = Set(payloads.compactMap(OutboxChannel.init(rawValue:)))
            if !channels.isEmpty { wake(channels) }
        })
    }

    // MARK: Reading

    /// The backlog per channel at `now`: deliveries due and not yet made, and how long the oldest has
    /// been due. A delivery scheduled for later (`OutboxEvent.notBefore`, never tried) is not backlog
    /// until its time, and is due from then, not from its event's creation.
    public func depth(now: Date) throws(StorageError) -> [OutboxDepth] {
        try pool.run { c in
            try c.query("""
                SELECT d.channel, count(*) AS pending,
                       GREATEST(COALESCE(EXTRACT(EPOCH FROM \(now) - min(CASE WHEN d.attempts = 0 THEN d.next_attempt_at ELSE e.created_at END)), 0), 0)::float8 AS oldest
                FROM outbox_deliveries d JOIN outbox_events e ON e.id = d.event_id
                WHERE d.status = 'pending' AND NOT (d.attempts = 0 AND d.next_attempt_at > \(now))
                GROUP BY d.channel ORDER BY d.channel
                """).map { r in
                OutboxDepth(channel: try r.value("channel"), pending: try r.int("pending"), oldestPendingSeconds: try r.double("oldest"))
            }
        }
    }

    /// The deliveries to one target, newest first.
    public func deliveries(channel: OutboxChannel, target: String, limit: Int) throws(StorageError) -> [DeliveryRecord] {
        try pool.run { c in try c.query(OutboxRepository.deliveries(channel: channel, target: target, limit: limit)).map(OutboxRepository.delivery) }
    }

    /// `deliveries`' statement (a webhook's deliveries are read with their endpoint in one pipeline).
    static func deliveries(channel: OutboxChannel, target: String, limit: Int) -> SQL {
        """
        SELECT d.event_id, e.type, d.status, d.attempts, d.last_status_code, d.last_error, d.next_attempt_at, e.created_at
        FROM outbox_deliveries d JOIN outbox_events e ON e.id = d.event_id
        WHERE d.channel = \(channel.rawValue) AND d.target = \(target) ORDER BY d.seq DESC LIMIT \(limit)
        """
    }

    static func delivery(_ r: Row) throws -> DeliveryRecord {
        let status: DeliveryRecord.Status = try r.value("status")
        return DeliveryRecord(eventId: try r.string("event_id"), type: try r.value("type"), status: status,
                              attempts: try r.int("attempts"), lastStatusCode: try r.optionalInt("last_status_code"),
                              lastError: try r.optionalString("last_error"),
                              nextAttemptAt: status == .pending ? try r.date("next_attempt_at") : nil,
                              createdAt: try r.date("created_at"))
    }

    /// The pending deliveries to the targets `targets` (a CTE of the statement: endpoints being
    /// deleted) cancelled, as a CTE `cancelled` of that statement.
    static func cancelPending(channel: OutboxChannel, targets: String) -> (name: String, sql: SQL) {
        ("cancelled", """
            UPDATE outbox_deliveries SET status = 'cancelled', finished_at = now(), lease_id = NULL, leased_until = NULL
            WHERE channel = \(channel.rawValue) AND target IN (SELECT id FROM \(unsafeRaw: targets)) AND status = 'pending'
            """)
    }
}
