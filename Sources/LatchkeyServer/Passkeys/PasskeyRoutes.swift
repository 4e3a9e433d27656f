import EventLoop
import DeviceKeys
import HTTP
import JSON
import Storage
import WebAuthn

extension RouteTable {
    /// Passkey ceremonies and passkey management (SPEC "HTTP contract", "Assurance").
    mutating func addPasskeyRoutes(_ s: Services) {
        add("POST", "/v1/passkeys/registration/options", .registration, stepUp: .passkeyAddition) { ctx in
            let requester: PasskeyService.Requester
            var conditional = false
            switch ctx.caller {
            case .recovery(let recovery):
                // SPEC "Assurance" Limits: conditional create (UP = 0) never with a recovery token.
                if try Self.conditional(ctx) {
                    throw ServiceError(.forbidden, "a recovery registers its passkey with the user present: conditional create is not available")
                }
                requester = .recovery(recovery)
            case .session(let caller):
                // A passkey session always brings the step-up (the rule demands it); an email session
                // or one a held passkey began may go without, and its new passkey is held.
                requester = .user(caller.userId, held: ctx.approval == nil ? .held : .notHeld, redeeming: ctx.redemption)
                conditional = try Self.conditional(ctx)
            case .ticket(let ticket):
                // An app backend vouches: held when the account already has a passkey (SPEC "Assurance");
                // an admin's ticket by account id always holds. The verify uses the ticket up.
                requester = .ticket(ticket)
                conditional = try Self.conditional(ctx)
            default:
                // A new account's options are never conditional, but a malformed `mediation` is refused
                // here as everywhere (`"mediation":"AAA"` is 400 on this path too).
                _ = try Self.conditional(ctx)
                let (username, displayName) = try RequestFields.accountNames(try ctx.json())
                requester = .newAccount(username: username, displayName: displayName)
            }
            return .json(bytes: PasskeyRenderer.options(try s.passkeys.registrationOptions(for: requester, conditional: conditional,
                                                                                                   preloaded: ctx.loads.registration)).serialized())
        }
        add("POST", "/v1/passkeys/registration/verify", .registrationVerify) { ctx in
            // The language memo rides in the registration's one statement; so does a DPoP proof's
            // jti, the proof binding the session as at a sign-in.
            let dpop = try s.callers.dpop.binding(ctx.request)
            let result = try s.passkeys.verifyRegistration(ctx.request.body, userAgent: ctx.request.header("User-Agent"),
                                                           language: I18nCatalogs.negotiate(ctx.request.header("Accept-Language")),
                                                           dpop: dpop)
            return .json(status: 201, bytes: PasskeyRenderer.signedIn(result))
        }
        // A sign-in's two requests also answer on an event loop (LATCHKEY_EVENT_LOOPS): the same
        // parsing, service and rendering, the store's round trips awaited there.
        add("POST", "/v1/passkeys/authentication/options", .anyone, { ctx in
            .json(bytes: PasskeyRenderer.options(try s.passkeys.authenticationOptions(username: try loginUsername(ctx))).serialized())
        }, onLoop: { ctx, loop throws(ServiceError) in
            .json(bytes: PasskeyRenderer.options(try await s.passkeys.authenticationOptions(username: try loginUsername(ctx), over: s.loopLogins(loop)))
                .serialized())
        })
        // The language memo rides in the login's one statement; so does the jti of the DPoP proof
        // that binds the session.
        @Sendable func signInExtras(_ ctx: RouteContext) throws(ServiceError) -> (language: String?, dpop: DPoPBinding?) {
            (I18nCatalogs.negotiate(ctx.request.header("Accept-Language")), try s.callers.dpop.binding(ctx.request))
        }
        add("POST", "/v1/passkeys/authentication/verify", .anyone, { ctx in
            let extras = try signInExtras(ctx)
            return .json(bytes: PasskeyRenderer.signedIn(try s.passkeys.verifyAuthentication(ctx.request.body, language: extras.language,
                                                                                             dpop: extras.dpop)))
        }, onLoop: { ctx, loop throws(ServiceError) in
            let extras = try signInExtras(ctx)
            return .json(bytes: PasskeyRenderer.signedIn(try await s.passkeys.verifyAuthentication(ctx.request.body, language: extras.language,
                                                                                                   dpop: extras.dpop, over: s.loopLogins(loop))))
        })
        // SPEC "Portability": a provider's icon, public. `sandbox` makes an SVG opened on its own a
        // document without scripts or same-origin access, and `nosniff` keeps it the type it is
        // served as; `cross-origin` lets an app's own pages show them. Icons change only with the
        // AAGUID table or the metadata: caches keep them a day.
        add("GET", "/v1/providers/{aaguid:aaguid}/icon", .anyone, accepting: .any) { ctx in
            guard let aaguid = parseUUID(try ctx.path.text("aaguid")),
                  let icon = s.passkeys.providerIcon(aaguid: aaguid)?.icon(theme: ctx.request.queryValue("theme") ?? "")
            else { throw ServiceError.notFound("provider icon") }
            return Response(status: 200, headers: [("Content-Type", icon.contentType), ("Content-Security-Policy", "sandbox"),
                                                   ("X-Content-Type-Options", "nosniff"), ("Cache-Control", "public, max-age=86400"),
                                                   ("Cross-Origin-Resource-Policy", "cross-origin")], body: icon.bytes)
        }
        add("GET", "/v1/passkeys", .session, accepting: .any) { ctx in
            .json(bytes: PasskeyRenderer.list(try s.passkeys.listPasskeys(userId: try ctx.userId)).serialized())
        }
        add("PATCH", "/v1/passkeys/{id:credential}", .session) { ctx in
            guard let name = try ctx.json()["name"]?.stringValue else { throw ServiceError.invalid("name is required") }
            try validateName(name, "name")
            let renamed = try s.passkeys.renamePasskey(userId: try ctx.userId, credentialId: try ctx.path.bytes("id"), name: name)
            return .json(bytes: PasskeyRenderer.renamed(renamed).serialized())
        }
        add("DELETE", "/v1/passkeys/{id:credential}", .session, stepUp: .passkeyRevocation, accepting: .any) { ctx in
            // SPEC "Signal API": DELETE answers 200 with the credentials that remain.
            let remaining = try s.passkeys.revokePasskey(userId: try ctx.userId, credentialId: try ctx.path.bytes("id"), redeeming: ctx.redemption,
                                                         loaded: ctx.loads.passkeyRevocation)
            return .json(bytes: PasskeyRenderer.remaining(remaining).serialized())
        }
    }
}

extension StepUpRule {
    /// SPEC "Assurance", add a passkey: a passkey session sends `{"type":"latchkey.passkey.add"}`
    /// with the options request; an email session, or one a held passkey began, may send one (then
    /// the new passkey is not held) or go without (then it is).
    static let passkeyAddition = StepUpRule(changes: "new passkeys") { input throws(ServiceError) in
        guard case .session(let caller) = input.caller else { return .none }
        _ = try RouteTable.conditional(input.body)  // a malformed body is invalid_request before the step-up
        let action = try gated { () throws(DeviceKeyError) in try StepUpAction.passkeyAddition() }
        return try input.lookups.standing(caller).approves ? .required(action) : .optional(action)
    }

    /// `{"type":"latchkey.passkey.revoke","credentialId":<the id in the path>}`, from every kind of
    /// session; the account's last way in is 409 `last_passkey` before it (SPEC "Assurance").
    static let passkeyRevocation = StepUpRule(changes: "passkey revocations") { input throws(ServiceError) in
        let userId = input.caller.userId
        try refusingLastWayIn(&input, userId: userId, credential: "id")
        let id = input.rawPath["id"] ?? ""
        return .required(try gated { () throws(DeviceKeyError) in try StepUpAction.passkeyRevocation(credentialId: id) })
    }
}

extension RouteTable {
    /// `{"mediation":"conditional"}` in a registration options body (any other value is invalid).
    static func conditional(_ ctx: RouteContext) throws(ServiceError) -> Bool {
        guard !ctx.request.body.isEmpty else { return false }
        return try conditional(try ctx.json())
    }

    static func conditional(_ body: JSONValue?) throws(ServiceError) -> Bool {
        guard let body, let m = body["mediation"], !m.isNull else { return false }
        guard let text = m.stringValue, ["conditional", "optional", "required"].contains(text) else {
            throw ServiceError.invalid("mediation must be conditional (or absent)")
        }
        return text == "conditional"
    }
}

extension StepUpRule {
    /// SPEC "Assurance": the last way in is refused (409) before the step-up is asked, whatever the
    /// caller; `credential` is the path parameter naming the passkey (one that cannot be one is
    /// left to the path check, 404).
    static func refusingLastWayIn(_ input: inout GuardInput, userId: String?, credential: String) throws(ServiceError) {
        guard let userId, let id = Identifiers.credential(input.rawPath[credential]) else { return }
        // An admin user's resolution read it with the admin's role, in the same round trip.
        if case .passkeyRevocation(let read)? = input.loads.adminPage {
            input.loads.passkeyRevocation = try input.lookups.refuseLastWayIn(LoadedRevocation(userId: userId, credentialId: id, read: read))
        } else {
            input.loads.passkeyRevocation = try input.lookups.refuseLastWayIn(userId: userId, credentialId: id)
        }
    }

    /// The admin API's revocation of a user's passkey: the last-way-in rule first, then `adminChange`.
    static let adminPasskeyRevocation = adminChange { input throws(ServiceError) in
        try refusingLastWayIn(&input, userId: Identifiers.opaque(input.rawPath["id"]), credential: "credentialId")
        return true
    }
}

/// The username of a username-first sign-in's options request, nil for a discoverable one.
private func loginUsername(_ ctx: RouteContext) throws(ServiceError) -> String? {
    let body = ctx.request.body.isEmpty ? JSONValue.object([]) : try ctx.json()
    guard let u = body["username"], !u.isNull else { return nil }
    guard let name = u.stringValue else { throw ServiceError.invalid("username must be a string") }
    try validateName(name, "username")
    return name
}
