import DeviceKeys
import HTTP
import JSON

extension StepUpRule {
    /// SPEC "Approve and deny": the OP session cookie alone approves a plain sign-in; a request with
    /// `authorization_details`, or any approval by Bearer token, needs a step-up for
    /// `{"type":"latchkey.oauth.authorize","clientId","requestId","authorizationDetails"}` — by a
    /// user-verified passkey or a device key, made in the approving session itself (`sid`).
    static let oauthAuthorization = StepUpRule(changes: "OpenID approvals", deviceKeyAllowed: true, sameSession: true) { input throws(ServiceError) in
        let viaCookie = if case .browser = input.caller { true } else { false }
        return try input.services.openID.approvalNeed(rawId: input.rawPath["id"], viaCookie: viaCookie)
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
        add("GET", "/oauth2/authorize", .anyone, accepting: .any) { ctx in
            op.authorize(ctx.request.query, acceptLanguage: ctx.request.header("Accept-Language"), cookie: op.cookie.value(ctx.request),
                         clientAddress: Application.clientAddress(ctx.request, trustProxy: s.configuration.trustProxy))
        }
        // OpenID Connect Core §3.1.2.1: the authorization endpoint takes GET and form POST alike.
        add("POST", "/oauth2/authorize", .anyone, accepting: .any) { ctx in
            // A body that is not a form carries no parameters: the request reads as one without client_id.
            let pairs = ctx.request.mediaType == "application/x-www-form-urlencoded" ? formPairs(ctx.request.body) : []
            return op.authorize(pairs, acceptLanguage: ctx.request.header("Accept-Language"), cookie: op.cookie.value(ctx.request),
                                clientAddress: Application.clientAddress(ctx.request, trustProxy: s.configuration.trustProxy))
        }
        add("POST", "/oauth2/par", .anyone, accepting: .any) { ctx in op.pushed(ctx.request) }
        add("POST", "/oauth2/token", .anyone, accepting: .any) { ctx in op.token(ctx.request) }
        add("GET", "/oauth2/userinfo", .anyone, accepting: .any) { ctx in op.userinfo(ctx.request) }
        add("POST", "/oauth2/userinfo", .anyone, accepting: .any) { ctx in op.userinfo(ctx.request) }
        add("GET", "/oauth2/logout", .anyone, accepting: .any) { ctx in
            op.logout(ctx.request.query, cookie: op.cookie.value(ctx.request), acceptLanguage: ctx.request.header("Accept-Language"))
        }
        // RP-Initiated Logout §2 allows a form POST too; a JSON POST is the confirmation page's answer
        // (SPEC "Userinfo and logout"), which the OP session cookie authenticates, from the issuer's page only.
        add("POST", "/oauth2/logout", .anyone, accepting: .any) { ctx in
            guard ctx.request.mediaType != "application/x-www-form-urlencoded" else {
                return op.logout(formPairs(ctx.request.body), cookie: op.cookie.value(ctx.request),
                                 acceptLanguage: ctx.request.header("Accept-Language"))
            }
            try op.cookie.checkSentByIssuerPage(ctx.request)
            let (answer, ended) = try op.confirmLogout(try ctx.json(), cookie: op.cookie.value(ctx.request))
            return .json(bytes: answer.serialized(), headers: ended ? [op.cookie.clearing()] : [])
        }
        add("POST", "/oauth2/revoke", .anyone, accepting: .any) { ctx in op.revoke(ctx.request) }

        // The /authorize page's API (SPEC "Who may approve" … "Consents"); the OP session cookie is
        // read here and on the step-up of latchkey.oauth.authorize, nowhere else.
        add("GET", "/v1/oauth/requests/{id:oauthRequest}", .anyoneOrBrowser, accepting: .any) { ctx in
            let browser: SessionService.Caller? = if case .browser(let c) = ctx.caller { c } else { nil }
            return .json(bytes: try op.requestView(try ctx.path.text("id"), chosenLanguage: ctx.request.queryValue("lang"),
                                                   acceptLanguage: ctx.request.header("Accept-Language"), browser: browser).serialized(),
                         headers: [("Cache-Control", "no-store")])
        }
        add("POST", "/v1/oauth/requests/{id:oauthRequest}/sign-in", .anyone) { ctx in
            // Every sign-in, cookie or not, comes from the issuer's own page: a sign-in a cross-site
            // page could post would swap the person's OP session for the attacker's.
            try op.cookie.checkSentByIssuerPage(ctx.request)
            let (body, cookie) = try op.signIn(try ctx.path.text("id"), credential: ctx.request.body, replacing: op.cookie.value(ctx.request))
            return .json(bytes: body.serialized(), headers: [op.cookie.setting(cookie), ("Cache-Control", "no-store")])
        }
        add("POST", "/v1/oauth/requests/{id:oauthRequest}/approve", .approver, stepUp: .oauthAuthorization, accepting: .any) { ctx in
            let (caller, viaCookie) = try ctx.sessionOrBrowser()
            return .json(bytes: try op.approve(try ctx.path.text("id"), caller: caller, viaCookie: viaCookie, approval: ctx.approval).serialized())
        }
        add("POST", "/v1/oauth/requests/{id:oauthRequest}/deny", .sessionOrBrowser, accepting: .any) { ctx in
            .json(bytes: try op.deny(try ctx.path.text("id"), caller: try ctx.sessionOrBrowser().caller).serialized())
        }
        add("GET", "/v1/oauth/consents", .sessionOrBrowser, accepting: .any) { ctx in
            .json(bytes: try op.consents(userId: try ctx.sessionOrBrowser().caller.userId).serialized())
        }
        add("DELETE", "/v1/oauth/consents/{id:client}", .sessionOrBrowser, accepting: .any) { ctx in
            try op.forgetConsent(userId: try ctx.sessionOrBrowser().caller.userId, clientId: try ctx.path.text("id"))
            return .empty(status: 204)
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
