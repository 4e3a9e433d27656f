import Crypto
import DeviceKeys
import Foundation
import JSON
import Storage

extension StepUpAction {
    /// `{"type":"latchkey.approval","approvalId","actionHash"}` (SPEC "Quorum approvals" → "Approving"):
    /// one account's approval of one approval, for exactly its action.
    static func approvalVote(approvalId: String, actionHash: [UInt8]) throws(DeviceKeyError) -> StepUpAction {
        try StepUpAction(.object([("type", .string(ApprovalService.voteType)), ("approvalId", .string(approvalId)),
                                  ("actionHash", .string(Base64URL.encode(actionHash)))]))
    }
}

extension ApprovalService {
    static let voteType = GatedActionType.approvalVote

    // MARK: Approving

    /// What approving `id` needs of `caller` (the route table's `StepUpRule.approvalVote`, SPEC's
    /// order for routes that name a stored object): 404 when the caller may not see it, 403
    /// `forbidden` when the caller may not approve it, else the step-up for exactly this approval.
    func voteNeed(id: String, caller: String, loaded: LoadedApproval? = nil) throws(ServiceError) -> (ApprovalRead, StepUpAction) {
        let read = try approvable(id: id, caller: caller, loaded: loaded)
        return (read, try Self.vote(read))
    }

    /// The approval `id` if `caller` may approve it: 404 when the caller may not see it, else 403
    /// `forbidden` when the caller may not approve it.
    func approvable(id: String, caller: String, loaded: LoadedApproval?) throws(ServiceError) -> ApprovalRead {
        let read = try visible(id: id, caller: caller, loaded: loaded)
        guard Self.mayApprove(read, caller: caller) else {
            throw ServiceError(.forbidden, "this account is not one of this approval's approvers (the subject never is)")
        }
        return read
    }

    /// The step-up action that approves exactly this approval.
    static func vote(_ read: ApprovalRead) throws(ServiceError) -> StepUpAction {
        try gated { () throws(DeviceKeyError) in
            try StepUpAction.approvalVote(approvalId: read.approval.id, actionHash: read.approval.actionHash)
        }
    }

    /// `POST /v1/approvals/{id}/approve`: `caller`'s approval counted once (its step-up redeemed and
    /// its receipt recorded in the same write). 409 once the approval is no longer collecting.
    /// `loaded`: the approval as the caller's resolution read it (`GuardPreload.approval`).
    func approve(id: String, caller: String, step: (redemption: StepUpRedemption, receiptId: String)?,
                 loaded: LoadedApproval?) throws(ServiceError) -> ApprovalView {
        let read = try approvable(id: id, caller: caller, loaded: loaded)
        guard let step else {
            throw StepUpService.stepUpRequired("approving needs a step-up for \(StepUpService.text(try Self.vote(read)))")
        }
        let now = clock()
        var a = read.approval
        let state = Self.state(a, at: now)
        guard state == .collecting else {
            throw try conflict(read) { "the approval is \($0.rawValue): it takes no more approvals" }
        }
        guard !a.entries.contains(where: { $0.userId == caller }) else {
            throw ServiceError(.conflict, "this account's approval is already counted (one per account, however many keys)")
        }
        // Break glass (SPEC): approved at once, the subject mailed at once, `approval.break_glass` sent.
        var notice: [MailToSend] = []
        if a.breakGlass, let subject = a.subject, let to = read.subjectEmail.flatMap({ EmailAddress($0) }) {
            let action = (try? StepUpAction(canonical: Array(a.action.utf8))).map(Self.describe) ?? a.action
            let policyName = a.policy
            notice.append(mail.compose(.approvalBreakGlass, to: to, userId: subject, language: read.subjectLanguage) { l in
                (l[.approvalBreakGlassSubject], l[.approvalBreakGlassBody, ["action": action, "policy": policyName]])
            })
        }
        let audit = AuditRecord(.approvalGiven, actor: caller, subject: a.id, detail: [
            ("receiptId", .string(step.receiptId)), ("actionHash", .string(Base64URL.encode(a.actionHash))), ("breakGlass", .bool(a.breakGlass)),
        ])
        guard let change = try storage({ () throws(StorageError) in
            try store.approve(id: a.id, userId: caller, receiptId: step.receiptId, now: now, redeeming: step.redemption, mail: notice,
                              audit: audit, approved: template(.approvalApproved),
                              breakGlass: a.breakGlass ? template(.approvalBreakGlass) : nil)
        }) else {
            throw ServiceError(.conflict, "the approval changed meanwhile (approved by this account, vetoed, complete or expired)")
        }
        a.entries.append(ApprovalEntryRecord(userId: caller, receiptId: step.receiptId, approvedAt: now, breakGlass: a.breakGlass))
        a.state = change.state
        a.announced = change.announced
        a.usableAt = change.usableAt
        return ApprovalView(approval: a, state: Self.state(a, at: now))
    }

    // MARK: Vetoing

    /// `POST /v1/approvals/{id}/veto` by the subject or one of the policy's approvers (any session),
    /// before the approval is used.
    func veto(id: String, caller: String) throws(ServiceError) -> ApprovalView {
        let read = try visible(id: id, caller: caller)
        var a = read.approval
        guard a.subject == caller || Self.policy(a).namesApprover(caller, isAdmin: read.callerIsAdmin) else {
            throw ServiceError(.forbidden, "only the subject or one of the approval's approvers may veto it")
        }
        let now = clock()
        let state = Self.state(a, at: now)
        guard [.collecting, .waiting, .approved].contains(state) else {
            throw try conflict(read) { "the approval is \($0.rawValue): it can no longer be vetoed" }
        }
        let audit = AuditRecord(.approvalVetoed, actor: caller, subject: a.id, detail: [("actionHash", .string(Base64URL.encode(a.actionHash)))])
        guard let change = try storage({ () throws(StorageError) in
            try store.veto(id: a.id, by: caller, now: now, audit: audit, vetoed: template(.approvalVetoed))
        }) else { throw ServiceError(.conflict, "the approval changed meanwhile (used, vetoed or expired)") }
        a.state = change.state
        a.announced = change.announced
        return ApprovalView(approval: a, state: .vetoed)
    }

    /// `POST /v1/approvals/veto` `{"cancelToken"}`: the subject's mailed link, no session. An
    /// unknown, used or expired link, or an approval already used, vetoed or expired: 404.
    func veto(_ command: VetoByLink) throws(ServiceError) {
        let audit = AuditTemplate(.approvalVetoed, actor: nil, detail: [("by", .string("cancel-link"))])
        guard try storage({ () throws(StorageError) in
            try store.veto(cancelHash: OpaqueSecret.hash(command.cancelToken), now: clock(), audit: audit, vetoed: template(.approvalVetoed))
        }) != nil else { throw ServiceError.notFound("cancel link") }
    }

    // MARK: Using

    /// `POST /v1/approvals/{id}/consume` `{"actionHash"}` by the requester: 200 once when approved,
    /// then 409; before that 409; another action's hash 400 `action_mismatch`.
    func consume(id: String, caller: String, _ command: ConsumeApproval, loaded: LoadedApproval? = nil) throws(ServiceError) -> ApprovalView {
        let read = try visible(id: id, caller: caller, loaded: loaded)
        var a = read.approval
        guard a.requester == caller else { throw ServiceError(.forbidden, "only the approval's requester uses it") }
        guard constantTimeEquals(command.actionHash, a.actionHash) else {
            throw ServiceError(.actionMismatch, "the approval is for another action")
        }
        let now = clock()
        guard Self.state(a, at: now) == .approved else {
            throw try conflict(read) { "the approval is \($0.rawValue), not approved" }
        }
        let audit = AuditRecord(.approvalUsed, actor: caller, subject: a.id, detail: [("actionHash", .string(Base64URL.encode(a.actionHash)))])
        guard let change = try storage({ () throws(StorageError) in
            try store.consume(id: a.id, requester: caller, actionHash: a.actionHash, now: now, audit: audit, approved: template(.approvalApproved))
        }) else { throw ServiceError(.conflict, "the approval was used already") }
        a.state = change.state
        a.announced = change.announced
        return ApprovalView(approval: a, state: .used)
    }
}
