import PostgreSQL

extension WebhookRepository {
    /// `GET /admin/v1/webhooks/{id}/deliveries` in one round trip: whether the endpoint is live and
    /// its deliveries, newest first, as one pipeline. Nil when there is no such live endpoint.
    public func deliveries(endpointId: String, limit: Int) throws(StorageError) -> [DeliveryRecord]? {
        try pool.run { c in
            let rows = try c.pipeline([
                "SELECT 1 AS one FROM webhook_endpoints WHERE id = \(endpointId) AND deleted_at IS NULL",
                OutboxRepository.deliveries(channel: OutboxRepository.webhookChannel, target: endpointId, limit: limit),
            ])
            guard !rows[0].isEmpty else { return nil }
            return try rows[1].map(OutboxRepository.delivery)
        }
    }
}
