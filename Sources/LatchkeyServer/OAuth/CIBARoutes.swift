import HTTP
import JSON
import Storage

extension StepUpRule {
    /// SPEC "CIBA approval": the step-up of the key the client's `cibaApprover` names, for
    /// `{"type":"latchkey.ciba.approve","authReqId","clientId","bindingMessage","authorizationDetails"}`,
    /// made in the approving session itself. A device key's step-up is checked here like a passkey's;
    /// which kind of key the client admits is the handler's (`CIBAService.admits`, 403
    /// `step_up_required`). The request is read here and handed to the handler; an id that is not
    /// one, or a request that is not the caller's pending one, needs no step-up (the handler says 404).
    static func cibaApproval(_ ciba: CIBAService) -> StepUpRule {
        StepUpRule(changes: "CIBA approvals", deviceKeyAllowed: true) { input throws(ServiceError) in
            guard let id = input.rawPath["authReqId"], CIBAService.isRequestId(id), let userId = input.caller.userId else { return .none }
            let record: CIBARequestRecord?
            if let loaded = input.loads.cibaRequest, loaded.id == id {
                record = loaded.record
            } else {
                record = try ciba.request(id)
                input.loads.cibaRequest = CIBARequestRead(id: id, record: record)
            }
            guard let r = record, r.userId == userId, r.status == .pending, r.live else { return .none }
            return .required(try CIBAService.stepUpAction(r))
        }
    }
}

extension RouteTable {
    /// SPEC "CIBA" … "CIBA tokens": the backchannel authentication endpoint (OAuth's error format)
    /// and the account's side of its requests. The CIBA grant at `/oauth2/token` is dispatched by
    /// that route (`addOAuthRoutes`).
    mutating func addCIBARoutes(_ s: Services) {
        let ciba = s.ciba
        add("POST", "/oauth2/bc-authorize", .oauthClient(.backchannel), accepting: .any) { ctx in
            let request = try ctx.oauthClient()
            return try OAuthEdge.json { () throws(OAuthError) in
                CIBARenderer.started(try ciba.authorize(try BackchannelRequest(request)))
            }
        }
        add("GET", "/v1/ciba/requests", .session, accepting: .any) { ctx in
            let lang = ConsentDisplay.language(uiLocales: nil, acceptLanguage: ctx.request.header("Accept-Language"), chosen: nil)
            return .json(bytes: CIBARenderer.requests(try ciba.pending(userId: try ctx.session().userId), lang: lang).serialized(),
                         headers: [("Cache-Control", "no-store"), ("Vary", "Accept-Language")])
        }
        // The caller's standing, the device keys it enrolled and the request it approves are read in
        // one round trip.
        add("POST", "/v1/ciba/requests/{authReqId:text}/approve", .cibaApprover, stepUp: .cibaApproval(ciba), accepting: .any,
            preload: { _, path in path["authReqId"].flatMap { CIBAService.isRequestId($0) ? GuardPreload.cibaRequest(id: $0) : nil } }) { ctx in
            try ciba.approve(try ctx.path.text("authReqId"), caller: try ctx.session(), approval: ctx.approval, read: ctx.loads.cibaRequest)
            return .empty(status: 204)
        }
        add("POST", "/v1/ciba/requests/{authReqId:text}/deny", .session, accepting: .any) { ctx in
            try ciba.deny(try ctx.path.text("authReqId"), caller: try ctx.session(), read: ctx.loads.cibaRequest)
            return .empty(status: 204)
        }
    }

    /// `POST /oauth2/token` with the CIBA grant: its answer, as the token route renders every grant's.
    static func cibaToken(_ s: Services, _ request: AuthenticatedClientRequest) throws(ServiceError) -> Response {
        try OAuthEdge.json { () throws(OAuthError) in try s.ciba.poll(try CIBAPoll(request)).json }
    }
}

/// CIBA's answers as JSON.
enum CIBARenderer {
    /// CIBA Core §7.3.
    static func started(_ s: BackchannelStarted) -> JSONValue {
        .object([("auth_req_id", .string(s.authReqId)), ("expires_in", .number(Double(s.expiresIn))), ("interval", .number(Double(s.interval)))])
    }

    /// `GET /v1/ciba/requests` → `{"requests":[…]}`: what the app shows before its person approves,
    /// with the lines the /authorize page would show for the same scopes and details, in `lang`.
    static func requests(_ list: [CIBARequestRecord], lang: String) -> JSONValue {
        .object([("requests", .array(list.map { request($0, lang: lang) }))])
    }

    static func request(_ r: CIBARequestRecord, lang: String) -> JSONValue {
        // The first of ConsentDisplay's lines names the app and its redirect URI's host; a CIBA
        // request has no redirect URI, and the client's name is its own member.
        let lines = ConsentDisplay.lines(clientName: r.clientName, redirectURI: "", scopes: r.scope, details: r.authorizationDetails,
                                         lang: lang).dropFirst()
        return .object([
            ("authReqId", .string(r.id)),
            ("client", .object([("id", .string(r.clientId)), ("name", .string(r.clientName)),
                                ("cibaApprover", r.approver.map { .string($0.rawValue) } ?? .null)])),
            ("bindingMessage", r.bindingMessage.map { .string($0) } ?? .null),
            ("scopes", .array(r.scope.map { .string($0) })),
            ("authorizationDetails", r.authorizationDetails),
            ("display", .object([("lang", .string(lang)), ("lines", .array(lines.map { .string($0) })),
                                 ("approve", .string(ConsentDisplay.approveLabel(details: r.authorizationDetails, lang: lang)))])),
            ("createdAt", .string(iso8601(r.createdAt))),
            ("expiresAt", .string(iso8601(r.expiresAt))),
        ])
    }
}
