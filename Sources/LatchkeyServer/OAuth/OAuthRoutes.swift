import DeviceKeys
import HTTP
import JSON

extension StepUpRule {
    /// SPEC "OpenID Provider": approving a request with `authorization_details` needs a step-up for
    /// `{"type":"latchkey.oauth.authorize","clientId","authorizationDetails"}` — by a user-verified
    /// passkey or a device key. The stored request is looked up after the caller is authorized.
    static let oauthAuthorization = StepUpRule(changes: "authorization_details approvals", deviceKeyAllowed: true) { input throws(ServiceError) in
        try input.services.openID.approvalNeed(rawId: input.rawPath["id"])
    }
}

extension RouteTable {
    /// SPEC "OpenID Provider": the OAuth endpoints (OAuth's own error formats), the page's API, and
    /// the admin API for clients.
    mutating func addOAuthRoutes(_ s: Services) {
        let op = s.openID
        add("GET", "/.well-known/openid-configuration", .anyone, accepting: .any) { _ in
            .json(bytes: op.discovery.serialized(), headers: [("Cache-Control", "public, max-age=300")])
        }
        add("GET", "/oauth2/authorize", .anyone, accepting: .any) { ctx in op.authorize(ctx.request.query) }
        add("POST", "/oauth2/par", .anyone, accepting: .any) { ctx in op.pushed(ctx.request) }
        add("POST", "/oauth2/token", .anyone, accepting: .any) { ctx in op.token(ctx.request) }
        add("GET", "/oauth2/userinfo", .anyone, accepting: .any) { ctx in op.userinfo(ctx.request) }
        add("POST", "/oauth2/userinfo", .anyone, accepting: .any) { ctx in op.userinfo(ctx.request) }
        add("GET", "/oauth2/logout", .anyone, accepting: .any) { ctx in op.logout(ctx.request.query) }
        add("POST", "/oauth2/revoke", .anyone, accepting: .any) { ctx in op.revoke(ctx.request) }

        add("GET", "/v1/oauth/requests/{id:oauthRequest}", .anyone, accepting: .any) { ctx in
            .json(bytes: try op.requestJSON(try ctx.path.text("id")).serialized())
        }
        add("POST", "/v1/oauth/requests/{id:oauthRequest}/approve", .approver, stepUp: .oauthAuthorization, accepting: .any) { ctx in
            .json(bytes: try op.approve(try ctx.path.text("id"), caller: try ctx.session(), approval: ctx.approval).serialized())
        }
        add("POST", "/v1/oauth/requests/{id:oauthRequest}/deny", .session, accepting: .any) { ctx in
            .json(bytes: try op.deny(try ctx.path.text("id"), caller: try ctx.session()).serialized())
        }

        // Clients (SPEC "Clients"): adding one or a redirect URI weakens security → the admin's step-up.
        add("GET", "/admin/v1/clients", .admin, accepting: .any) { _ in
            .json(bytes: JSONValue.object([("clients", .array(try s.oauthClients.list().map { OAuthClientService.json($0) }))]).serialized())
        }
        add("GET", "/admin/v1/clients/{id:client}", .admin, accepting: .any) { ctx in
            guard let c = try s.oauthClients.client(id: try ctx.path.text("id")) else { throw ServiceError.notFound("client") }
            return .json(bytes: OAuthClientService.json(c).serialized())
        }
        add("POST", "/admin/v1/clients", .admin, stepUp: .adminChange) { ctx in
            let created = try s.oauthClients.add(try OAuthClientService.registration(try ctx.json()), by: try ctx.admin())
            return .json(status: 201, bytes: OAuthClientService.json(created.client, secret: created.secret).serialized())
        }
        add("PATCH", "/admin/v1/clients/{id:client}", .admin, stepUp: .adminChange) { ctx in
            .json(bytes: OAuthClientService.json(try s.oauthClients.update(id: try ctx.path.text("id"), body: try ctx.json(),
                                                                            by: try ctx.admin())).serialized())
        }
        add("DELETE", "/admin/v1/clients/{id:client}", .admin, stepUp: .adminChange, accepting: .any) { ctx in
            s.sessions.ended(try s.oauthClients.remove(id: try ctx.path.text("id"), by: try ctx.admin()))
            return .empty(status: 204)
        }
    }
}
