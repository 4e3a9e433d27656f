import Foundation
import JSON

/// One event for the outbox (migration 8), built by the service that makes the change and handed to
/// the repository method that makes it, like an `AuditRecord`: Storage writes it in the same
/// transaction (or statement) as the change, and fans it out there and then.
public struct OutboxEvent: Sendable, Equatable {
    /// Where an event goes, decided when it is written.
    public enum FanOut: Sendable, Equatable {
        /// One delivery (channel `webhook`) per live webhook endpoint subscribed to the event's type
        /// at write time. No endpoint subscribed and no other fan-out: the event is not stored at all.
        case webhooks
        /// One delivery on `channel` to `target`, whatever the subscriptions (mail: `channel` `.mail`,
        /// `target` the mail's own id — whatever its consumer needs to find it).
        case direct(channel: OutboxChannel, target: String)
    }

    /// Unique, and what receivers see as the event's id (Standard Webhooks' `webhook-id`).
    public let id: String
    public let type: EventType
    /// The account the event is about: deliveries to one target go out in write order per account.
    public let accountId: String
    public let data: JSONValue
    public let fanOut: [FanOut]
    /// Deliveries are retried until this many seconds after the event was written, then given up.
    public let maxAgeSeconds: Int
    /// When the event was written, on the server's clock (`Runtime.now`): the outbox keeps time by
    /// the app's clock, never the database's (see `OutboxRepository`).
    public let createdAt: Date
    /// A `.direct` delivery is first due at this instant (a CIBA ping-mode request's notification,
    /// due when the request expires unless a decision moves it); nil: at once.
    public var notBefore: Date? = nil

    public init(id: String, type: EventType, accountId: String, data: JSONValue, fanOut: [FanOut] = [.webhooks], maxAgeSeconds: Int,
                createdAt: Date) {
        self.id = id
        self.type = type
        self.accountId = accountId
        self.data = data
        self.fanOut = fanOut
        self.maxAgeSeconds = maxAgeSeconds
        self.createdAt = createdAt
    }

    /// `createdAt` + the age limit: a retry that would fall on or after it gives up instead.
    public var expiresAt: Date { createdAt.addingTimeInterval(Double(maxAgeSeconds)) }
}

/// A mail waiting to go out, as the claim of its delivery reads it.
public struct QueuedMail: Sendable, Equatable {
    public let recipient: String
    /// The whole RFC 5322 message.
    public let message: [UInt8]

    public init(recipient: String, message: [UInt8]) {
        self.recipient = recipient
        self.message = message
    }
}

/// A delivery a worker claimed: the event, where it goes, the lease that lets this worker (and no
/// other) record its outcome, and what sending it needs, read by the claim's own statement.
public struct ClaimedDelivery: Sendable, Equatable {
    public let eventId: String
    public let type: EventType
    public let accountId: String
    public let data: JSONValue
    public let createdAt: Date
    public let channel: OutboxChannel
    public let target: String
    /// This attempt's number, from 1.
    public let attempt: Int
    public let leaseId: String
    /// Until when the lease is this claim's: after it the delivery is due again (to any instance).
    public let leasedUntil: Date
    public let expiresAt: Date
    /// Channel `webhook`: the target endpoint; nil once it was deleted (nothing to send to).
    public let endpoint: WebhookEndpointRecord?
    /// Channel `mail`: the message; nil once it was sent (a retry after its outcome went unrecorded).
    public let mail: QueuedMail?

    public init(eventId: String, type: EventType, accountId: String, data: JSONValue, createdAt: Date, channel: OutboxChannel,
                target: String, attempt: Int, leaseId: String, leasedUntil: Date, expiresAt: Date,
                endpoint: WebhookEndpointRecord? = nil, mail: QueuedMail? = nil) {
        self.eventId = eventId
        self.type = type
        self.accountId = accountId
        self.data = data
        self.createdAt = createdAt
        self.channel = channel
        self.target = target
        self.attempt = attempt
        self.leaseId = leaseId
        self.leasedUntil = leasedUntil
        self.expiresAt = expiresAt
        self.endpoint = endpoint
        self.mail = mail
    }
}

/// A delivery as the admin API lists it.
public struct DeliveryRecord: Sendable, Equatable {
    public enum Status: String, Sendable { case pending, delivered, failed, cancelled }
    public let eventId: String
    public let type: EventType
    public let status: Status
    public let attempts: Int
    public let lastStatusCode: Int?
    public let lastError: String?
    /// Only while pending.
    public let nextAttemptAt: Date?
    public let createdAt: Date
}

/// Pending deliveries on one channel, for /metrics.
public struct OutboxDepth: Sendable, Equatable {
    public let channel: OutboxChannel
    public let pending: Int
    /// Seconds since the oldest pending delivery's event was written (0 when none).
    public let oldestPendingSeconds: Double

    public init(channel: OutboxChannel, pending: Int, oldestPendingSeconds: Double) {
        self.channel = channel
        self.pending = pending
        self.oldestPendingSeconds = oldestPendingSeconds
    }
}
