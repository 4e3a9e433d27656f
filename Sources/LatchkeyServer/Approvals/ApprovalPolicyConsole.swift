import JSON
import Storage

/// `latchkey policies …` (SPEC "Quorum approvals" → "Policies"): the admin API's policy changes,
/// straight in PostgreSQL, made by actor `cli` and audited like the API's. Policies come and go as
/// JSON text, exactly as the admin API shows and takes them.
public struct ApprovalPolicyConsole: Sendable {
    let approvals: ApprovalService

    public init(database: Database, configuration: Configuration) {
        let events = OutboxEvents(runtime: .system, maxAgeSeconds: WebhookPolicy(configuration).maxAgeSeconds)
        approvals = ApprovalService(store: database.approvals, mail: NoApprovalMail(), events: events, runtime: .system)
    }

    /// Every policy, `{"name",…}` one a line, by name.
    public func list() throws(ServiceError) -> [String] {
        try approvals.policies().map { String(decoding: ApprovalRenderer.policy($0).serialized(), as: UTF8.self) }
    }

    public func get(_ name: String) throws(ServiceError) -> String {
        String(decoding: ApprovalRenderer.policy(try approvals.policy(name: name)).serialized(), as: UTF8.self)
    }

    /// Creates or replaces `name` with the policy `json`; true when created.
    public func set(_ name: String, json: [UInt8]) throws(ServiceError) -> Bool {
        let body: JSONValue
        do { body = try JSONParser.parse(json) } catch { throw ServiceError.invalid("the policy is not JSON: \(error.reason)") }
        return try approvals.setPolicy(try SetApprovalPolicy(name: name, body: body), by: .named("cli")).created
    }

    public func delete(_ name: String) throws(ServiceError) { try approvals.deletePolicy(name: name, by: .named("cli")) }
}

/// Policy changes send no mail.
struct NoApprovalMail: ApprovalMail {
    func compose(_ event: MailMessage.Event, to: EmailAddress, userId: String, language: String?,
                 _ render: (MailCatalog) -> (subject: String, text: String)) -> MailToSend {
        preconditionFailure("policy changes send no mail")
    }

    func vetoLink(_ token: String) -> String { "" }
}
