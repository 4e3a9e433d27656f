import Storage

/// What the webhook admin API reads and writes (ARCHITECTURE.md "Which store each feature uses"):
/// the endpoints, and their deliveries from the outbox. Each change is one transaction with its
/// audit line and the step-up's redemption (`.conflict(.stepUpUsed)`, nothing written, when that
/// fails). `WebhookRepository` in PostgreSQL; the service tests keep the same rules in memory.
protocol WebhookStore: Sendable {
    /// Stores the endpoint (its secret sealed by the caller) with `audit`.
    func create(_ endpoint: NewWebhookEndpoint, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> WebhookEndpointRecord
    /// The live endpoints, oldest first.
    func list() throws(StorageError) -> [WebhookEndpointRecord]
    /// Deletes a live endpoint and cancels its pending deliveries, with `audit` and the
    /// redemption; false when there is no such live endpoint (nothing written).
    func delete(id: String, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> Bool
    /// A live endpoint's deliveries, newest first, at most `limit`, in one read; nil when there is
    /// no such live endpoint.
    func deliveries(endpointId: String, limit: Int) throws(StorageError) -> [DeliveryRecord]?
}

extension WebhookRepository: WebhookStore {}
