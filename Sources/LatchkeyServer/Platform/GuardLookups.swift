import DeviceKeys
import HTTP
import Storage
import Tokens

/// What a route's guard may look up (SPEC "Assurance"): who the caller is, and what the step-up
/// rules read to decide what a change needs. Nothing else of the services. Every lookup throws
/// what stopped it (a database that cannot answer is 503): a guard never takes a failed lookup
/// for "allowed" or "no step-up needed".
protocol GuardLookups: Sendable {
    /// The caller of a route with `access` (`CallerResolver`); what it read beside the caller's
    /// session (`preload`, in the same round trip) goes into `loads`.
    func caller(_ access: Access, _ request: Request, preload: GuardPreload?, loads: inout GuardLoads) throws(ServiceError) -> RouteCaller
    /// How a session began and whether its passkey is held.
    func standing(_ caller: SessionService.Caller) throws(ServiceError) -> SessionService.Standing
    /// Whether an address change needs a step-up (the account has a passkey), with its mail language.
    func addressChange(userId: String) throws(ServiceError) -> AddressChangeAccount
    /// 409 `last_passkey` when revoking this passkey would leave the account no way in; else what
    /// was read (the revocation's notice needs it too).
    func refuseLastWayIn(userId: String, credentialId: [UInt8]) throws(ServiceError) -> LoadedRevocation
    /// The same decision on what the caller's resolution already read.
    func refuseLastWayIn(_ loaded: LoadedRevocation) throws(ServiceError) -> LoadedRevocation
    /// The pending authorization request `id` names; nil: none (unknown, used or expired).
    func pendingAuthorization(id: String) throws(ServiceError) -> OAuthRequestRecord?
    func client(id: String) throws(ServiceError) -> OAuthClientRecord?
    /// A presented step-up checked against the action (not redeemed: the handler's change does).
    func checkedStepUp(_ token: String, userId: String, action: StepUpAction, changes: String, deviceKeyAllowed: Bool,
                       session: String?) throws(ServiceError) -> (jti: String, receiptId: String, authentication: AuthenticationClaims)
    /// `LATCHKEY_ADMIN_QUORUM`: admins whose approval an admin change needs (1: the admin's own step-up).
    var adminQuorum: Int { get }
    /// The approval `id` if it is `userId`'s approved admin-quorum approval of exactly `action`,
    /// else 403 `approval_required` (not used up: the change's own statement does that).
    /// `loaded`: the approval as the caller's resolution read it (`CallerResolver.admin`), used when it is this one.
    func approvedAdminChange(id: String, userId: String, action: StepUpAction, loaded: LoadedApproval?) throws(ServiceError) -> String
    /// After the route: the refusal that replaces its answer when the DPoP proof the caller's
    /// resolution handed to the route's write was a replay (`SessionDPoP.settle`); nil otherwise.
    func settleProof() -> ServiceError?
}

extension GuardLookups {
    var adminQuorum: Int { 1 }
    func approvedAdminChange(id: String, userId: String, action: StepUpAction, loaded: LoadedApproval?) throws(ServiceError) -> String {
        throw ServiceError(.approvalRequired, "admin changes need no quorum approval here")
    }
    /// Lookups that resolve no DPoP-bound session hand no proof to a write.
    func settleProof() -> ServiceError? { nil }
}

/// What a route's handler reads that the caller's resolution may read with the caller's session,
/// in the same round trip, whatever the caller turns out to be (nothing is shown before the guard
/// has decided, and a read that fails fails the request).
enum GuardPreload: Sendable, Equatable {
    /// The authorization request a route's `{id:oauthRequest}` names (the approver's and the OP
    /// cookie's routes).
    case authorizationRequest(id: String)
    /// The console page an admin route shows (read with an admin user's role and standing).
    case adminPage(AdminPageRequest)
    /// The quorum approval an approval route's `{id}` names (read with the caller's standing).
    case approval(id: String)
    /// What opening a quorum approval reads (the policy the body names, the requester's last hour,
    /// the subject), read with the caller's standing.
    case approvalOpening(policy: String, subject: String?)
    /// The CIBA request a CIBA approval's `{authReqId}` names (read with the caller's standing).
    case cibaRequest(id: String)

    var cibaRequestId: String? {
        if case .cibaRequest(let id) = self { return id }
        return nil
    }

    var authorizationRequestId: String? {
        if case .authorizationRequest(let id) = self { return id }
        return nil
    }

    var adminPage: AdminPageRequest? {
        if case .adminPage(let page) = self { return page }
        return nil
    }

    var approvalId: String? {
        if case .approval(let id) = self { return id }
        return nil
    }

    var approvalOpening: (policy: String, subject: String?)? {
        if case .approvalOpening(let policy, let subject) = self { return (policy, subject) }
        return nil
    }
}

/// What the guard read that the handler needs too: handed to it in `RouteContext.loads`, so the
/// handler does not read it again.
struct GuardLoads: Sendable {
    /// The authorization request a route's `{id:oauthRequest}` names, read with the caller's session
    /// (the OP cookie's, or a Bearer approver's) or by the approval's step-up rule.
    var authorizationRequest: AuthorizationRequestRead? = nil
    /// What a passkey revocation's last-way-in check read (the ways in, the notice's address and language).
    var passkeyRevocation: LoadedRevocation? = nil
    /// The console page the route shows, read with an admin user's role and standing (nil: not
    /// read, as for the admin key, whose resolution reads nothing).
    var adminPage: AdminPageRead? = nil
    /// Registration options' account, read with the caller (`CallerResolver`, access `.registration`).
    var registration: PreloadedRegistration? = nil
    /// The account an address change's rule read (`StepUpRule.emailChange`): its mail language.
    var addressChange: AddressChangeAccount? = nil
    /// The approval a route's `{id}` names, read with the caller's standing (`GuardPreload.approval`):
    /// what the rule and the handler decide on instead of reading it again.
    var preloadedApproval: LoadedApproval? = nil
    /// What opening a quorum approval reads, read with the caller's standing (`GuardPreload.approvalOpening`).
    var preloadedOpening: LoadedOpening? = nil
    /// The CIBA request a route's `{authReqId}` names, read by its approval's step-up rule.
    var cibaRequest: CIBARequestRead? = nil
    /// An import's file as its step-up rule parsed and hashed it (the action names the body's SHA-256).
    var importCommand: ImportCommand? = nil
}

/// The guards' lookups in a served instance: the services that answer them.
struct ServiceLookups: GuardLookups {
    let callers: CallerResolver
    let sessions: SessionService
    let passkeys: PasskeyService
    let openID: OpenIDProvider
    let clients: OAuthClientService
    let stepUp: StepUpService
    let recovery: RecoveryService
    let approvals: ApprovalService
    let adminQuorum: Int

    init(_ s: Services) {
        callers = s.callers
        sessions = s.sessions
        passkeys = s.passkeys
        openID = s.openID
        clients = s.oauthClients
        stepUp = s.stepUp
        recovery = s.recovery
        approvals = s.approvals
        adminQuorum = s.configuration.adminQuorum
    }

    func approvedAdminChange(id: String, userId: String, action: StepUpAction, loaded: LoadedApproval?) throws(ServiceError) -> String {
        try approvals.approvedAdminChange(id: id, userId: userId, action: action, loaded: loaded)
    }

    func settleProof() -> ServiceError? { callers.dpop.settle() }

    func caller(_ access: Access, _ request: Request, preload: GuardPreload?, loads: inout GuardLoads) throws(ServiceError) -> RouteCaller {
        try callers.resolve(access, request, preload: preload, loads: &loads)
    }

    func standing(_ caller: SessionService.Caller) throws(ServiceError) -> SessionService.Standing { try sessions.standing(caller) }

    func addressChange(userId: String) throws(ServiceError) -> AddressChangeAccount { try recovery.addressChange(userId: userId) }

    func refuseLastWayIn(userId: String, credentialId: [UInt8]) throws(ServiceError) -> LoadedRevocation {
        try passkeys.refuseLastWayIn(userId: userId, credentialId: credentialId)
    }

    func refuseLastWayIn(_ loaded: LoadedRevocation) throws(ServiceError) -> LoadedRevocation { try passkeys.refuseLastWayIn(loaded) }

    func pendingAuthorization(id: String) throws(ServiceError) -> OAuthRequestRecord? { try openID.pendingRequest(id) }

    func client(id: String) throws(ServiceError) -> OAuthClientRecord? { try clients.client(id: id) }

    func checkedStepUp(_ token: String, userId: String, action: StepUpAction, changes: String, deviceKeyAllowed: Bool,
                       session: String?) throws(ServiceError) -> (jti: String, receiptId: String, authentication: AuthenticationClaims) {
        try stepUp.checkedStepUp(token, userId: userId, action: action, changes: changes, deviceKeyAllowed: deviceKeyAllowed, session: session)
    }
}

/// The account registration options are for, read with their caller: the account (nil: none, as
/// for a caller that names no account) and the `jti` of the step-up whose redeemability was read
/// with it (nil: none presented). The handler uses it only for the same account and step-up.
struct PreloadedRegistration: Sendable {
    let account: RegistrationAccount?
    let stepUpJTI: String?
}
