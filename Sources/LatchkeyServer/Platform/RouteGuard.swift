import DeviceKeys
import Foundation
import HTTP
import JSON
import Storage
import Tokens

// SPEC "Assurance: what each change needs (one table, checked before any handler runs)".
//
// Every route in the table declares who may call it (`Access`), the step-up its change needs
// (`StepUpRule`, a function of the parsed request) and the kind of each path parameter
// (`{id:credential}`). `RouteTable` checks them in SPEC's order before the handler runs:
//
//   401 no or bad credentials → 403 `forbidden` (the wrong kind of caller) → 400 malformed body
//   → 403 `step_up_required` → 404 a path id that cannot be one → the handler (lookups, 404)
//
// so no route can forget the guard, an unauthorized caller never learns whether an id exists,
// and an id that cannot be one never reaches SQL.

/// The caller `Access` resolved, once per request.
enum RouteCaller: Sendable {
    case anonymous
    case session(SessionService.Caller)
    case adminKey
    case adminUser(SessionService.Caller)
    case ticket(EnrolmentTicket)
    case recovery(RecoveryRecord)
    case stepUpBearer(String)
    /// The OP browser session, by its cookie (SPEC "The cookie routes"): its `sessionId` is the
    /// browser family's.
    case browser(SessionService.Caller)
    /// An OAuth client that authenticated, with its request's form (`Access.oauthClient`).
    case oauthClient(AuthenticatedClientRequest)
    /// The bearer of an OAuth access token (`Access.oauthBearer`).
    case oauthBearer(OAuthBearer)

    /// The user on whose behalf a step-up would be made, if any.
    var userId: String? {
        switch self {
        case .session(let c), .adminUser(let c), .browser(let c): c.userId
        case .ticket(let t): t.userId
        case .recovery(let r): r.userId
        case .anonymous, .adminKey, .stepUpBearer, .oauthClient, .oauthBearer: nil
        }
    }

    /// The session a step-up made beside this caller must belong to (`sid`).
    var sessionId: String? {
        switch self {
        case .session(let c), .adminUser(let c), .browser(let c): c.sessionId
        default: nil
        }
    }
}

/// The step-up a route's change needs (SPEC "Assurance": "bound to that exact change").
struct StepUpRule: Sendable {
    enum Need {
        /// This caller needs none (the admin key; registration by a new account).
        case none
        /// `Latchkey-Step-Up` for exactly this action, else 403 `step_up_required`.
        case required(StepUpAction)
        /// Checked (and redeemed) when sent; without it the change goes ahead with weaker standing
        /// (a passkey added from an email session is held).
        case optional(StepUpAction)
        /// `Latchkey-Approval` in place of the caller's own step-up: their approved quorum approval of
        /// exactly this action (an admin change under `LATCHKEY_ADMIN_QUORUM` > 1), else 403 `approval_required`.
        case approval(StepUpAction)
    }

    /// How a refusal names the change ("device-key enrolments").
    let changes: String
    /// `Latchkey-Ticket` (an app backend's device-key enrolment ticket) may stand in for the step-up.
    var ticketInstead = false
    /// A device key's step-up approves too (SPEC "OpenID Provider": authorization_details), not only a
    /// user-verified passkey's.
    var deviceKeyAllowed = false
    /// The admin key may not make this change at all (403 `forbidden`, in the caller's place in
    /// SPEC's order): only an admin user, with their step-up (SPEC "Admin console").
    var adminKeyRefused = false
    /// The body is a file the handler reads as bytes (an import), never parsed as JSON by the guard.
    var fileBody = false
    /// What this caller's change needs; a rule that reads something the handler needs too puts it
    /// in `input.loads`. A lookup that fails throws (never `.none`).
    let need: @Sendable (inout GuardInput) throws(ServiceError) -> Need

    /// An admin change (SPEC "Admin console"): under `LATCHKEY_ADMIN_QUORUM` > 1 the admin key makes
    /// none (refused in the caller's place), and an admin user's needs `.approval` (`adminChange`).
    /// Set only by the admin-change rules below, never by a rule's wording.
    var isAdminChange = false

    /// The same action for every caller of the route.
    static func always(_ changes: String, ticketInstead: Bool = false,
                       _ action: @escaping @Sendable (GuardInput) throws(ServiceError) -> StepUpAction) -> StepUpRule {
        StepUpRule(changes: changes, ticketInstead: ticketInstead) { input throws(ServiceError) in .required(try action(input)) }
    }
}

/// Builds one of the gated actions; their JSON is ours, so a failure would be a programming error
/// reported as a refusal of the input.
func gated(_ build: () throws(DeviceKeyError) -> StepUpAction) throws(ServiceError) -> StepUpAction {
    do { return try build() } catch { throw ServiceError(error) }
}

/// What a step-up rule sees: the caller, the request, its parsed JSON body and its path
/// parameters as sent (the step-up names an id as the client wrote it, before it is parsed), the
/// guard's lookups, and what the guard read so far (handed on to the handler).
struct GuardInput: Sendable {
    let request: Request
    let caller: RouteCaller
    let body: JSONValue?
    let rawPath: PathParameters
    let lookups: any GuardLookups
    var loads: GuardLoads
}

/// A checked approval the handler's change redeems in its own transaction.
enum Approval: Sendable {
    /// A step-up, with what its assertion was (the tokens an approval issues describe it).
    case stepUp(StepUpRedemption, receiptId: String, authentication: AuthenticationClaims)
    /// An app backend's device-key enrolment ticket (single use; redeemed by the enrolment).
    case ticket(hash: [UInt8])

    var redemption: StepUpRedemption? {
        if case .stepUp(let r, _, _) = self { return r }
        return nil
    }
}

/// How a path parameter is parsed (`{name:kind}` in a route pattern). A segment that cannot be
/// one names nothing: 404 `not_found`, without a lookup.
enum PathKind: String, Sendable {
    /// `Runtime.identifier()` or `sessionIdentifier()`: base64url of 16 bytes (users, sessions, device keys, receipts).
    case opaque
    /// A passkey credential id: base64url of 1…1023 bytes.
    case credential
    /// `wh_` + an opaque id.
    case webhook
    /// `rec_` + an opaque id.
    case recovery
    /// An app backend's user id: 1…128 printable characters.
    case externalId
    /// A stored string (an origin, an app id): 1…2048 bytes of printable text.
    case text
    /// An OpenID client id: `lkc_` + an opaque id.
    case client
    /// An OpenID authorization request id: `lkq_` + base64url of 32 bytes.
    case oauthRequest
    /// A quorum approval policy's name: 1…64 of `A–Z a–z 0–9 . _ -`.
    case policyName
    /// An authenticator's AAGUID: 8-4-4-4-12 hexadecimal (the value is lowercased).
    case aaguid

    func parse(_ raw: String) -> PathValue? {
        switch self {
        case .opaque: Identifiers.opaque(raw).map(PathValue.text)
        case .credential: Identifiers.credential(raw).map(PathValue.bytes)
        case .webhook: Identifiers.webhook(raw).map(PathValue.text)
        case .recovery: raw.hasPrefix("rec_") && Identifiers.opaque(String(raw.dropFirst(4))) != nil ? .text(raw) : nil
        // U+FFFD: the segment's percent-encoding was not UTF-8, so it cannot name anything stored.
        case .externalId: Identifiers.text(raw, max: 512).flatMap { $0.count <= 128 && !$0.contains("\u{FFFD}") ? .text($0) : nil }
        case .text: Identifiers.text(raw, max: 2048).flatMap { $0.contains("\u{FFFD}") ? nil : .text($0) }
        case .client: OAuthClientService.isClientId(raw) ? .text(raw) : nil
        case .oauthRequest: OpenIDProvider.isRequestId(raw) ? .text(raw) : nil
        case .policyName: ApprovalPolicy.isName(raw) ? .text(raw) : nil
        case .aaguid: PasskeyProviders.isAAGUID(raw) ? .text(raw.lowercased()) : nil
        }
    }
}

enum PathValue: Sendable {
    case text(String)
    case bytes([UInt8])
}

/// The parsed path parameters a handler gets: every one already checked against its kind.
struct TypedPath: Sendable {
    var values: [String: PathValue] = [:]

    /// A text-valued parameter (opaque ids, webhook and recovery ids, external ids, text).
    func text(_ name: String) throws(ServiceError) -> String {
        guard case .text(let v)? = values[name] else { throw ServiceError.notFound("resource") }
        return v
    }

    /// A credential id parameter, decoded.
    func bytes(_ name: String) throws(ServiceError) -> [UInt8] {
        guard case .bytes(let v)? = values[name] else { throw ServiceError.notFound("resource") }
        return v
    }
}

/// Everything a handler needs, resolved and checked by the route table.
struct RouteContext: Sendable {
    let request: Request
    let caller: RouteCaller
    let path: TypedPath
    /// The JSON body when the route's guard already parsed it.
    let parsedBody: JSONValue?
    let approval: Approval?
    /// What the guard read that the handler needs too.
    let loads: GuardLoads

    /// The body as a JSON object (parsed once: by the guard when its step-up needed it).
    func json() throws(ServiceError) -> JSONValue {
        if let parsedBody { return parsedBody }
        return try jsonBody(request)
    }

    /// The session caller (routes with `Access.session`).
    func session() throws(ServiceError) -> SessionService.Caller {
        guard case .session(let c) = caller else { throw ServiceError.unauthorized }
        return c
    }

    /// The session caller or the OP browser session (`Access.approver`, `.sessionOrBrowser`).
    func sessionOrBrowser() throws(ServiceError) -> (caller: SessionService.Caller, browser: Bool) {
        switch caller {
        case .session(let c): return (c, false)
        case .browser(let c): return (c, true)
        default: throw ServiceError.unauthorized
        }
    }

    var userId: String {
        get throws(ServiceError) { try session().userId }
    }

    /// The step-up this request's change redeems, if its rule asked for one.
    var redemption: StepUpRedemption? { approval?.redemption }

    /// Who makes an admin request, with the approval its change redeems (routes with `Access.admin`).
    func admin() throws(ServiceError) -> AdminCaller {
        switch caller {
        case .adminKey: return .adminKey
        case .adminUser(let c):
            guard case .stepUp(let r, let receiptId, _)? = approval else { return AdminCaller(actor: c.userId, approval: nil) }
            return AdminCaller(actor: c.userId, approval: AdminApproval(redemption: r, receiptId: receiptId, actionHash: r.actionHash))
        default: throw ServiceError.unauthorized
        }
    }
}

/// One route as declared in the table.
struct GuardedRoute: Sendable {
    let method: String
    /// The pattern the HTTP router matches (`{name}` segments).
    let pattern: String
    let access: Access
    let stepUp: StepUpRule?
    let kinds: [(name: String, kind: PathKind)]
    /// Off in this deployment (an optional feature): 404 before anything, as for a path that does not exist.
    let available: Bool
    /// What the handler reads that the caller's resolution may read with it (`GuardPreload`), from
    /// the request and the path as sent; nil when there is nothing to preload, or the input is
    /// not one the handler would read with (it refuses that input itself). A route with an
    /// `{id:oauthRequest}` preloads that request without saying so.
    var preload: (@Sendable (Request, PathParameters) -> GuardPreload?)? = nil

    /// `/v1/passkeys/{id:credential}` → (`/v1/passkeys/{id}`, [("id", .credential)]). A parameter
    /// without a kind, or an unknown kind, is a programming error and traps at start-up.
    static func split(_ declared: String) -> (pattern: String, kinds: [(name: String, kind: PathKind)]) {
        var kinds: [(name: String, kind: PathKind)] = []
        let segments = declared.split(separator: "/", omittingEmptySubsequences: false).map { segment -> String in
            guard segment.hasPrefix("{"), segment.hasSuffix("}") else { return String(segment) }
            let inner = segment.dropFirst().dropLast().split(separator: ":", maxSplits: 1).map(String.init)
            precondition(inner.count == 2, "path parameter \(segment) in \(declared) needs a kind ({name:kind})")
            guard let kind = PathKind(rawValue: inner[1]) else { preconditionFailure("unknown path kind \(inner[1]) in \(declared)") }
            kinds.append((inner[0], kind))
            return "{\(inner[0])}"
        }
        return (segments.joined(separator: "/"), kinds)
    }
}

extension GuardedRoute {
    /// SPEC's order, up to the handler: caller → body → step-up → path ids.
    func check(_ request: Request, _ raw: PathParameters, _ lookups: any GuardLookups) throws(ServiceError) -> RouteContext {
        var loads = GuardLoads()
        let preload = self.preload?(request, raw)
            ?? (kinds.contains { $0.kind == .oauthRequest } ? raw["id"].map { GuardPreload.authorizationRequest(id: $0) } : nil)
        let caller = try lookups.caller(access, request, preload: preload, loads: &loads)
        if stepUp?.adminKeyRefused == true, case .adminKey = caller {
            throw ServiceError(.forbidden, "the admin key cannot make this change: an admin signs in with their passkey and approves it")
        }
        if stepUp?.isAdminChange == true, lookups.adminQuorum > 1, case .adminKey = caller {
            throw ServiceError(.forbidden, "under LATCHKEY_ADMIN_QUORUM=\(lookups.adminQuorum) the admin key makes no admin change: admins approve it with their passkeys")
        }
        var body: JSONValue? = nil
        var approval: Approval? = nil
        if let stepUp {
            // The step-up's action may name what the body says: a malformed body is 400 before it is looked at.
            if !request.body.isEmpty, !stepUp.fileBody { body = try jsonBody(request) }
            var input = GuardInput(request: request, caller: caller, body: body, rawPath: raw, lookups: lookups, loads: loads)
            approval = try Self.approve(stepUp, &input)
            loads = input.loads
        }
        var typed = TypedPath()
        for (name, kind) in kinds {
            guard let value = raw[name].flatMap(kind.parse) else { throw ServiceError.notFound("resource") }
            typed.values[name] = value
        }
        return RouteContext(request: request, caller: caller, path: typed, parsedBody: body, approval: approval, loads: loads)
    }

    /// The step-up (or ticket) the rule asks of this caller, checked but not redeemed.
    static func approve(_ rule: StepUpRule, _ input: inout GuardInput) throws(ServiceError) -> Approval? {
        let need = try rule.need(&input)
        let action: StepUpAction
        let required: Bool
        switch need {
        case .none: return nil
        case .required(let a): (action, required) = (a, true)
        case .optional(let a): (action, required) = (a, false)
        case .approval(let a): return try quorumApproval(a, input)
        }
        let presented = input.request.header("Latchkey-Step-Up")?.trimmed
        guard let token = presented, !token.isEmpty else {
            if rule.ticketInstead, let ticket = input.request.header("Latchkey-Ticket")?.trimmed, !ticket.isEmpty {
                return .ticket(hash: OpaqueSecret.hash(ticket))
            }
            guard required else { return nil }
            let alternative = rule.ticketInstead ? " (or Latchkey-Ticket)" : ""
            throw StepUpService.stepUpRequired(
                "this change needs Latchkey-Step-Up\(alternative): a user-verified passkey step-up for the action \(StepUpService.text(action))")
        }
        guard let userId = input.caller.userId else {
            throw StepUpService.stepUpRequired("a step-up needs a signed-in user")
        }
        // A step-up counts only beside the session (`sid`) that asked for it, on every rule.
        let (jti, receiptId, authentication) = try input.lookups.checkedStepUp(token, userId: userId, action: action, changes: rule.changes,
                                                                               deviceKeyAllowed: rule.deviceKeyAllowed,
                                                                               session: input.caller.sessionId)
        return .stepUp(StepUpRedemption(jti: jti, userId: userId, actionHash: action.hash), receiptId: receiptId, authentication: authentication)
    }
}
