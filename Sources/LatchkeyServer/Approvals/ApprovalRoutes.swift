import DeviceKeys
import HTTP
import JSON
import Storage
import Tokens

extension StepUpRule {
    /// SPEC "Quorum approvals" → "Approving": a step-up for `{"type":"latchkey.approval","approvalId",
    /// "actionHash"}` of an eligible approver, decided on the approval the caller's resolution read
    /// (`GuardPreload.approval`; the handler decides on the same read): 404 when the caller may not
    /// see it, 403 `forbidden` when the caller may not approve it, before the step-up is asked for;
    /// an id that cannot be one is left to the path check (404).
    static func approvalVote(_ approvals: ApprovalService) -> StepUpRule {
        StepUpRule(changes: "quorum approvals") { input throws(ServiceError) in
            guard let id = input.rawPath["id"], Identifiers.opaque(id) != nil, let caller = input.caller.userId else { return .none }
            return .required(try approvals.voteNeed(id: id, caller: caller, loaded: input.loads.preloadedApproval).1)
        }
    }
}

extension StepUpRule {
    /// `adminChange` for a policy: a policy the rules refuse is 400 before the step-up is asked for;
    /// a name that cannot be one is left to the path check (404), whatever the body.
    static let approvalPolicyChange = adminChange { input throws(ServiceError) in
        guard ApprovalPolicy.isName(input.rawPath["name"] ?? "") else { return false }
        _ = try ApprovalPolicy(parsing: input.body ?? .object([]))
        return true
    }
}

extension RouteTable {
    /// SPEC "Quorum approvals": policies (admin API; each change an admin change), and approvals:
    /// opened and used by a requester, approved by distinct accounts' step-ups, vetoed by the
    /// subject (also by the mailed link) or an approver.
    mutating func addApprovalRoutes(_ s: Services) {
        let approvals = s.approvals
        add("GET", "/admin/v1/approval-policies", .admin, accepting: .any) { _ in
            .json(bytes: ApprovalRenderer.policies(try approvals.policies()).serialized())
        }
        add("GET", "/admin/v1/approval-policies/{name:policyName}", .admin, accepting: .any) { ctx in
            .json(bytes: ApprovalRenderer.policy(try approvals.policy(name: try ctx.path.text("name"))).serialized())
        }
        add("PUT", "/admin/v1/approval-policies/{name:policyName}", .admin, stepUp: .approvalPolicyChange) { ctx in
            let (policy, created) = try approvals.setPolicy(try SetApprovalPolicy(name: try ctx.path.text("name"), body: try ctx.json()),
                                                            by: try ctx.admin())
            return .json(status: created ? 201 : 200, bytes: ApprovalRenderer.policy(policy).serialized())
        }
        add("DELETE", "/admin/v1/approval-policies/{name:policyName}", .admin, stepUp: .adminChange, accepting: .any) { ctx in
            try approvals.deletePolicy(name: try ctx.path.text("name"), by: try ctx.admin())
            return .empty(status: 204)
        }
        // SPEC "Admin console": the changes waiting for other admins (LATCHKEY_ADMIN_QUORUM > 1).
        add("GET", "/admin/v1/approvals", .admin, accepting: .any) { _ in
            .json(bytes: ApprovalRenderer.approvals(try approvals.pendingAdminChanges()).serialized())
        }
        add("POST", "/v1/approvals", .passkeySession, preload: Self.opening) { ctx in
            .json(status: 201, bytes: ApprovalRenderer.opened(try approvals.open(try OpenApproval(try ctx.json()), requester: try ctx.userId,
                                                                                 loaded: ctx.loads.preloadedOpening)).serialized())
        }
        add("POST", "/v1/approvals/veto", .anyone) { ctx in
            try approvals.veto(try VetoByLink(try ctx.json()))
            return .empty(status: 204)
        }
        add("GET", "/v1/approvals/{id:opaque}", .session, accepting: .any) { ctx in
            .json(bytes: ApprovalRenderer.approval(try approvals.show(id: try ctx.path.text("id"), caller: try ctx.userId)).serialized())
        }
        add("POST", "/v1/approvals/{id:opaque}/approve", .passkeySession, stepUp: .approvalVote(approvals), accepting: .any,
            preload: Self.approvalNamed) { ctx in
            var step: (StepUpRedemption, String)? = nil
            if case .stepUp(let redemption, let receiptId, _)? = ctx.approval { step = (redemption, receiptId) }
            return .json(bytes: ApprovalRenderer.approval(try approvals.approve(id: try ctx.path.text("id"), caller: try ctx.userId,
                                                                                step: step, loaded: ctx.loads.preloadedApproval)).serialized())
        }
        add("POST", "/v1/approvals/{id:opaque}/veto", .session, accepting: .any) { ctx in
            .json(bytes: ApprovalRenderer.approval(try approvals.veto(id: try ctx.path.text("id"), caller: try ctx.userId)).serialized())
        }
        add("POST", "/v1/approvals/{id:opaque}/consume", .passkeySession, preload: Self.approvalNamed) { ctx in
            let command = try ConsumeApproval(try ctx.json())
            return .json(bytes: ApprovalRenderer.approval(try approvals.consume(id: try ctx.path.text("id"), caller: try ctx.userId, command,
                                                                                loaded: ctx.loads.preloadedApproval)).serialized())
        }
    }
}

extension RouteTable {
    /// The approval a route's `{id}` names, read with the caller's standing; nothing for an id
    /// that cannot be one (the path check answers it).
    /// The opening a well-formed body asks for, read with the caller's standing; a malformed body
    /// is refused by the handler's own parse, after the caller's (401/403 first).
    @Sendable static func opening(_ request: Request, _ path: PathParameters) -> GuardPreload? {
        guard let body = try? jsonBody(request), let command = try? OpenApproval(body) else { return nil }
        return .approvalOpening(policy: command.policy, subject: command.subject)
    }

    @Sendable static func approvalNamed(_ request: Request, _ path: PathParameters) -> GuardPreload? {
        path["id"].flatMap { Identifiers.opaque($0) }.map { GuardPreload.approval(id: $0) }
    }
}

extension GuardedRoute {
    /// SPEC "Quorum approvals" → "Admin quorum": `Latchkey-Approval: <id>` of the caller's approved
    /// approval (policy `latchkey.admin`) for exactly this change, else 403 `approval_required`;
    /// checked here, used up by the change's own statement (`StepUpRedemption.approvalId`).
    static func quorumApproval(_ action: StepUpAction, _ input: GuardInput) throws(ServiceError) -> Approval {
        guard let id = input.request.header("Latchkey-Approval")?.trimmed, !id.isEmpty, let userId = input.caller.userId else {
            throw ServiceError(.approvalRequired, "under LATCHKEY_ADMIN_QUORUM=\(input.lookups.adminQuorum) this change needs Latchkey-Approval: "
                               + "an approval of policy latchkey.admin for the action \(StepUpService.text(action)), approved by that many admins")
        }
        let approvalId = try input.lookups.approvedAdminChange(id: id, userId: userId, action: action, loaded: input.loads.preloadedApproval)
        return .stepUp(StepUpRedemption(jti: "", userId: userId, actionHash: action.hash, approvalId: approvalId), receiptId: approvalId,
                       authentication: .passkeyVerified)
    }
}
