import Crypto
import DeviceKeys
import Foundation
import JSON
import Storage
import Tokens

/// A backchannel request accepted (CIBA Core §7.3).
struct BackchannelStarted: Sendable, Equatable {
    let authReqId: String
    let expiresIn: Int
    let interval: Int
}

/// CIBA, poll and ping (OpenID CIBA Core 1.0; SPEC "CIBA", "CIBA limits", "CIBA approval", "CIBA
/// tokens"): a client asks for an account's approval on the backchannel, the account's app approves
/// it with the step-up of the key the client's registration names, and the client collects the
/// tokens once at the token endpoint. Each request is one read of `CIBAStore`, a pure decision and
/// one write; the tokens are the OpenID Provider's (`OpenIDProvider.issue`).
final class CIBAService: Sendable {
    let store: any CIBAStore
    let provider: OpenIDProvider

    static let requestPrefix = "lkb_"
    /// CIBA Core §7.3: `expires_in` without `requested_expiry`, and `requested_expiry`'s bounds.
    static let defaultExpiry = 120
    static let minimumExpiry = 30
    static let maximumExpiry = 600
    /// §7.3: the minimum seconds between polls; `slow_down` adds `slowDownStep` (RFC 8628 §3.5).
    static let interval = 5
    static let slowDownStep = 5
    /// SPEC "CIBA limits".
    static let maxPendingPerAccount = 3
    static let maxPerClientAndAccountHourly = 10
    static let maxUnknownUsersHourly = 10

    init(store: any CIBAStore, provider: OpenIDProvider) {
        self.store = store
        self.provider = provider
    }

    var runtime: Runtime { provider.runtime }

    /// `lkb_` + base64url of 32 random bytes.
    static func isRequestId(_ id: String) -> Bool {
        id.hasPrefix(requestPrefix) && id.utf8.count == requestPrefix.utf8.count + 43
            && Base64URL.decode(String(id.dropFirst(requestPrefix.utf8.count)))?.count == 32
    }

    // MARK: The backchannel authentication endpoint

    /// `POST /oauth2/bc-authorize` (CIBA Core §7): the account the hint names, within SPEC "CIBA
    /// limits", gets a pending request and the `ciba.requested` event.
    func authorize(_ r: BackchannelRequest) throws(OAuthError) -> BackchannelStarted {
        var username: String? = nil, hintedUser: String? = nil
        switch r.hint {
        case .username(let name): username = name
        case .idToken(let token):
            // §7.1: an id_token this server issued (an expired one still names its account).
            guard let claims = try provider.verifiedIdToken(token), let sub = claims["sub"]?.stringValue else {
                throw OAuthError.invalidRequest("id_token_hint is not an id_token this server issued")
            }
            hintedUser = sub
        }
        let client = r.client
        let read: CIBAAuthorizeRead
        do { read = try store.authorizeRead(clientId: client.id, username: username, userId: hintedUser) } catch { throw OAuthError.unavailable }
        guard read.unknownUsersLastHour < Self.maxUnknownUsersHourly else {
            var limited = OAuthError(.temporarilyUnavailable, "too many unknown users from this client: try again later")
            limited.retryAfter = 3600
            throw limited
        }
        guard let userId = read.userId else {
            do { try store.unknownUser(clientId: client.id) } catch { throw OAuthError.unavailable }
            provider.metrics.oauth(client: client.id, outcome: "ciba_unknown_user")
            throw OAuthError(.unknownUserId, "no account matches the hint")
        }
        guard !read.blocked else {
            throw OAuthError(.accessDenied, "the user refused this client's requests three times in a day: blocked for 24 hours")
        }
        guard read.clientRequestsLastHour < Self.maxPerClientAndAccountHourly else {
            throw OAuthError(.accessDenied, "limit reached: at most \(Self.maxPerClientAndAccountHourly) requests an hour from one client for one account")
        }
        let id = Self.requestPrefix + Base64URL.encode(runtime.random(32))
        let expiresIn = r.requestedExpiry ?? Self.defaultExpiry
        let data: [(key: String, value: JSONValue)] = [("authReqId", .string(id)), ("clientId", .string(client.id))]
        let event = provider.events.event(.cibaRequested, userId: userId, data: data)
        let audit = AuditRecord(.cibaRequested, actor: client.id, subject: userId, detail: data + [("scopes", .array(r.scope.map { .string($0) }))])
        var stored = CIBANewRequest(id: id, clientId: client.id, userId: userId, scope: r.scope, bindingMessage: r.bindingMessage,
                                    authorizationDetails: r.authorizationDetails, acrValues: r.acrValues, notificationToken: r.notificationToken,
                                    intervalSeconds: Self.interval, expiresInSeconds: expiresIn)
        let ping = scheduledPing(id: id, userId: userId, client: client, token: r.notificationToken, expiresIn: expiresIn)
        stored.pingEvent = ping?.id
        do {
            try store.store(stored, maxPending: Self.maxPendingPerAccount, audit: audit, events: [event] + (ping.map { [$0] } ?? []),
                            now: runtime.now())
        } catch { throw OAuthError.unavailable }
        provider.metrics.oauth(client: client.id, outcome: "ciba_requested")
        return BackchannelStarted(authReqId: id, expiresIn: expiresIn, interval: Self.interval)
    }

    // MARK: The account's side

    /// `GET /v1/ciba/requests`: the account's pending requests.
    func pending(userId: String) throws(ServiceError) -> [CIBARequestRecord] {
        try storage { () throws(StorageError) in try store.pending(userId: userId) }
    }

    /// The request `id` names, as a guard reads it (nil: no request has that id).
    func request(_ id: String) throws(ServiceError) -> CIBARequestRecord? {
        guard Self.isRequestId(id) else { return nil }
        return try storage { () throws(StorageError) in try store.request(id: id) }
    }

    /// The request `id` if it is the caller's and still pending; else 404 (unknown, another
    /// account's, decided or expired alike).
    func pendingRequest(_ id: String, userId: String, read: CIBARequestRead?) throws(ServiceError) -> CIBARequestRecord {
        let record: CIBARequestRecord? = if let read, read.id == id { read.record } else { try request(id) }
        guard let r = record, r.userId == userId, r.status == .pending, r.live else { throw ServiceError.notFound("CIBA request") }
        return r
    }

    /// The step-up approving `r` needs (the route's rule, SPEC "CIBA approval").
    static func stepUpAction(_ r: CIBARequestRecord) throws(ServiceError) -> StepUpAction {
        try gated { () throws(DeviceKeyError) in try StepUpAction.cibaApproval(r) }
    }

    /// Whether a step-up's authentication is by the kind of key `approver` names: an attested
    /// device key; any device key; a user-verified passkey.
    static func admits(_ approver: CIBARegistration.Approver, acr: String) -> Bool {
        switch approver {
        case .attestedDeviceKey: acr == AuthenticationClaims.deviceKeyAttested.acr
        case .deviceKey: acr == AuthenticationClaims.deviceKeyAttested.acr || acr == AuthenticationClaims.deviceKey.acr
        case .passkey: acr == AuthenticationClaims.passkeyVerified.acr
        }
    }

    /// `POST /v1/ciba/requests/{authReqId}/approve`: with the step-up of the key the client names, the
    /// request is approved (its grant remembers the approving session and key); a ping client is
    /// notified from the outbox.
    func approve(_ id: String, caller: SessionService.Caller, approval: Approval?, read: CIBARequestRead?) throws(ServiceError) {
        let r = try pendingRequest(id, userId: caller.userId, read: read)
        guard let client = try provider.clients.client(id: r.clientId), let registration = client.ciba else {
            throw ServiceError.notFound("CIBA request")
        }
        guard case .stepUp(let redemption, let receiptId, let authentication)? = approval,
              Self.admits(registration.approver, acr: authentication.acr) else {
            throw StepUpService.stepUpRequired("approving needs a step-up by \(Self.keyWords(registration.approver)) for "
                                               + StepUpService.text(try Self.stepUpAction(r)))
        }
        // The client's acr_values: the approval must meet one, and the tokens name the one it met.
        guard let acr = CIBAACR.satisfied(authentication.openID.acr, requested: r.acrValues) else {
            throw StepUpService.stepUpRequired("the client asked for acr_values \(r.acrValues ?? ""): this key's step-up "
                                               + "(\(authentication.openID.acr)) does not meet them")
        }
        let now = runtime.now()
        var request: [(key: String, value: JSONValue)] = [("scope", .string(r.scope.joined(separator: " ")))]
        if r.authorizationDetails != .null { request.append(("authorization_details", r.authorizationDetails)) }
        let grant = OAuthGrant(request: .object(request), authTime: now, authentication: AuthenticationClaims(acr: acr, amr: authentication.openID.amr),
                               receiptId: receiptId, credentialId: nil, opSessionId: nil)
        let data: [(key: String, value: JSONValue)] = [("authReqId", .string(r.id)), ("clientId", .string(r.clientId)),
                                                       ("receiptId", .string(receiptId))]
        let audit = AuditRecord(.cibaApproved, actor: caller.userId, subject: caller.userId, detail: data)
        let events = [provider.events.event(.oauthAuthorized, userId: caller.userId,
                                            data: data + [("scopes", .array(r.scope.map { .string($0) }))])] + ping(r, client: client)
        let approvers = OAuthApprovers(familyId: caller.sessionId, sessionCredential: nil, stepUpJTI: redemption.jti)
        // SPEC "CIBA approval": a not-held passkey session approves with any key the client admits;
        // any other session (a device-key session) only with a device key it enrolled itself.
        let keyOfSession = caller.standing?.approves == true ? nil : caller.sessionId
        let decision = try storage({ () throws(StorageError) in
            try store.decide(id: r.id, userId: caller.userId, grant: grant.json, approvers: approvers, redeeming: redemption,
                             keyOfSession: keyOfSession, audit: audit, events: events, now: now)
        })
        switch decision {
        case .decided: break
        case .notPending: throw ServiceError.notFound("CIBA request")
        case .notTheSessionsKey:
            throw StepUpService.stepUpRequired("this session approves only with the step-up of a device key it enrolled itself")
        }
        provider.metrics.oauth(client: r.clientId, outcome: "ciba_approved")
    }

    /// `POST /v1/ciba/requests/{authReqId}/deny`: no step-up and no receipt (SPEC "CIBA approval").
    func deny(_ id: String, caller: SessionService.Caller, read: CIBARequestRead?) throws(ServiceError) {
        let r = try pendingRequest(id, userId: caller.userId, read: read)
        let client = try provider.clients.client(id: r.clientId)
        let data: [(key: String, value: JSONValue)] = [("authReqId", .string(r.id)), ("clientId", .string(r.clientId))]
        let audit = AuditRecord(.cibaDenied, actor: caller.userId, subject: caller.userId, detail: data)
        let events = [provider.events.event(.oauthDenied, userId: caller.userId, data: data + [("scopes", .array(r.scope.map { .string($0) }))])]
            + (client.map { ping(r, client: $0) } ?? [])
        guard try storage({ () throws(StorageError) in
            try store.decide(id: r.id, userId: caller.userId, grant: nil, approvers: nil, redeeming: nil, keyOfSession: nil, audit: audit,
                             events: events, now: runtime.now())
        }) == .decided else { throw ServiceError.notFound("CIBA request") }
        provider.metrics.oauth(client: r.clientId, outcome: "ciba_denied")
    }

    /// CIBA Core §10.2: a ping client hears that the result is ready — tokens, `access_denied` or
    /// `expired_token` — from the outbox. The one notification is written with the request, its
    /// delivery due a second after the request expires (nothing else has to happen for the expiry
    /// to be told) and moved to now by the write that approves, denies or expires it early (a
    /// fourth pending request); retried for at most `expires_in` after it is due. Its delivery's
    /// target is the request, so one request's wait never holds back another's.
    func scheduledPing(id: String, userId: String, client: OAuthClientRecord, token: String?, expiresIn: Int) -> OutboxEvent? {
        guard let registration = client.ciba, registration.mode == .ping, let endpoint = registration.notificationEndpoint,
              let token else { return nil }
        var event = pingEvent(id: id, userId: userId, endpoint: endpoint, token: token, maxAgeSeconds: 2 * expiresIn + 1)
        event.notBefore = runtime.now().addingTimeInterval(Double(expiresIn + 1))
        return event
    }

    /// A request stored without a scheduled notification (before migration 32) is pinged at once
    /// by the write that decides it, retried for at most its remaining lifetime.
    func ping(_ r: CIBARequestRecord, client: OAuthClientRecord) -> [OutboxEvent] {
        guard r.pingEvent == nil, let registration = client.ciba, registration.mode == .ping, let endpoint = registration.notificationEndpoint,
              let token = r.notificationToken else { return [] }
        let remaining = max(1, Int(r.expiresAt.timeIntervalSince(runtime.now()).rounded(.up)))
        return [pingEvent(id: r.id, userId: r.userId, endpoint: endpoint, token: token, maxAgeSeconds: remaining)]
    }

    /// The ping of request `id` (`CIBAPing` reads the endpoint and token again from it), delivered
    /// to the request as its target.
    private func pingEvent(id: String, userId: String, endpoint: String, token: String, maxAgeSeconds: Int) -> OutboxEvent {
        OutboxEvent(id: OutboxEvents.idPrefix + runtime.identifier(), type: .cibaPing, accountId: userId,
                    data: .object([("endpoint", .string(endpoint)), ("token", .string(token)), ("authReqId", .string(id))]),
                    fanOut: [.direct(channel: .cibaPing, target: id)], maxAgeSeconds: maxAgeSeconds, createdAt: runtime.now())
    }

    static func keyWords(_ approver: CIBARegistration.Approver) -> String {
        switch approver {
        case .attestedDeviceKey: "an attested device key of the account"
        case .deviceKey: "a device key of the account"
        case .passkey: "a user-verified passkey"
        }
    }

    // MARK: The token endpoint

    /// `grant_type=urn:openid:params:grant-type:ciba` (CIBA Core §10.1, §11; SPEC "CIBA tokens").
    func poll(_ p: CIBAPoll) throws(OAuthError) -> TokenAnswer {
        let client = p.client
        let read: CIBAPollRead?
        do { read = try store.pollRead(id: p.authReqId) } catch { throw OAuthError.unavailable }
        guard let r = read, r.clientId == client.id else { throw OAuthError.invalidGrant("auth_req_id is unknown or was issued to another client") }
        switch r.status {
        case .issued: throw OAuthError.invalidGrant("the tokens of this auth_req_id were already issued")
        case .denied: throw OAuthError(.accessDenied, "the user denied the request")
        case .expired: throw OAuthError(.expiredToken, "the request expired (a newer request for the account replaced it)")
        case _ where !r.live: throw OAuthError(.expiredToken, "the auth_req_id has expired")
        case .pending:
            // §11: polled before the interval since the previous poll (PostgreSQL's time, any
            // instance) → slow_down, and the interval grows for every later poll.
            let tooSoon = r.sinceLastPoll.map { $0 < Double(r.intervalSeconds) } ?? false
            let recorded: Bool
            do { recorded = try store.polled(id: p.authReqId, polls: r.polls, growBy: tooSoon ? Self.slowDownStep : 0) } catch {
                throw OAuthError.unavailable
            }
            if tooSoon || !recorded { throw OAuthError(.slowDown, "polled faster than the interval: wait longer between polls") }
            throw OAuthError(.authorizationPending, "the user has not approved the request yet")
        case .approved:
            return try issue(p, userId: r.userId)
        }
    }

    func issue(_ p: CIBAPoll, userId: String) throws(OAuthError) -> TokenAnswer {
        let client = p.client
        let familyId = runtime.sessionIdentifier()
        let refresh = OpaqueSecret(prefix: "lkor_", runtime: runtime)
        let outcome: CIBAIssue
        do {
            outcome = try store.issue(id: p.authReqId, clientId: client.id, familyId: familyId, refreshHash: refresh.hash,
                                      ttlSeconds: provider.policy.refreshTokenTTL,
                                      issuedAudit: AuditRecord(.oauthTokenIssued, actor: AuditActor.server, subject: userId,
                                                               detail: [("clientId", .string(client.id)), ("grant", "ciba"),
                                                                        ("sessionId", .string(familyId))]))
        } catch { throw OAuthError.unavailable }
        switch outcome {
        case .gone: throw OAuthError.invalidGrant("the tokens of this auth_req_id were already issued, or it expired")
        case .approverRevoked:
            provider.metrics.oauth(client: client.id, outcome: "approver_revoked")
            throw OAuthError.invalidGrant("the session or key that approved this request was revoked")
        case .started(let user, let stored):
            let grant = OAuthGrant(json: stored)
            let scopes = grant.scopes
            provider.metrics.oauth(client: client.id, outcome: "ciba_token")
            // SPEC "CIBA tokens": once, with the details and the receipt in the access token.
            return TokenAnswer(json: try provider.issue(client: client, userId: user, familyId: familyId, grant: grant, scopes: scopes,
                                                         refreshToken: scopes.contains("offline_access") ? refresh.token : nil,
                                                         idToken: true, carriesApproval: true))
        }
    }
}

/// The token endpoint's answer, as `OpenIDProvider.issue` built it.
struct TokenAnswer: Sendable {
    let json: JSONValue
}
