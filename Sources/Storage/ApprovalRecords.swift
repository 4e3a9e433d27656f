import Foundation
import JSON
import PostgreSQL

/// A named approval policy (migration 27): its JSON document as the admin API shows it.
public struct ApprovalPolicyRecord: Sendable, Equatable {
    public let name: String
    public let document: String
    public let updatedAt: Date
    public let updatedBy: String

    public init(name: String, document: String, updatedAt: Date, updatedBy: String) {
        self.name = name
        self.document = document
        self.updatedAt = updatedAt
        self.updatedBy = updatedBy
    }
}

/// What an approval's row says of its state (`approved` and `expired` follow from time, see migration 27).
public enum StoredApprovalState: String, Sendable {
    case collecting, waiting, used, vetoed
}

/// One account's counted approval, with the receipt of its step-up.
public struct ApprovalEntryRecord: Sendable, Equatable {
    public let userId: String
    public let receiptId: String
    public let approvedAt: Date
    public let breakGlass: Bool

    public init(userId: String, receiptId: String, approvedAt: Date, breakGlass: Bool) {
        self.userId = userId
        self.receiptId = receiptId
        self.approvedAt = approvedAt
        self.breakGlass = breakGlass
    }
}

/// An approval as stored, with its entries (oldest first).
public struct ApprovalRecord: Sendable, Equatable {
    public let id: String
    public let policy: String
    /// The policy's document as it was when the approval was opened.
    public let policyDocument: String
    public let requester: String
    public let subject: String?
    /// The action's RFC 8785 bytes, as text.
    public let action: String
    public let actionHash: [UInt8]
    /// `{"lang","lines"}` as sent, or nil.
    public let display: String?
    public let needed: Int
    public let delaySeconds: Int
    public let breakGlass: Bool
    public var state: StoredApprovalState
    /// The last state an event was written for: `requested`, `approved`, `expired`, `vetoed`, `used`.
    public var announced: String
    public let createdAt: Date
    public let expiresAt: Date
    public var usableAt: Date?
    public var entries: [ApprovalEntryRecord]

    public init(id: String, policy: String, policyDocument: String, requester: String, subject: String?, action: String,
                actionHash: [UInt8], display: String?, needed: Int, delaySeconds: Int, breakGlass: Bool,
                state: StoredApprovalState = .collecting, announced: String = "requested", createdAt: Date, expiresAt: Date,
                usableAt: Date? = nil, entries: [ApprovalEntryRecord] = []) {
        self.id = id
        self.policy = policy
        self.policyDocument = policyDocument
        self.requester = requester
        self.subject = subject
        self.action = action
        self.actionHash = actionHash
        self.display = display
        self.needed = needed
        self.delaySeconds = delaySeconds
        self.breakGlass = breakGlass
        self.state = state
        self.announced = announced
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.usableAt = usableAt
        self.entries = entries
    }
}

/// What opening an approval decides with, in one read: the policy, whether the requester has the
/// admin role, the subject (nil when no such account) with its verified address and mail language,
/// and how many approvals the requester opened since `since` (and the oldest of them).
public struct ApprovalOpenRead: Sendable, Equatable {
    public let policy: ApprovalPolicyRecord?
    public let requesterIsAdmin: Bool
    public let subjectExists: Bool
    public let subjectEmail: String?
    public let subjectLanguage: String?
    public let openedSince: Int
    public let oldestSince: Date?

    public init(policy: ApprovalPolicyRecord?, requesterIsAdmin: Bool, subjectExists: Bool, subjectEmail: String?,
                subjectLanguage: String?, openedSince: Int, oldestSince: Date?) {
        self.policy = policy
        self.requesterIsAdmin = requesterIsAdmin
        self.subjectExists = subjectExists
        self.subjectEmail = subjectEmail
        self.subjectLanguage = subjectLanguage
        self.openedSince = openedSince
        self.oldestSince = oldestSince
    }
}

/// An approval with what the caller's request decides with: whether the caller has the admin role,
/// and the subject's verified address and mail language (break glass mails it).
public struct ApprovalRead: Sendable, Equatable {
    public let approval: ApprovalRecord
    public let callerIsAdmin: Bool
    public let subjectEmail: String?
    public let subjectLanguage: String?

    public init(approval: ApprovalRecord, callerIsAdmin: Bool, subjectEmail: String?, subjectLanguage: String?) {
        self.approval = approval
        self.callerIsAdmin = callerIsAdmin
        self.subjectEmail = subjectEmail
        self.subjectLanguage = subjectLanguage
    }
}

/// The approval events a statement writes once for each approval row its change returned, with
/// `data` `{approvalId, policy, subject, actionHash}` taken from that row.
public struct ApprovalEventTemplate: Sendable, Equatable {
    public let template: EventTemplate
    public init(_ template: EventTemplate) { self.template = template }
}

/// The approval change a vote, veto or consumption made, as its statement returned it.
public struct ApprovalChange: Sendable, Equatable {
    public let state: StoredApprovalState
    public let announced: String
    public let usableAt: Date?

    public init(state: StoredApprovalState, announced: String, usableAt: Date?) {
        self.state = state
        self.announced = announced
        self.usableAt = usableAt
    }
}
