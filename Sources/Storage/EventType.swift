/// Every outbox event type (column `outbox_events.type`): the webhook types SPEC "Events" lists, and
/// `mail.message`, the event a mail goes out on (never a webhook's: it fans out to its mail delivery
/// only). Names never change once shipped; a stored name that is none of these is a decode error.
public enum EventType: String, Sendable, CaseIterable {
    case userCreated = "user.created"
    case passkeyCreated = "passkey.created"
    case passkeyRenamed = "passkey.renamed"
    case passkeyRevoked = "passkey.revoked"
    case passkeyCloneSuspected = "passkey.clone_suspected"
    case passkeyBackupEligibilityChanged = "passkey.backup_eligibility_changed"
    case deviceKeyEnrolled = "device_key.enrolled"
    case deviceKeyRevoked = "device_key.revoked"
    case stepUpApproved = "step_up.approved"
    case sessionRevoked = "session.revoked"
    case emailVerified = "email.verified"
    case recoveryStarted = "recovery.started"
    case recoveryCompleted = "recovery.completed"
    case recoveryCancelled = "recovery.cancelled"
    /// SPEC "OpenID Provider": an authorization request approved or refused on the page.
    case oauthAuthorized = "oauth.authorized"
    case oauthDenied = "oauth.denied"
    /// SPEC "Quorum approvals": an approval opened, approved (its delay over), vetoed, expired, or
    /// approved at once by break glass.
    case approvalRequested = "approval.requested"
    case approvalApproved = "approval.approved"
    case approvalVetoed = "approval.vetoed"
    case approvalExpired = "approval.expired"
    case approvalBreakGlass = "approval.break_glass"
    /// SPEC "CIBA approval": a backchannel request waits for the account's approval (the app's
    /// backend pushes it to the phone).
    case cibaRequested = "ciba.requested"
    case mailMessage = "mail.message"
    /// CIBA Core §10.2: a ping client's notification that its request's result is ready (never a
    /// webhook's: one delivery to the client's notification endpoint).
    case cibaPing = "ciba.ping"

    /// What a webhook endpoint may subscribe to: every type but `mail.message` and `ciba.ping`.
    public var isWebhookType: Bool { self != .mailMessage && self != .cibaPing }

    /// The webhook types, in declaration order.
    public static let webhookTypes: [EventType] = allCases.filter(\.isWebhookType)
}

/// Who consumes an outbox delivery (column `outbox_deliveries.channel`).
public enum OutboxChannel: String, Sendable, CaseIterable {
    /// Target: a webhook endpoint's id.
    case webhook
    /// Target: a mail's id (`MailRepository`).
    case mail
    /// Target: a CIBA ping client's id; the event carries the endpoint, the bearer and the `auth_req_id`.
    case cibaPing = "ciba_ping"
}
