import Foundation
import JSON
import PostgreSQL

/// A webhook endpoint to store: its secret already sealed by the caller (Storage never sees it plain).
public struct NewWebhookEndpoint: Sendable, Equatable {
    public let id: String
    public let url: String
    /// The event types it subscribes to (webhook types only: the caller checks).
    public let events: [EventType]
    public let sealedSecret: [UInt8]

    public init(id: String, url: String, events: [EventType], sealedSecret: [UInt8]) {
        self.id = id
        self.url = url
        self.events = events
        self.sealedSecret = sealedSecret
    }
}

/// A live webhook endpoint.
public struct WebhookEndpointRecord: Sendable, Equatable {
    public let id: String
    public let url: String
    public let events: [EventType]
    /// As stored: the sender opens it, nobody else reads it.
    public let sealedSecret: [UInt8]
    public let createdAt: Date
}

/// Webhook endpoints (SPEC "Events"). Their deliveries are outbox deliveries on channel `webhook`
/// whose target is the endpoint id (`OutboxRepository`).
public final class WebhookRepository: Sendable {
    let pool: PostgresPool

    init(pool: PostgresPool) { self.pool = pool }

    /// With `redeeming` (an admin's approval), only together with that step-up's redemption.
    public func create(_ endpoint: NewWebhookEndpoint, audit: AuditRecord,
                       redeeming: StepUpRedemption? = nil) throws(StorageError) -> WebhookEndpointRecord {
        // One statement: the redemption, then (only if it held) the endpoint and its audit line.
        let events = JSONValue.array(endpoint.events.map { .string($0.rawValue) }).text
        let statement = SQL.with(StepUpRedemption.cte(redeeming) + [
            ("w", """
                INSERT INTO webhook_endpoints (id, url, events, secret)
                SELECT \(endpoint.id), \(endpoint.url), \(PostgresValue.text(events))::jsonb, \(endpoint.sealedSecret)\(fragment: StepUpRedemption.gate(redeeming))
                RETURNING \(unsafeRaw: WebhookRepository.columns)
                """),
            ("audit", AuditRepository.insert([audit], onlyIf: "w")),
        ], "SELECT * FROM w")
        return try pool.run { c in
            guard let row = try c.query(statement).first else { throw StorageError.conflict(.stepUpUsed) }
            return try WebhookRepository.endpoint(row)
        }
    }

    /// The live endpoints, oldest first.
    public func list() throws(StorageError) -> [WebhookEndpointRecord] {
        try pool.run { c in
            try c.query(WebhookRepository.listing).map { try WebhookRepository.endpoint($0) }
        }
    }

    /// `list()`'s statement (the admin API's caller resolution pipelines it too).
    static let listing: SQL = """
        SELECT \(unsafeRaw: WebhookRepository.columns) FROM webhook_endpoints WHERE deleted_at IS NULL ORDER BY created_at, id
        """

    /// True when the endpoint is live (deleted ones keep their rows for their delivery history).
    public func exists(id: String) throws(StorageError) -> Bool {
        try pool.run { c in !(try c.query("SELECT 1 AS one FROM webhook_endpoints WHERE id = \(id) AND deleted_at IS NULL")).isEmpty }
    }

    /// Deletes a live endpoint and cancels its pending deliveries, with `audit`, in one transaction;
    /// false when there is no such live endpoint (nothing written). New events no longer fan out to it
    /// from the commit on, on every instance (the fan-out reads this table in the writer's transaction).
    public func delete(id: String, audit: AuditRecord, redeeming: StepUpRedemption? = nil) throws(StorageError) -> Bool {
        // One statement: the live endpoint found (locked), the step-up redeemed only if it is there,
        // then the deletion, its pending deliveries cancelled and the audit line only if that held.
        let statement = SQL.with([("target", "SELECT id FROM webhook_endpoints WHERE id = \(id) AND deleted_at IS NULL FOR UPDATE")]
            + StepUpRedemption.cte(redeeming, onlyIf: "target") + [
            ("gone", """
                UPDATE webhook_endpoints SET deleted_at = now()\(fragment: StepUpRedemption.gate(redeeming, and: "id IN (SELECT id FROM target)"))
                RETURNING id
                """),
            OutboxRepository.cancelPending(channel: OutboxRepository.webhookChannel, targets: "gone"),
        ] + AuditRepository.cte([audit], onlyIf: "gone"),
            "SELECT EXISTS (SELECT 1 FROM target) AS present, EXISTS (SELECT 1 FROM gone) AS deleted")
        // The endpoint is locked by a statement of its own first, in the same pipeline (one implicit
        // transaction, one round trip): a fan-out that holds it (`FOR SHARE`) commits before the lock
        // is granted, and the deleting statement, whose snapshot is taken after that, sees and
        // cancels its deliveries. In one statement its snapshot predated the wait and missed them.
        let lock: SQL = "SELECT id FROM webhook_endpoints WHERE id = \(id) AND deleted_at IS NULL FOR UPDATE"
        return try pool.run { c in
            let row = try c.pipeline([lock, statement])[1][0]
            if try row.bool("present"), !(try row.bool("deleted")) { throw StorageError.conflict(.stepUpUsed) }
            return try row.bool("deleted")
        }
    }

    static let columns = "id, url, events::text AS events, secret, created_at"

    /// An endpoint from `columns` (each name after `prefix`, as the outbox's claim returns them).
    static func endpoint(_ r: Row, prefix: String = "") throws -> WebhookEndpointRecord {
        let events = try r.stringArray(prefix + "events").map { name in
            guard let type = EventType(rawValue: name) else { throw ColumnDecodeError(column: prefix + "events", reason: "unknown event type \(name)") }
            return type
        }
        return WebhookEndpointRecord(id: try r.string(prefix + "id"), url: try r.string(prefix + "url"), events: events,
                                     sealedSecret: try r.bytes(prefix + "secret"), createdAt: try r.date(prefix + "created_at"))
    }
}
