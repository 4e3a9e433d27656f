import Foundation
import JSON
import Storage

/// Webhook endpoints and their deliveries rendered (SPEC "Events", `/admin/v1/webhooks`): pure
/// functions, members in the documented order; a secret only in `created`.
enum WebhookRenderer {
    /// `{"id","url","events","secret"}`.
    static func created(_ c: CreatedWebhook) -> JSONValue {
        .object([("id", .string(c.endpoint.id)), ("url", .string(c.endpoint.url)), ("events", events(c.endpoint.events)),
                 ("secret", .string(c.secret))])
    }

    /// `{"webhooks":[{"id","url","events","createdAt"}]}` (no secrets).
    static func endpoints(_ list: [WebhookEndpointRecord]) -> JSONValue {
        .object([("webhooks", .array(list.map { w in
            .object([("id", .string(w.id)), ("url", .string(w.url)), ("events", events(w.events)), ("createdAt", .string(iso8601(w.createdAt)))])
        }))])
    }

    /// `{"deliveries":[{"eventId","type","status","attempts","lastStatusCode","nextAttemptAt"}]}`, newest first.
    static func deliveries(_ rows: [DeliveryRecord]) -> JSONValue {
        .object([("deliveries", .array(rows.map { d in
            .object([("eventId", .string(d.eventId)), ("type", .string(d.type.rawValue)),
                     // A cancelled delivery (its endpoint deleted) is never sent: SPEC's statuses call that failed.
                     ("status", .string(d.status == .cancelled ? "failed" : d.status.rawValue)),
                     ("attempts", .number(Double(d.attempts))),
                     ("lastStatusCode", d.lastStatusCode.map { .number(Double($0)) } ?? .null),
                     ("nextAttemptAt", d.nextAttemptAt.map { .string(iso8601($0)) } ?? .null)])
        }))])
    }

    private static func events(_ types: [EventType]) -> JSONValue {
        .array(types.map { .string($0.rawValue) })
    }
}
