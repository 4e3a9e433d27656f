import Crypto
import Foundation
import JSON
@testable import LatchkeyServer
@testable import Storage
import Synchronization
import Testing

/// SPEC "Events: signed webhooks from an outbox": the webhook admin API's decisions over the
/// in-memory store (`AdminWorld`): no socket, no PostgreSQL. The destination rules have their own
/// pure tests (WebhookAddressPolicyTests, WebhookDestinationTests); WebhookTests sends over HTTP.
@Suite("Webhook service, in memory")
struct WebhookServiceTests {
    static let url = "https://hooks.example.com/latchkey"

    @Test("an endpoint: its event types checked and collapsed, the secret shown once and stored sealed, the change audited and approved")
    func create() throws {
        let w = AdminWorld()
        let ana = w.tables.addUser("ana", admin: true)
        expectRefusal(.invalidRequest) { try w.webhooks.create(.object([("url", .string(Self.url)), ("events", .array([]))])) }
        expectRefusal(.invalidRequest) { try w.webhooks.create(.object([("url", .string(Self.url)), ("events", .array(["user.deleted"]))])) }
        expectRefusal(.invalidRequest) { try w.webhooks.create(.object([("url", .string(Self.url)), ("events", .array(["mail.message"]))])) }
        expectRefusal(.invalidRequest) { try w.webhooks.create(.object([("events", .array(["user.created"]))])) }
        #expect(w.tables.snapshot.endpoints.isEmpty)

        let made = try w.webhooks.create(.object([("url", .string(Self.url)), ("events", .array(["user.created", "passkey.created", "user.created"]))]),
                                         by: w.approved(ana, action: "hook"))
        let id = made.endpoint.id
        #expect(made.endpoint.events == [.userCreated, .passkeyCreated])
        let secret = made.secret
        #expect(WebhookRenderer.created(made)["events"] == .array(["user.created", "passkey.created"]))
        let stored = try #require(w.tables.snapshot.endpoints.first?.record)
        #expect(!stored.sealedSecret.isEmpty && WebhookSignature.key(fromSecret: secret) != stored.sealedSecret)
        let sealer = SecretSealer(configuration: w.configuration, runtime: w.runtime)
        #expect(try sealer.open(stored.sealedSecret, purpose: WebhookService.secretPurpose, id: id) == WebhookSignature.key(fromSecret: secret))
        #expect(try WebhookRenderer.endpoints(w.webhooks.list())["webhooks"]?.arrayValue?.first?["secret"] == nil, "the list never shows it")
        let line = try #require(w.audit.last)
        #expect(line.action == "webhook.created" && line.subject == id && line.detail["receiptId"]?.stringValue == "rcpt-hook")
    }

    @Test("without a key-encryption key no endpoint is stored (its secret could not be kept at rest)")
    func needsKEK() throws {
        let w = AdminWorld { $0.keyEncryptionKey = nil }
        expectRefusal(.forbidden) { try w.webhooks.create(.object([("url", .string(Self.url)), ("events", .array(["user.created"]))])) }
        #expect(w.tables.snapshot.endpoints.isEmpty && w.audit.isEmpty)
    }

    @Test("events fan out to the endpoints subscribed and live when they are written; deliveries newest first, within the limit")
    func deliveries() throws {
        let w = AdminWorld()
        let users = try w.webhooks.create(.object([("url", .string(Self.url)), ("events", .array(["user.created"]))])).endpoint.id
        let keys = try w.webhooks.create(.object([("url", .string(Self.url)), ("events", .array(["passkey.created"]))])).endpoint.id
        for n in 1...3 { _ = try w.admin.enrolmentTicket(externalId: "ext-\(n)", body: .object([("username", .string("user\(n)"))]), by: .adminKey) }
        let listed = try #require(WebhookRenderer.deliveries(try w.webhooks.deliveries(id: users, limit: nil))["deliveries"]?.arrayValue)
        #expect(listed.count == 3)
        #expect(listed.map { $0["status"] } == Array(repeating: .string("pending"), count: 3))
        #expect(listed.first?["eventId"]?.stringValue == w.tables.snapshot.events.last?.id, "newest first")
        #expect(try w.webhooks.deliveries(id: users, limit: 2).count == 2)
        #expect(try w.webhooks.deliveries(id: keys, limit: nil).isEmpty)
        expectRefusal(.notFound) { try w.webhooks.deliveries(id: "wh_nobody", limit: nil) }
        expectRefusal(.notFound) { try w.webhooks.deliveries(id: "", limit: nil) }
    }

    @Test("deleting an endpoint cancels its pending deliveries in the same change; it leaves the list, and its deliveries are not found")
    func delete() throws {
        let w = AdminWorld()
        let ana = w.tables.addUser("ana", admin: true)
        let id = try w.webhooks.create(.object([("url", .string(Self.url)), ("events", .array(["user.created"]))])).endpoint.id
        _ = try w.admin.enrolmentTicket(externalId: "ext-1", body: .object([("username", "bob")]), by: .adminKey)
        expectRefusal(.notFound) { try w.webhooks.delete(id: "wh_nobody", by: w.approved(ana, action: "del-absent")) }
        #expect(w.tables.snapshot.receipts.allSatisfy { !$0.consumed }, "a 404 leaves the step-up unused")
        try w.webhooks.delete(id: id, by: w.approved(ana, action: "del"))
        #expect(w.tables.snapshot.deliveries.map(\.status) == [.cancelled])
        #expect(w.audit.last?.action == "webhook.deleted")
        #expect(try w.webhooks.list().isEmpty)
        expectRefusal(.notFound) { try w.webhooks.deliveries(id: id, limit: nil) }
        expectRefusal(.notFound) { try w.webhooks.delete(id: id) }
        // Events written after the deletion no longer fan out to it.
        _ = try w.admin.enrolmentTicket(externalId: "ext-2", body: .object([("username", "cy")]), by: .adminKey)
        #expect(w.tables.snapshot.deliveries.count == 1)
    }

    @Test("the policy is the configuration's webhook settings, read once; a storage failure is 503 internal_error")
    func policyAndFailure() throws {
        let w = AdminWorld {
            $0.developmentMode = true
            $0.webhookTimeout = 4
            $0.webhookRetryBase = 2
            $0.webhookEndpointConcurrency = 3
        }
        #expect(w.webhooks.policy.protocols == "http,https" && w.webhooks.policy.timeoutSeconds == 4)
        #expect(w.webhooks.policy.outbox.perTarget == 3 && w.webhooks.policy.outbox.retryBase == 2)
        #expect(WebhookPolicy(Configuration()).protocols == "https")
        w.tables.down.withLock { $0 = true }
        expectRefusal(.internalError) { try w.webhooks.list() }
        expectRefusal(.internalError) { try w.webhooks.create(.object([("url", .string(Self.url)), ("events", .array(["user.created"]))])) }
        expectRefusal(.internalError) { try w.webhooks.deliveries(id: "wh_x", limit: nil) }
    }
}
