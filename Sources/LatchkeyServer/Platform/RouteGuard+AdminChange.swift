import DeviceKeys
import HTTP

/// The admin changes' step-up rules (SPEC "Admin console"): the only rules that say they are admin
/// changes (`isAdminChange`), which the quorum check reads.
extension StepUpRule {
    static let adminChanges = "admin changes"

    /// SPEC "Admin console": with a user token, `{"type":"latchkey.admin","method","path","body"}`
    /// for exactly this request (the path as sent, still percent-encoded), approved by the admin's
    /// step-up, or under `LATCHKEY_ADMIN_QUORUM` > 1 by a quorum approval; the admin key needs none.
    static let adminChange = adminChange { _ throws(ServiceError) in true }

    /// `adminChange` after the route's own checks (`before`: a refusal of the body or of what the
    /// path names comes before the step-up; false leaves the request to the path check, no step-up).
    static func adminChange(after before: @escaping @Sendable (inout GuardInput) throws(ServiceError) -> Bool) -> StepUpRule {
        var rule = StepUpRule(changes: adminChanges) { input throws(ServiceError) in
            guard try before(&input), case .adminUser = input.caller else { return .none }
            let action = try gated { () throws(DeviceKeyError) in
                try StepUpAction.adminChange(method: input.request.method, path: input.request.rawPath, body: input.body)
            }
            return input.lookups.adminQuorum > 1 ? .approval(action) : .required(action)
        }
        rule.isAdminChange = true
        return rule
    }

    /// `adminChange` that the admin key may never make (an enrolment ticket for an existing account).
    static let adminUserChange: StepUpRule = {
        var rule = adminChange
        rule.adminKeyRefused = true
        return rule
    }()

    /// An admin change whose action is its own type rather than the request (SPEC "Portability":
    /// an export, an import): with a user token a step-up for `action`, under
    /// `LATCHKEY_ADMIN_QUORUM` > 1 a quorum approval of it; the admin key needs none, unless
    /// `adminKeyRefused`. `fileBody`: the body is a file, not JSON (the guard does not parse it).
    /// `action` may leave what it parsed to build the action in `input.loads` for the handler.
    static func adminAction(adminKeyRefused: Bool = false, fileBody: Bool = false,
                            _ action: @escaping @Sendable (inout GuardInput) throws(ServiceError) -> StepUpAction) -> StepUpRule {
        var rule = StepUpRule(changes: adminChanges) { input throws(ServiceError) in
            guard case .adminUser = input.caller else { return .none }
            let built = try action(&input)
            return input.lookups.adminQuorum > 1 ? .approval(built) : .required(built)
        }
        rule.isAdminChange = true
        rule.adminKeyRefused = adminKeyRefused
        rule.fileBody = fileBody
        return rule
    }
}
