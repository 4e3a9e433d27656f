import JSON
import Storage

/// Every action name the audit log records, in one place (the names are part of the admin API's
/// output, so they never change once shipped).
enum AuditAction: String, Sendable {
    case passkeyRegistered = "passkey.registered"
    case passkeyLogin = "passkey.login"
    case passkeyFlagged = "passkey.flagged"
    case passkeyRevoked = "passkey.revoked"
    case refreshReuseDetected = "refresh.reuse_detected"
    case ticketIssued = "ticket.issued"
    case deviceKeyTicketIssued = "device_key_ticket.issued"
    case originAdded = "origin.added"
    case originRemoved = "origin.removed"
    case appAdded = "app.added"
    case appUpdated = "app.updated"
    case appRemoved = "app.removed"
    case deviceKeyEnrolled = "device_key.enrolled"
    case deviceKeyRevoked = "device_key.revoked"
    case stepUpApproved = "step_up.approved"
    case webhookCreated = "webhook.created"
    case webhookDeleted = "webhook.deleted"
    case sessionRevoked = "session.revoked"
    case adminAdded = "admin.added"
    case adminRemoved = "admin.removed"
    /// `latchkey admins grant`: an existing account got the role (detail: the passkeys and device keys it held).
    case adminGranted = "admin.granted"
    // Every step of email verification, email sign-in and recovery.
    case emailVerificationStarted = "email.verification_started"
    case emailVerified = "email.verified"
    case emailSignInStarted = "email.sign_in_started"
    case emailSignIn = "email.sign_in"
    case codeRejected = "otp.rejected"
    case recoveryCodesCreated = "recovery_codes.created"
    case recoveryCodeRejected = "recovery_code.rejected"
    case recoveryChallengeStarted = "recovery.challenge_started"
    case recoveryStarted = "recovery.started"
    case recoveryCompleted = "recovery.completed"
    case recoveryCancelled = "recovery.cancelled"
    // SPEC "OpenID Provider": every approval, refusal and token issue; clients are admin changes.
    case oauthAuthorized = "oauth.authorized"
    case oauthDenied = "oauth.denied"
    case oauthTokenIssued = "oauth.token_issued"
    case oauthCodeReplayed = "oauth.code_replayed"
    /// SPEC "CIBA": a backchannel request stored, approved or denied.
    case cibaRequested = "ciba.requested"
    case cibaApproved = "ciba.approved"
    case cibaDenied = "ciba.denied"
    case clientAdded = "client.added"
    case clientUpdated = "client.updated"
    case clientRemoved = "client.removed"
    // SPEC "Quorum approvals": policies are admin changes; every step of an approval.
    case approvalPolicySet = "approval_policy.set"
    case approvalPolicyDeleted = "approval_policy.deleted"
    case approvalOpened = "approval.opened"
    case approvalGiven = "approval.approved"
    case approvalVetoed = "approval.vetoed"
    case approvalUsed = "approval.used"
    // SPEC "Portability": the vault's changes (what is stored is ciphertext; the audit names only which passkey).
    case vaultCreated = "vault.created"
    case vaultWrapped = "vault.wrapped"
    case vaultRecoverySet = "vault.recovery_set"
    // SPEC "Portability": an account created by an import (detail: the file's sha256) and an export.
    case accountImported = "account.imported"
    case accountsExported = "accounts.exported"
    /// An import over HTTP began (detail: the file's sha256, its format, a dry run): its step-up's use.
    case accountsImported = "accounts.imported"
}

/// Who did it, when it was not the signed-in user.
public enum AuditActor {
    public static let server = "latchkey"
    /// The admin key (automation); an admin user's changes carry that user's id instead.
    public static let adminKey = "admin-key"
}

extension AuditRecord {
    init(_ action: AuditAction, actor: String, subject: String?, detail: [(key: String, value: JSONValue)] = []) {
        self.init(actor: actor, action: action.rawValue, subject: subject, detail: .object(detail))
    }

}

extension AuditTemplate {
    /// A line the repository writes once per row its change returned, its subject taken from the row;
    /// `actor` nil: that subject acted itself.
    init(_ action: AuditAction, actor: String?, detail: [(key: String, value: JSONValue)] = []) {
        self.init(actor: actor, action: action.rawValue, detail: .object(detail))
    }
}

extension AppOriginAudit {
    /// The origins the app declarations added to, or removed from, the allowlist (subject: the origin).
    static func appOrigins(actor: String) -> AppOriginAudit {
        AppOriginAudit(added: AuditTemplate(.originAdded, actor: actor, detail: [("source", "app")]),
                       removed: AuditTemplate(.originRemoved, actor: actor, detail: [("source", "app")]))
    }
}
