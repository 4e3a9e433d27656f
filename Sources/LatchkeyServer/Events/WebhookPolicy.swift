/// The webhook settings, read once from the configuration (SPEC "Events: signed webhooks from an
/// outbox"; each is a `LATCHKEY_…` setting in `ConfigurationCatalogue`): where an endpoint may
/// point, how an attempt is made, and how the outbox retries and gives up.
struct WebhookPolicy: Sendable {
    /// Allowed destinations: `https://` (and `http://` to loopback in development mode), inside
    /// addresses refused unless development mode or `LATCHKEY_WEBHOOK_ALLOW_PRIVATE`.
    var destinations: WebhookAddressPolicy
    /// A delivery not made within this many seconds of its event is given up.
    var maxAgeSeconds: Int
    /// Seconds before the first retry (doubling after each).
    var retryBase: Double
    /// This instance's sender threads (0: it sends nothing).
    var senders: Int
    /// Attempts in flight to one endpoint at once.
    var perTarget: Int
    var leaseSeconds: Double
    var pollInterval: Double
    /// One attempt's timeout, in seconds.
    var timeoutSeconds: Int
    /// The schemes curl may use.
    var protocols: String
    /// The CAs a receiver's certificate must chain to (nil: the system's).
    var caFile: String?

    init(_ configuration: Configuration) {
        destinations = WebhookAddressPolicy(configuration)
        maxAgeSeconds = configuration.webhookMaxAge
        retryBase = configuration.webhookRetryBase
        senders = configuration.outboxSenders
        perTarget = configuration.webhookEndpointConcurrency
        leaseSeconds = configuration.outboxLease
        pollInterval = configuration.outboxPollInterval
        timeoutSeconds = configuration.webhookTimeout
        protocols = configuration.developmentMode ? "http,https" : "https"
        caFile = configuration.webhookCAFile
    }

    /// The outbox worker's policy on channel `webhook`.
    var outbox: OutboxWorker.Policy {
        var policy = OutboxWorker.Policy(senders: senders, perTarget: perTarget, leaseSeconds: leaseSeconds, retryBase: retryBase)
        policy.pollInterval = pollInterval
        return policy
    }
}
