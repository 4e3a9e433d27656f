import HTTP
import JSON

/// An app backend's own user id (`{externalId}`): 1…128 printable characters.
func externalUserId(_ params: PathParameters) throws(ServiceError) -> String {
    guard let id = Identifiers.text(params["externalId"], max: 512), id.count <= 128 else {
        throw ServiceError.invalid("externalId must be 1 to 128 printable characters")
    }
    return id
}

extension RouteTable {
    /// `/admin/v1`: the admin key, or an admin's user-verified access token (SPEC "Admin console").
    /// Reads use `requireAdmin`; every change uses `requireAdminChange`, which with a user token
    /// demands `Latchkey-Step-Up` for exactly that request. Every change is audited.
    mutating func addAdminRoutes(_ s: Services) {
        add("GET", "/admin/v1/me", accepting: .any) { req, _ in
            .json(bytes: try s.admin.me(try s.admin.requireAdmin(req)).serialized())
        }
        add("GET", "/admin/v1/origins", accepting: .any) { req, _ in
            _ = try s.admin.requireAdmin(req)
            return .json(bytes: try s.admin.listOrigins().serialized())
        }
        add("POST", "/admin/v1/origins") { req, _ in
            let caller = try s.admin.requireAdminChange(req)
            let (origin, created) = try s.admin.addOrigin(try jsonBody(req), by: caller)
            return .json(status: created ? 201 : 200, bytes: JSONValue.object([("origin", .string(origin))]).serialized())
        }
        add("DELETE", "/admin/v1/origins/{origin}", accepting: .any) { req, params in
            let caller = try s.admin.requireAdminChange(req)
            // Only a valid origin was ever added; a segment that cannot be one names nothing.
            guard let origin = Identifiers.text(params["origin"], max: 2048) else { throw ServiceError.notFound("origin") }
            try s.admin.removeOrigin(origin, by: caller)
            return .empty(status: 204)
        }
        add("POST", "/admin/v1/users/{externalId}/enrolment-tickets") { req, params in
            let externalId = try externalUserId(params)
            let caller = try s.admin.requireAdminChange(req)
            return .json(status: 201, bytes: try s.admin.enrolmentTicket(externalId: externalId, body: try jsonBody(req),
                                                                        by: caller).serialized())
        }
        add("POST", "/admin/v1/users/{externalId}/device-key-tickets", accepting: .any) { req, params in
            let externalId = try externalUserId(params)
            let caller = try s.admin.requireAdminChange(req)
            return .json(status: 201, bytes: try s.admin.deviceKeyTicket(externalId: externalId, by: caller).serialized())
        }
        add("GET", "/admin/v1/step-up/receipts/{id}", accepting: .any) { req, params in
            // An auditor's copy of any user's step-up receipt (the owner's is /v1/step-up/receipts/{id}).
            try s.admin.requireAdmin(req)
            guard let id = Identifiers.opaque(params["id"]) else { throw ServiceError.notFound("receipt") }
            return .json(bytes: try s.stepUp.receipt(id: id, userId: nil).serialized())
        }
        add("GET", "/admin/v1/audit", accepting: .any) { req, _ in
            _ = try s.admin.requireAdmin(req)
            return .json(bytes: try s.admin.auditLog(limit: req.queryValue("limit"), before: req.queryValue("before"),
                                                     user: try QueryFields.text(req, "user", max: 128),
                                                     action: try QueryFields.text(req, "action", max: 128)).serialized())
        }
        addAdminUserRoutes(s)
    }

    /// The console's users page: find by username, one user's passkeys, device keys and sessions,
    /// and revocations (changes: step-up with a user token). `{id}` here is Latchkey's user id
    /// (the ticket routes above take the app backend's external id).
    mutating func addAdminUserRoutes(_ s: Services) {
        add("GET", "/admin/v1/users", accepting: .any) { req, _ in
            _ = try s.admin.requireAdmin(req)
            return .json(bytes: try s.admin.findUsers(username: try QueryFields.text(req, "username", max: 256)).serialized())
        }
        add("GET", "/admin/v1/users/{id}", accepting: .any) { req, params in
            _ = try s.admin.requireAdmin(req)
            guard let id = Identifiers.opaque(params["id"]) else { throw ServiceError.notFound("user") }
            return .json(bytes: try s.admin.user(id: id).serialized())
        }
        add("DELETE", "/admin/v1/users/{id}/passkeys/{credentialId}", accepting: .any) { req, params in
            // The approval is checked first: with a user token, no change — not even a 404 — without it.
            let caller = try s.admin.requireAdminChange(req)
            guard let userId = Identifiers.opaque(params["id"]), let credential = Identifiers.credential(params["credentialId"]) else {
                throw ServiceError.notFound("passkey")
            }
            try s.admin.revokePasskey(userId: userId, credentialId: credential, by: caller)
            return .empty(status: 204)
        }
        add("DELETE", "/admin/v1/users/{id}/device-keys/{keyId}", accepting: .any) { req, params in
            let caller = try s.admin.requireAdminChange(req)
            guard let userId = Identifiers.opaque(params["id"]), let keyId = Identifiers.opaque(params["keyId"]) else {
                throw ServiceError.notFound("device key")
            }
            try s.admin.revokeDeviceKey(userId: userId, keyId: keyId, by: caller)
            return .empty(status: 204)
        }
        add("DELETE", "/admin/v1/users/{id}/sessions/{sessionId}", accepting: .any) { req, params in
            let caller = try s.admin.requireAdminChange(req)
            guard let userId = Identifiers.opaque(params["id"]), let sessionId = Identifiers.opaque(params["sessionId"]) else {
                throw ServiceError.notFound("session")
            }
            try s.admin.endSession(userId: userId, sessionId: sessionId, by: caller)
            return .empty(status: 204)
        }
        // Webhooks (SPEC "Events"): endpoints and their deliveries.
        add("POST", "/admin/v1/webhooks") { req, _ in
            let caller = try s.admin.requireAdminChange(req)
            return .json(status: 201, bytes: try s.webhooks.create(try jsonBody(req), by: caller).serialized())
        }
        add("GET", "/admin/v1/webhooks", accepting: .any) { req, _ in
            try s.admin.requireAdmin(req)
            return .json(bytes: try s.webhooks.list().serialized())
        }
        add("DELETE", "/admin/v1/webhooks/{id}", accepting: .any) { req, params in
            guard let id = Identifiers.webhook(params["id"]) else { throw ServiceError.notFound("webhook") }
            // SPEC "Admin console": deleting a webhook weakens security, so a user token needs its step-up.
            let caller = try s.admin.requireAdminChange(req)
            try s.webhooks.delete(id: id, by: caller)
            return .empty(status: 204)
        }
        add("GET", "/admin/v1/webhooks/{id}/deliveries", accepting: .any) { req, params in
            try s.admin.requireAdmin(req)
            guard let id = Identifiers.webhook(params["id"]) else { throw ServiceError.notFound("webhook") }
            return .json(bytes: try s.webhooks.deliveries(id: id, limit: req.queryValue("limit")).serialized())
        }
    }
}
