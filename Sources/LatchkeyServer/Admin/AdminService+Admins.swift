import Crypto
import Foundation
import JSON
import Storage
import WebAuthn

/// The admin role from the command line (`latchkey admins add|link|grant|list|remove`, SPEC "Admin
/// console" and "Assurance": Admins). A new admin is a new account that enrols its first passkey
/// through a ticket; an existing account becomes an admin only through `grantAdmin`, after its
/// passkeys and device keys were shown — never by `add`, or whoever registered the name first would
/// be trusted with the console.
extension AdminService {
    /// `latchkey admins add <username>`: a new user with the admin role, and a single-use, 10-minute
    /// enrolment ticket for its first passkey. An existing username → 409 `conflict` (nothing written).
    public func addAdmin(username: String, by caller: AdminCaller) throws(ServiceError) -> (user: UserRecord, ticket: String, expiresAt: Date) {
        try validateName(username, "username")
        let candidate = UserRecord(id: runtime.identifier(), userHandle: runtime.random(32), username: username, displayName: username)
        guard let user = try storage({ () throws(StorageError) in
            try store.createAdmin(candidate, by: caller.actor,
                                   audit: caller.record(.adminAdded, subject: candidate.id,
                                                        detail: [("username", .string(candidate.username)), ("granted", .bool(true))]))
        }) else {
            throw ServiceError(.conflict, "\(username) exists: `latchkey admins grant \(username)` gives an existing account the admin role, "
                               + "and `latchkey admins link \(username)` prints a new enrolment link for an admin with no passkey")
        }
        let (ticket, expires) = try passkeyTicket(userId: user.id, by: caller)
        return (user, ticket, expires)
    }

    /// `latchkey admins link <username>`: a fresh single-use, 10-minute enrolment ticket for an admin
    /// who has no passkey (a link that expired, or was used by a registration that did not finish),
    /// replacing any unused one. An unknown username → 404 `not_found`; an account that is no admin,
    /// or an admin with a passkey → 409 `conflict` (nothing written).
    public func adminLink(username: String, by caller: AdminCaller) throws(ServiceError) -> (user: UserRecord, ticket: String, expiresAt: Date) {
        try validateName(username, "username")
        let ticket = OpaqueSecret(prefix: "lkt_", runtime: runtime)
        let outcome = try storage { () throws(StorageError) in
            try store.enrolmentLink(username: username, hash: ticket.hash, ttlSeconds: Self.ticketTTL,
                                     audit: caller.template(.ticketIssued, detail: [("username", .string(username))]))
        }
        switch outcome {
        case .issued(let user, let expiresAt): return (user, ticket.token, expiresAt)
        case .unknownUser: throw ServiceError.notFound("user \(username)")
        case .notAdmin:
            throw ServiceError(.conflict, "\(username) is not an admin: `latchkey admins grant \(username)` gives an existing account the role")
        case .hasPasskey:
            throw ServiceError(.conflict, "\(username) has a passkey: they sign in with it at the console (an enrolment link is for an admin with none)")
        }
    }

    /// What `latchkey admins grant <username>` shows before granting; 404 `not_found` for an unknown username.
    public func adminGrantPreview(username: String) throws(ServiceError) -> AdminGrantPreview {
        guard let candidate = try storage({ () throws(StorageError) in try store.grantCandidate(username: username) }) else {
            throw ServiceError.notFound("user \(username)")
        }
        return AdminGrantPreview(candidate: candidate)
    }

    /// Gives the shown account the admin role (audited `admin.granted` with the passkeys and device
    /// keys it held). True when granted, false when it was an admin already (nothing written);
    /// 409 `conflict` when its passkeys or device keys changed since `preview` was read, or while it
    /// has a held passkey or a pending recovery unless `despitePending` (SPEC "Assurance": Admins).
    public func grantAdmin(_ preview: AdminGrantPreview, despitePending: Bool = false, by caller: AdminCaller) throws(ServiceError) -> Bool {
        let shown = preview.candidate
        let outcome = try storage { () throws(StorageError) in
            try store.grant(existing: shown, by: caller.actor, audit: caller.record(.adminGranted, subject: shown.user.id, detail: [
                ("username", .string(shown.user.username)),
                ("passkeys", .array(shown.passkeys.map { .string(Base64URL.encode($0.id)) })),
                ("deviceKeys", .array(shown.deviceKeys.map { .string($0.id) })),
            ] + (despitePending ? [("despitePending", true)] : [])), despitePending: despitePending)
        }
        switch outcome {
        case .granted: return true
        case .alreadyAdmin: return false
        case .unknownUser: throw ServiceError.notFound("user \(shown.user.username)")
        case .changed:
            throw ServiceError(.conflict, "\(shown.user.username)'s passkeys or device keys changed while granting; nothing was granted, run it again")
        case .pending:
            throw ServiceError(.conflict, "\(shown.user.username) has a held passkey or a pending recovery (shown above): someone may be taking "
                               + "the account over, so nothing was granted; wait until it is settled, or grant with --despite-pending")
        }
    }

    public func listAdmins() throws(ServiceError) -> [AdminRecord] {
        try storage { () throws(StorageError) in try store.admins() }
    }

    /// Takes the role away; the user and their passkeys stay. False when `username` is no admin.
    public func removeAdmin(username: String, by caller: AdminCaller) throws(ServiceError) -> Bool {
        try storage { () throws(StorageError) in
            try store.revoke(username: username, audit: caller.template(.adminRemoved, detail: [("username", .string(username))]))
        } != nil
    }
}

/// An existing account as `latchkey admins grant` prints it: what the admin role would trust.
public struct AdminGrantPreview: Sendable {
    let candidate: AdminGrantCandidate

    public var user: UserRecord { candidate.user }
    public var isAdmin: Bool { candidate.isAdmin }

    public struct Passkey: Sendable {
        public let id: String
        /// The provider's display name by AAGUID (the shipped table), nil when unknown.
        public let provider: String?
        public let aaguid: String
        public let name: String
        public let createdAt: Date
        public let lastUsedAt: Date?
        /// Approves step-ups only from then (a passkey added from an email sign-in).
        public let approvesFrom: Date?
        /// While the passkey is held: when the hold ends (SPEC's `heldUntil`).
        public let heldUntil: Date?
    }

    public var passkeys: [Passkey] {
        candidate.passkeys.map { c in
            let aaguid = formatUUID(c.aaguid)
            return Passkey(id: Base64URL.encode(c.id), provider: PasskeyProviders.name(aaguid: aaguid), aaguid: aaguid, name: c.name,
                           createdAt: c.createdAt, lastUsedAt: c.lastUsedAt, approvesFrom: c.approvesFrom,
                           heldUntil: candidate.heldPasskeys.contains(c.id) ? c.approvesFrom : nil)
        }
    }

    public var deviceKeys: [DeviceKeyRecord] { candidate.deviceKeys }

    /// Recoveries of the account still pending, newest first.
    public var pendingRecoveries: [RecoveryRecord] { candidate.pendingRecoveries }

    /// A held passkey or a pending recovery: `grant` refuses unless told `--despite-pending`.
    public var hasPending: Bool { !candidate.heldPasskeys.isEmpty || !candidate.pendingRecoveries.isEmpty }
}
