import Crypto
import JSON
import Storage

/// Approvals and policies as the API shows them (SPEC "Quorum approvals").
enum ApprovalRenderer {
    /// `POST /v1/approvals` → `{"id","state":"collecting","needed","approvals":[],"actionHash","expiresAt"}`.
    static func opened(_ v: ApprovalView) -> JSONValue {
        .object([("id", .string(v.approval.id)), ("state", .string(v.state.rawValue)), ("needed", .number(Double(v.approval.needed))),
                 ("approvals", .array([])), ("actionHash", .string(Base64URL.encode(v.approval.actionHash))),
                 ("expiresAt", .string(iso8601(v.approval.expiresAt)))])
    }

    /// `{"id","policy","state","needed","actionHash","action","display","subject","requester",
    /// "approvals":[{"userId","receiptId","approvedAt"}],"expiresAt","usableAt"|null,"breakGlass"}`.
    static func approval(_ v: ApprovalView) -> JSONValue {
        let a = v.approval
        return .object([
            ("id", .string(a.id)), ("policy", .string(a.policy)), ("state", .string(v.state.rawValue)),
            ("needed", .number(Double(a.needed))), ("actionHash", .string(Base64URL.encode(a.actionHash))),
            ("action", stored(a.action)), ("display", a.display.map(stored) ?? .null),
            ("subject", a.subject.map(JSONValue.string) ?? .null), ("requester", .string(a.requester)),
            ("approvals", .array(a.entries.map { e in
                .object([("userId", .string(e.userId)), ("receiptId", .string(e.receiptId)), ("approvedAt", .string(iso8601(e.approvedAt)))])
            })),
            ("expiresAt", .string(iso8601(a.expiresAt))), ("usableAt", a.usableAt.map { .string(iso8601($0)) } ?? .null),
            ("breakGlass", .bool(a.breakGlass)),
        ])
    }

    /// `{"approvals":[…]}`.
    static func approvals(_ list: [ApprovalView]) -> JSONValue { .object([("approvals", .array(list.map(approval)))]) }

    /// JSON Latchkey wrote itself (the action's RFC 8785 bytes, the display as sent).
    static func stored(_ text: String) -> JSONValue { (try? JSONParser.parse(Array(text.utf8))) ?? .null }

    /// A policy: `{"name", …the policy's members}`.
    static func policy(_ p: NamedApprovalPolicy) -> JSONValue {
        .object([("name", .string(p.name))] + (p.policy.json.objectValue ?? []))
    }

    static func policies(_ list: [NamedApprovalPolicy]) -> JSONValue { .object([("policies", .array(list.map(policy)))]) }
}
