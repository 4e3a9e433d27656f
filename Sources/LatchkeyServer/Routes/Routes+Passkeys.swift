import HTTP
import JSON

extension RouteTable {
    /// Passkey ceremonies and passkey management (SPEC "HTTP contract").
    mutating func addPasskeyRoutes(_ s: Services) {
        add("POST", "/v1/passkeys/registration/options") { req, _ in
            let requester: PasskeyService.Requester
            var conditional = false
            if let token = BearerCredentials.value(req, scheme: "Bearer"), RecoveryService.isRecoveryToken(token) {
                // SPEC "Recovery": the one place a recovery token is accepted.
                return .json(bytes: try s.passkeys.registrationOptions(for: .recovery(try s.recovery.authorizeRegistration(token: token)),
                                                                       conditional: try Self.conditional(req)).serialized())
            }
            if BearerCredentials.value(req, scheme: "Bearer") != nil {
                // Signed in: the new passkey may come with an approval hold (email sign-in sessions).
                let caller = try s.sessions.requireSession(req)
                requester = .user(caller.userId, approvesFrom: try s.sessions.approvalHold(for: caller))
                // Conditional create (automatic passkey upgrade) is for a signed-in user.
                conditional = try Self.conditional(req)
            } else if let userId = try s.sessions.ticketHolder(req) {
                // Vouched for by an enrolment ticket (an admin): no hold.
                requester = .user(userId)
                conditional = try Self.conditional(req)
            } else {
                let body = try jsonBody(req)
                guard let username = try RequestFields.optionalString(body, "username") else { throw ServiceError.invalid("username is required") }
                let displayName = try RequestFields.optionalString(body, "displayName") ?? username
                try validateName(username, "username")
                try validateName(displayName, "displayName")
                requester = .newAccount(username: username, displayName: displayName)
            }
            return .json(bytes: try s.passkeys.registrationOptions(for: requester, conditional: conditional).serialized())
        }
        add("POST", "/v1/passkeys/registration/verify") { req, _ in
            .json(status: 201, bytes: try s.passkeys.verifyRegistration(req.body).serialized())
        }
        add("POST", "/v1/passkeys/authentication/options") { req, _ in
            let body = req.body.isEmpty ? JSONValue.object([]) : try jsonBody(req)
            var username: String? = nil
            if let u = body["username"], !u.isNull {
                guard let name = u.stringValue else { throw ServiceError.invalid("username must be a string") }
                try validateName(name, "username")
                username = name
            }
            return .json(bytes: try s.passkeys.authenticationOptions(username: username).serialized())
        }
        add("POST", "/v1/passkeys/authentication/verify") { req, _ in
            .json(bytes: try s.passkeys.verifyAuthentication(req.body).serialized())
        }
        add("GET", "/v1/passkeys", accepting: .any) { req, _ in
            .json(bytes: try s.passkeys.listPasskeys(userId: try s.sessions.requireUser(req)).serialized())
        }
        add("PATCH", "/v1/passkeys/{id}") { req, params in
            let userId = try s.sessions.requireUser(req)
            guard let name = try jsonBody(req)["name"]?.stringValue else { throw ServiceError.invalid("name is required") }
            try validateName(name, "name")
            guard let id = Identifiers.credential(params["id"]) else { throw ServiceError.notFound("passkey") }
            return .json(bytes: try s.passkeys.renamePasskey(userId: userId, credentialId: id, name: name).serialized())
        }
        add("DELETE", "/v1/passkeys/{id}", accepting: .any) { req, params in
            let userId = try s.sessions.requireUser(req)
            guard let id = Identifiers.credential(params["id"]) else { throw ServiceError.notFound("passkey") }
            // SPEC "Signal API": DELETE answers 200 with the credentials that remain.
            return .json(bytes: try s.passkeys.revokePasskey(userId: userId, credentialId: id).serialized())
        }
    }
}

extension RouteTable {
    /// `{"mediation":"conditional"}` in a registration options body (any other value is invalid).
    static func conditional(_ req: Request) throws(ServiceError) -> Bool {
        guard !req.body.isEmpty else { return false }
        let body = try jsonBody(req)
        guard let m = body["mediation"], !m.isNull else { return false }
        guard let text = m.stringValue, ["conditional", "optional", "required"].contains(text) else {
            throw ServiceError.invalid("mediation must be conditional (or absent)")
        }
        return text == "conditional"
    }
}
