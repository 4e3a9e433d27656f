import Crypto
import Curl
import Foundation
import JSON
import Storage

/// Webhooks (SPEC "Events: signed webhooks from an outbox"): the admin API for endpoints and their
/// deliveries (`WebhookStore`), and the sender — the `deliver` of the `OutboxWorker` on channel
/// `webhook` (`worker`), which signs each attempt in the Standard Webhooks wire format and posts it
/// over libcurl. Every setting comes from one `WebhookPolicy`.
public final class WebhookService: Sendable {
    let store: any WebhookStore
    let sealer: SecretSealer
    let policy: WebhookPolicy
    let runtime: Runtime

    /// The sealed secret's associated-data purpose (`SecretSealer`).
    static let secretPurpose = "webhook-secret"

    init(store: any WebhookStore, sealer: SecretSealer, policy: WebhookPolicy, runtime: Runtime) {
        self.store = store
        self.sealer = sealer
        self.policy = policy
        self.runtime = runtime
    }

    /// This instance's consumer of channel `webhook`: each claimed delivery signed and sent by a `WebhookSender`.
    static func worker(outbox: OutboxRepository, sealer: SecretSealer, policy: WebhookPolicy, metrics: Metrics,
                       runtime: Runtime) -> OutboxWorker {
        let sender = WebhookSender(sealer: sealer, policy: policy, runtime: runtime)
        return OutboxWorker(channel: OutboxRepository.webhookChannel, outbox: outbox, policy: policy.outbox, runtime: runtime,
                            deliver: { sender.deliver($0) },
                            observe: { [metrics] d, outcome in metrics.observeDelivery(type: d.type.rawValue, outcome: outcome) })
    }

    // MARK: Admin API

    /// `POST /admin/v1/webhooks` `{"url","events"}` → `{"id","url","events","secret"}` (the secret shown once).
    func create(_ body: JSONValue, by caller: AdminCaller = .adminKey) throws(ServiceError) -> CreatedWebhook {
        guard let url = body["url"]?.stringValue else { throw ServiceError.invalid("url is required") }
        try policy.destinations.check(try WebhookURL(parsing: url))
        guard let list = body["events"]?.arrayValue, !list.isEmpty else { throw ServiceError.invalid("events must be a non-empty list") }
        var events: [EventType] = []
        for item in list {
            guard let name = item.stringValue, let type = EventType(rawValue: name), type.isWebhookType else {
                throw ServiceError.invalid("events: \(item.stringValue.map { "\"\($0)\"" } ?? "a non-string") is not an event type")
            }
            if !events.contains(type) { events.append(type) }
        }
        guard sealer.isAvailable else { throw SecretSealer.unavailable }
        let id = "wh_" + runtime.identifier()
        let key = runtime.random(32)
        let sealed = try sealer.seal(key, purpose: Self.secretPurpose, id: id)
        let record = try storage { () throws(StorageError) in
            try store.create(NewWebhookEndpoint(id: id, url: url, events: events, sealedSecret: sealed),
                                audit: caller.record(.webhookCreated, subject: id,
                                                     detail: [("url", .string(url)), ("events", .array(events.map { .string($0.rawValue) }))]),
                                redeeming: caller.redemption)
        }
        return CreatedWebhook(endpoint: record, secret: WebhookSignature.secret(key: key))
    }

    /// `GET /admin/v1/webhooks` (no secrets).
    /// `loaded`: the endpoints the admin's caller resolution read with the role (`GuardLoads.adminPage`).
    func list(loaded: AdminPageRead? = nil) throws(ServiceError) -> [WebhookEndpointRecord] {
        if case .webhooks(let endpoints)? = loaded { return endpoints }
        return try storage { () throws(StorageError) in try store.list() }
    }

    /// `DELETE /admin/v1/webhooks/{id}`: its pending deliveries are cancelled in the same transaction.
    func delete(id: String, by caller: AdminCaller = .adminKey) throws(ServiceError) {
        guard !id.isEmpty, id.utf8.count <= 64, try storage({ () throws(StorageError) in
            try store.delete(id: id, audit: caller.record(.webhookDeleted, subject: id), redeeming: caller.redemption)
        }) else { throw ServiceError.notFound("webhook") }
    }

    /// `GET /admin/v1/webhooks/{id}/deliveries?limit=`, newest first.
    func deliveries(id: String, limit: Int64?) throws(ServiceError) -> [DeliveryRecord] {
        let n = Int(min(max(limit ?? 50, 1), 1000))
        guard !id.isEmpty, id.utf8.count <= 64,
              let rows = try storage({ () throws(StorageError) in try store.deliveries(endpointId: id, limit: n) }) else {
            throw ServiceError.notFound("webhook")
        }
        return rows
    }
}

/// A new endpoint with its signing secret (`whsec_…`), shown this once.
struct CreatedWebhook: Sendable {
    let endpoint: WebhookEndpointRecord
    let secret: String
}

/// One attempt of one delivery: sign, post, read the status. Stateless; runs on the worker's senders.
/// The endpoint came with the claim (no read of its own).
struct WebhookSender: Sendable {
    let sealer: SecretSealer
    let policy: WebhookPolicy
    let runtime: Runtime

    func deliver(_ d: ClaimedDelivery) -> OutboxWorker.Outcome {
        guard let endpoint = d.endpoint else { return .giveUp(statusCode: nil, error: "the endpoint was deleted") }
        let key: [UInt8]
        do { key = try sealer.open(endpoint.sealedSecret, purpose: WebhookService.secretPurpose, id: endpoint.id) } catch {
            return .retry(statusCode: nil, error: error.detail)
        }
        // The URL was checked when the endpoint was created; its rules are applied again (this
        // instance's configuration), then to every address its host resolves to now, and the
        // connection goes only to those (no second lookup). A refused address fails the attempt like
        // a refused connection: retried, and recorded.
        let destination: CheckedDestination
        do { destination = try self.destination(endpoint.url) } catch { return .retry(statusCode: nil, error: error.detail) }
        let body = Self.body(d)
        let timestamp = runtime.unixTime
        let headers = [("Content-Type", "application/json"), ("webhook-id", d.eventId), ("webhook-timestamp", String(timestamp)),
                       ("webhook-signature", WebhookSignature.sign(id: d.eventId, timestamp: timestamp, body: body, key: key))]
        var options = CurlOptions()
        options.timeoutSeconds = policy.timeoutSeconds
        options.protocols = policy.protocols
        options.maxResponseBytes = 1024
        options.userAgent = "Latchkey-Webhooks/1"
        options.maxRedirects = 0  // a 3xx is an answer (retried), never followed
        options.connectOnlyTo = destination.addresses.map(\.bytes)
        options.caFile = policy.caFile
        do {
            let response = try Curl.post(destination.url.text, headers: headers, body: body, options: options)
            if (200...299).contains(response.status) { return .delivered(statusCode: response.status) }
            return .retry(statusCode: response.status, error: "HTTP \(response.status)")
        } catch {
            return .retry(statusCode: nil, error: error.description)
        }
    }

    /// The URL parsed and checked, its host resolved (a literal is its own address), every address checked.
    func destination(_ url: String) throws(ServiceError) -> CheckedDestination {
        let policy = self.policy.destinations
        let parsed = try WebhookURL(parsing: url)
        try policy.check(parsed)
        switch parsed.host {
        case .address(let a):
            return try policy.check(parsed, resolvedTo: [a])
        case .name(let name):
            switch runtime.resolver.addresses(of: name) {
            case .success(let addresses): return try policy.check(parsed, resolvedTo: addresses)
            case .failure(let f): throw ServiceError.invalid("could not resolve \(name): \(f.reason)")
            }
        }
    }

    /// `{"type","timestamp","data"}`: the exact bytes that are signed and sent (the same on every retry).
    static func body(_ d: ClaimedDelivery) -> [UInt8] {
        JSONValue.object([("type", .string(d.type.rawValue)), ("timestamp", .string(iso8601(d.createdAt))), ("data", d.data)]).serialized()
    }
}
