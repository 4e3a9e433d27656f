import HTTP
import JSON
import Storage

extension RouteTable {
    /// `/admin/v1`: the admin key, or an admin's session from a user-verified, not-held passkey
    /// (SPEC "Admin console", "Assurance"). Reads are `.admin`; every change is `.admin` with
    /// `StepUpRule.adminChange` (with a user token, a step-up for exactly that request). Every change is audited.
    mutating func addAdminRoutes(_ s: Services) {
        // The reads below ride with an admin user's role and standing (`GuardLoads.adminPage`): one
        // read; with the admin key the handler reads them. A query the handler refuses preloads nothing.
        add("GET", "/admin/v1/me", .admin, accepting: .any, preload: { _, _ in .adminPage(.caller) }) { ctx in
            .json(bytes: AdminRenderer.identity(try s.admin.me(try ctx.admin(), loaded: ctx.loads.adminPage)).serialized())
        }
        add("GET", "/admin/v1/origins", .admin, accepting: .any, preload: { _, _ in .adminPage(.origins) }) { ctx in
            .json(bytes: AdminRenderer.origins(try s.admin.listOrigins(loaded: ctx.loads.adminPage)).serialized())
        }
        add("POST", "/admin/v1/origins", .admin, stepUp: .adminChange(checking: { [policy = s.admin.policy] body throws(ServiceError) in
            _ = try AdminService.checkedOrigin(body, policy)
        })) { ctx in
            let (origin, created) = try s.admin.addOrigin(try ctx.json(), by: try ctx.admin())
            return .json(status: created ? 201 : 200, bytes: AdminRenderer.origin(origin).serialized())
        }
        add("DELETE", "/admin/v1/origins/{origin:text}", .admin, stepUp: .adminChange, accepting: .any) { ctx in
            // Only a valid origin was ever added; a segment that cannot be one names nothing.
            try s.admin.removeOrigin(try ctx.path.text("origin"), by: try ctx.admin())
            return .empty(status: 204)
        }
        add("POST", "/admin/v1/users/{externalId:externalId}/enrolment-tickets", .admin, stepUp: .adminChange) { ctx in
            .json(status: 201, bytes: AdminRenderer.ticket(try s.admin.enrolmentTicket(externalId: try ctx.path.text("externalId"),
                                                                                       body: try ctx.json(), by: try ctx.admin())).serialized())
        }
        add("POST", "/admin/v1/accounts/{userId:opaque}/enrolment-tickets", .admin, stepUp: .adminUserChange, accepting: .any) { ctx in
            // SPEC "Admin console" → "Tickets.": the way back in for an account that lost every way in.
            .json(status: 201, bytes: AdminRenderer.ticket(try s.admin.accountTicket(userId: try ctx.path.text("userId"),
                                                                                  by: try ctx.admin())).serialized())
        }
        add("POST", "/admin/v1/users/{externalId:externalId}/device-key-tickets", .admin, stepUp: .adminChange, accepting: .any) { ctx in
            .json(status: 201, bytes: AdminRenderer.ticket(try s.admin.deviceKeyTicket(externalId: try ctx.path.text("externalId"),
                                                                                    by: try ctx.admin())).serialized())
        }
        add("GET", "/admin/v1/step-up/receipts/{id:opaque}", .admin, accepting: .any) { ctx in
            // An auditor's copy of any user's step-up receipt (the owner's is /v1/step-up/receipts/{id}).
            .json(bytes: StepUpRenderer.receipt(try s.stepUp.receipt(id: try ctx.path.text("id"), userId: nil)).serialized())
        }
        add("GET", "/admin/v1/audit", .admin, accepting: .any, preload: { request, _ in
            do {
                return .adminPage(.audit(try Self.auditQuery(request)))
            } catch {
                return nil
            }
        }) { ctx in
            .json(bytes: AdminRenderer.auditEntries(try s.admin.auditLog(try Self.auditQuery(ctx.request), loaded: ctx.loads.adminPage)).serialized())
        }
        addAdminUserRoutes(s)
    }

    /// The console's users page: find by username, one user's passkeys, device keys and sessions,
    /// and revocations. `{id}` here is Latchkey's user id (the ticket routes above take the app
    /// backend's external id).
    mutating func addAdminUserRoutes(_ s: Services) {
        // An admin user's role and standing and the page are one read (`GuardLoads.adminPage`); a
        // query or an id the handler refuses reads nothing there, and the handler answers it.
        add("GET", "/admin/v1/users", .admin, accepting: .any, preload: { request, _ in
            do {
                return UserAdministration.search(try QueryFields.text(request, "username", max: 256)).map(GuardPreload.adminPage)
            } catch {
                return nil
            }
        }) { ctx in
            .json(bytes: AdminRenderer.users(try s.users.findUsers(username: try QueryFields.text(ctx.request, "username", max: 256),
                                                                   loaded: ctx.loads.adminPage)).serialized())
        }
        add("GET", "/admin/v1/users/{id:opaque}", .admin, accepting: .any, preload: { _, raw in
            guard case .text(let id)? = raw["id"].flatMap(PathKind.opaque.parse) else { return nil }
            return UserAdministration.page(id).map(GuardPreload.adminPage)
        }) { ctx in
            // Passkeys, device keys and sessions as their features render them (the page's seam to those renderers).
            .json(bytes: AdminRenderer.userPage(try s.users.user(id: try ctx.path.text("id"), loaded: ctx.loads.adminPage),
                                                passkey: { PasskeyRenderer.passkey(s.passkeys.shown($0)) },
                                                deviceKey: DeviceKeyRenderer.deviceKey,
                                                sessions: { s.sessions.live($0).map { SessionRenderer.session($0) } }).serialized())
        }
        add("DELETE", "/admin/v1/users/{id:opaque}/passkeys/{credentialId:credential}", .admin, stepUp: .adminPasskeyRevocation,
            accepting: .any, preload: { _, path in
                guard let userId = Identifiers.opaque(path["id"]), let id = Identifiers.credential(path["credentialId"]) else { return nil }
                return .adminPage(.passkeyRevocation(userId: userId, credentialId: id))
            }) { ctx in
            try s.users.revokePasskey(userId: try ctx.path.text("id"), credentialId: try ctx.path.bytes("credentialId"), by: try ctx.admin(),
                                      loaded: ctx.loads.passkeyRevocation)
            return .empty(status: 204)
        }
        add("DELETE", "/admin/v1/users/{id:opaque}/device-keys/{keyId:opaque}", .admin, stepUp: .adminChange, accepting: .any) { ctx in
            try s.users.revokeDeviceKey(userId: try ctx.path.text("id"), keyId: try ctx.path.text("keyId"), by: try ctx.admin())
            return .empty(status: 204)
        }
        add("DELETE", "/admin/v1/users/{id:opaque}/sessions/{sessionId:opaque}", .admin, stepUp: .adminChange, accepting: .any) { ctx in
            try s.users.endSession(userId: try ctx.path.text("id"), sessionId: try ctx.path.text("sessionId"), by: try ctx.admin())
            return .empty(status: 204)
        }
        // Webhooks (SPEC "Events"): endpoints and their deliveries.
        add("POST", "/admin/v1/webhooks", .admin, stepUp: .adminChange) { ctx in
            .json(status: 201, bytes: WebhookRenderer.created(try s.webhooks.create(try ctx.json(), by: try ctx.admin())).serialized())
        }
        add("GET", "/admin/v1/webhooks", .admin, accepting: .any, preload: { _, _ in .adminPage(.webhooks) }) { ctx in
            .json(bytes: WebhookRenderer.endpoints(try s.webhooks.list(loaded: ctx.loads.adminPage)).serialized())
        }
        add("DELETE", "/admin/v1/webhooks/{id:webhook}", .admin, stepUp: .adminChange, accepting: .any) { ctx in
            // SPEC "Admin console": deleting a webhook weakens security, so a user token needs its step-up.
            try s.webhooks.delete(id: try ctx.path.text("id"), by: try ctx.admin())
            return .empty(status: 204)
        }
        add("GET", "/admin/v1/webhooks/{id:webhook}/deliveries", .admin, accepting: .any) { ctx in
            .json(bytes: WebhookRenderer.deliveries(try s.webhooks.deliveries(
                id: try ctx.path.text("id"), limit: try QueryFields.integer(ctx.request, "limit", in: 1...1000))).serialized())
        }
    }
}

extension RouteTable {
    /// `GET /admin/v1/audit?limit=&before=&user=&action=` as the audit log's page; 400 for a query it refuses.
    static func auditQuery(_ request: Request) throws(ServiceError) -> AuditQuery {
        try AdminService.auditQuery(limit: try QueryFields.integer(request, "limit", in: 1...1000),
                                    before: try QueryFields.integer(request, "before", in: 1...Int64.max),
                                    user: try QueryFields.text(request, "user", max: 128),
                                    action: try QueryFields.text(request, "action", max: 128))
    }
}

extension StepUpRule {
    /// `adminChange`, after the checks that need only the request and the admin's settings: a body
    /// they refuse is 400 `invalid_request` before the step-up is asked for (SPEC "Assurance": an
    /// `http://` origin outside dev mode, an origin not under the rpId, a malformed Team ID or
    /// fingerprint), so the console never asks for a passkey to approve a change that will be refused.
    static func adminChange(checking check: @escaping @Sendable (JSONValue) throws(ServiceError) -> Void) -> StepUpRule {
        adminChange { input throws(ServiceError) in
            try check(input.body ?? .object([]))
            return true
        }
    }
}
