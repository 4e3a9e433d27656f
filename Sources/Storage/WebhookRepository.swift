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
        try pool.runTransaction { c in
            try StepUpRedemption.redeem(redeeming, on: c)
            let events = JSONValue.array(endpoint.events.map { .string($0.rawValue) }).text
            let statement = SQL.with([
                ("w", """
                    INSERT INTO webhook_endpoints (id, url, events, secret)
                    VALUES (\(endpoint.id), \(endpoint.url), \(PostgresValue.text(events))::jsonb, \(endpoint.sealedSecret))
                    RETURNING \(unsafeRaw: WebhookRepository.columns)
                    """),
                ("audit", AuditRepository.insert([audit], onlyIf: "w")),
            ], "SELECT * FROM w")
            return try WebhookRepository.endpoint(try c.query(statement)[0])
        }
    }

    /// The live endpoints, oldest first.
    public func list() throws(StorageError) -> [WebhookEndpointRecord] {
        try pool.run { c in
            try c.query("""
                SELECT \(unsafeRaw: WebhookRepository.columns) FROM webhook_endpoints WHERE deleted_at IS NULL ORDER BY created_at, id
                """).map { try WebhookRepository.endpoint($0) }
        }
    }

    /// True when the endpoint is live (deleted ones keep their rows for their delivery history).
    public func exists(id: String) throws(StorageError) -> Bool {
        try pool.run { c in !(try c.query("SELECT 1 AS one FROM webhook_endpoints WHERE id = \(id) AND deleted_at IS NULL")).isEmpty }
    }

    /// Deletes a live endpoint and cancels its pending deliveries, with `audit`, in one transaction;
    /// false when there is no such live endpoint (nothing written). New events no longer fan out to it
    /// from the commit on, on every instance (the fan-out reads this table in the writer's transaction).
    public func delete(id: String, audit: AuditRecord, redeeming: StepUpRedemption? = nil) throws(StorageError) -> Bool {
        try pool.runTransaction { t in
            guard try t.execute("UPDATE webhook_endpoints SET deleted_at = now() WHERE id = \(id) AND deleted_at IS NULL") > 0 else {
                return false
            }
            try StepUpRedemption.redeem(redeeming, on: t)
            try OutboxRepository.cancelPending(channel: OutboxRepository.webhookChannel, target: id, on: t)
            try AuditRepository.write([audit], on: t)
            return true
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
