import Crypto
import DeviceKeys
import JSON

// Each approvals route parses its request into one of these before the service sees it (the
// service never sees HTTP); a malformed body is 400 `invalid_request` here.

/// `PUT /admin/v1/approval-policies/{name}`.
struct SetApprovalPolicy: Sendable {
    let name: String
    let policy: ApprovalPolicy

    init(name: String, body: JSONValue) throws(ServiceError) {
        guard ApprovalPolicy.isName(name) else { throw ServiceError.invalid("a policy name is 1…64 of A–Z a–z 0–9 . _ -") }
        // `latchkey.admin` is LATCHKEY_ADMIN_QUORUM's own; every `latchkey.` name is kept for Latchkey.
        guard !name.hasPrefix("latchkey.") else { throw ServiceError.invalid("policy names starting with latchkey. are Latchkey's own") }
        self.name = name
        policy = try ApprovalPolicy(parsing: body)
    }
}

/// `POST /v1/approvals` `{"policy","action":{…},"subject":<user id>|null,"display"?:{"lang","lines"}}`.
struct OpenApproval: Sendable {
    let policy: String
    let action: StepUpAction
    let subject: String?
    let display: JSONValue?

    static let members = ["policy", "action", "subject", "display"]

    init(_ body: JSONValue) throws(ServiceError) {
        for (key, _) in body.objectValue ?? [] where !Self.members.contains(key) { throw ServiceError.invalid("unknown member \(key)") }
        guard let policy = body["policy"]?.stringValue, ApprovalPolicy.isName(policy) else {
            throw ServiceError.invalid("policy is required: a policy name")
        }
        guard let value = body["action"], case .object = value else { throw ServiceError.invalid("action is required: a JSON object") }
        do { action = try StepUpAction(value) } catch { throw ServiceError(error) }
        switch body["subject"] {
        case nil, .null?: subject = nil
        case .string(let id)?:
            // Any id the caller may not name gets the same answer as an unknown one.
            guard Identifiers.opaque(id) != nil else { throw ServiceError.invalid("subject is not a user id this server knows") }
            subject = id
        default: throw ServiceError.invalid("subject must be a user id or null")
        }
        switch body["display"] {
        case nil, .null?: display = nil
        case let d?:
            // SPEC "Evidence": what the person is shown is rendered by Latchkey for its own actions;
            // an app sends `display` only for its own action types.
            if action.value["type"]?.stringValue?.hasPrefix("latchkey.") == true {
                throw ServiceError.invalid("display is only for an app's own action types")
            }
            guard let members = d.objectValue, Set(members.map(\.key)) == ["lang", "lines"],
                  let lang = d["lang"]?.stringValue, (1...35).contains(lang.utf8.count),
                  let lines = d["lines"]?.arrayValue, (1...20).contains(lines.count),
                  lines.allSatisfy({ ($0.stringValue?.utf8.count ?? 0) > 0 && ($0.stringValue?.utf8.count ?? 0) <= 200 }) else {
                throw ServiceError.invalid("display must be {\"lang\",\"lines\"}: a language tag and 1…20 lines of text")
            }
            display = d
        }
        self.policy = policy
    }
}

/// `POST /v1/approvals/{id}/consume` `{"actionHash"}`.
struct ConsumeApproval: Sendable {
    let actionHash: [UInt8]

    init(_ body: JSONValue) throws(ServiceError) {
        guard let text = body["actionHash"]?.stringValue, let hash = Base64URL.decode(text), hash.count == 32 else {
            throw ServiceError.invalid("actionHash is required: base64url of 32 bytes")
        }
        actionHash = hash
    }
}

/// `POST /v1/approvals/veto` `{"cancelToken"}` (the mailed link; no session).
struct VetoByLink: Sendable {
    let cancelToken: String

    init(_ body: JSONValue) throws(ServiceError) {
        guard let token = body["cancelToken"]?.stringValue, (1...256).contains(token.utf8.count) else {
            throw ServiceError.invalid("cancelToken is required")
        }
        cancelToken = token
    }
}
