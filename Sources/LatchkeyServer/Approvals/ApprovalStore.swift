import Foundation
import Storage

/// Everything quorum approvals read and write (SPEC "Quorum approvals"): policies, approvals with
/// their entries, and the subject's cancel links. Each request makes one read and at most one
/// write; every write carries its audit lines, events, mail and the step-up it redeems, and checks
/// again what another request could have changed since the read. `ApprovalRepository` in
/// PostgreSQL; `InMemoryApprovalStore` keeps the same rules in the service tests.
protocol ApprovalStore: Sendable {
    func policies() throws(StorageError) -> [ApprovalPolicyRecord]
    func policy(name: String) throws(StorageError) -> ApprovalPolicyRecord?
    /// Creates or replaces a policy (true: created); `.conflict(.stepUpUsed)` when the step-up cannot be redeemed.
    func setPolicy(name: String, document: String, by actor: String, audit: AuditRecord,
                   redeeming: StepUpRedemption?) throws(StorageError) -> Bool
    /// False when there is no such policy (nothing written, the step-up unspent).
    func deletePolicy(name: String, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> Bool

    /// Opening's one read.
    func openRead(policy: String, requester: String, subject: String?, since: Date) throws(StorageError) -> ApprovalOpenRead
    /// Opening's one write; false when the requester opened `limit` since `since` (nothing written).
    func open(_ a: ApprovalRecord, limit: Int, since: Date, cancelHash: [UInt8]?, mail: [MailToSend], audit: AuditRecord,
              requested: ApprovalEventTemplate?) throws(StorageError) -> Bool

    /// The approval with its entries and what `caller` is to it; nil when there is none.
    func read(id: String, caller: String) throws(StorageError) -> ApprovalRead?
    /// Counts one account's approval (see `ApprovalRepository.approve`); nil: not counted.
    func approve(id: String, userId: String, receiptId: String, now: Date, redeeming: StepUpRedemption, mail: [MailToSend],
                 audit: AuditRecord, approved: ApprovalEventTemplate, breakGlass: ApprovalEventTemplate?) throws(StorageError) -> ApprovalChange?
    /// Vetoes a collecting or waiting approval, unexpired at `now`; nil: nothing written.
    func veto(id: String, by: String, now: Date, audit: AuditRecord, vetoed: ApprovalEventTemplate) throws(StorageError) -> ApprovalChange?
    /// Uses a cancel link and vetoes its approval; the approval's id, or nil (nothing written).
    func veto(cancelHash: [UInt8], now: Date, audit: AuditTemplate, vetoed: ApprovalEventTemplate) throws(StorageError) -> String?
    /// Uses an approved approval once, for its requester and action hash; nil: nothing written.
    func consume(id: String, requester: String, actionHash: [UInt8], now: Date, audit: AuditRecord,
                 approved: ApprovalEventTemplate) throws(StorageError) -> ApprovalChange?
    /// `policy`'s approvals not yet used, vetoed or expired at `now` (collecting, waiting, or approved
    /// and not yet made), oldest first, at most `limit`.
    func pending(policy: String, now: Date, limit: Int) throws(StorageError) -> [ApprovalRecord]
    /// Writes `event` once, while the approval's announced state is `from`; false: announced already.
    func announce(id: String, from: String, to: String, event: ApprovalEventTemplate) throws(StorageError) -> Bool
}

extension ApprovalRepository: ApprovalStore {}
