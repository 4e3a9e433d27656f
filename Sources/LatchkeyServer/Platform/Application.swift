import Foundation
import HTTP
import PostgreSQL
import JSON
import Storage
import WebAuthn

/// Every route of SPEC's HTTP contract → the service that answers it. Handlers parse, call one
/// service method, and turn its result or `ServiceError` into a response; nothing else.
///
/// One route table; `serving(_:)` gives the responder of one listener. With `LATCHKEY_ADMIN_LISTEN`
/// the public listener answers everything but `/admin/…` (404 there, as for any unknown path) and
/// the admin listener only `/admin/…`, so the admin API and console sit behind that address's
/// network restrictions alone.
public struct Application: Responder {
    /// Which paths a listener serves.
    public enum Listener: Sendable {
        /// Everything (no `LATCHKEY_ADMIN_LISTEN`).
        case all
        /// Everything but `/admin/…`.
        case publicOnly
        /// Only `/admin/…`, and the public API calls the admin console makes to sign in and
        /// approve changes (`consolePaths`), so the console works from this listener alone.
        case adminOnly
    }

    let router: Router
    /// Told each request's route and its round trips to PostgreSQL by kind (the round-trip
    /// invariant's tests record them; nil in a served deployment, which has the metric).
    public var databaseWork: (@Sendable (_ route: String, _ method: String, _ status: Int, _ work: DatabaseWork) -> Void)?
    /// `databaseWork` is also told each round trip's statement text (tests only: it costs a string per trip).
    public var traceStatements = false
    private(set) var listener: Listener = .all
    let metrics: Metrics
    let log: RequestLog
    let limiter: RateLimiter
    let trustProxy: Bool
    let origins: OriginCache
    let runtime: Runtime
    let database: Database
    let startup: StartupState
    let openID: OpenIDProvider

    public init(services: Services) {
        origins = services.origins
        runtime = services.runtime
        database = services.database
        startup = services.startup
        openID = services.openID
        metrics = services.metrics
        log = services.log
        limiter = RateLimiter(ratePerSecond: services.configuration.rateLimit, clock: services.runtime.uptime)
        trustProxy = services.configuration.trustProxy
        var routes = RouteTable(services: services)
        // Each feature folder registers its own routes (<Feature>/<Feature>Routes.swift).
        routes.addPasskeyRoutes(services)
        routes.addTokenRoutes(services)
        routes.addOAuthRoutes(services)
        routes.addSessionRoutes(services)
        routes.addAdminRoutes(services)
        routes.addAppRoutes(services)
        routes.addOperationsRoutes(services)
        routes.addStepUpRoutes(services)
        routes.addRecoveryRoutes(services)
        routes.addWebRoutes(services)
        routes.addConformanceRoutes(services)
        router = routes.router
        guards = routes.declared.map { DeclaredGuard(method: $0.method, pattern: $0.pattern, access: $0.access.name, stepUp: $0.stepUp != nil,
                                                enabled: $0.available) }
    }

    /// What each route declares (SPEC "Assurance"): for the test that walks every route and proves
    /// that its guard answers before anything else.
    public struct DeclaredGuard: Sendable {
        public let method: String
        public let pattern: String
        /// `anyone`, `session`, `admin`, `step-up-token` or `registration`.
        public let access: String
        /// The route's change needs a step-up (for some callers).
        public let stepUp: Bool
        /// On in this deployment (an optional feature that is off answers 404 like a missing path).
        public let enabled: Bool
    }

    public let guards: [DeclaredGuard]

    /// Every route of the table as (method, pattern), e.g. for a test that sweeps them all.
    public var routes: [(method: String, pattern: String)] { router.patterns }

    /// This route table, answering only what `listener` serves.
    public func serving(_ listener: Listener) -> Application {
        var copy = self
        copy.listener = listener
        return copy
    }

    /// `/admin` and everything under it (the decoded path: the router matches literal segments
    /// decoded too, so `/%61dmin/…` is an admin path).
    static func isAdminPath(_ request: Request) -> Bool {
        request.path == "/admin" || request.path.hasPrefix("/admin/")
    }

    /// What the console (web/admin/admin.js) calls outside `/admin/`: passkey sign-in, the
    /// first passkey with an enrolment ticket, step-up approvals and logout. The admin listener
    /// answers these too (they are public routes anyway: same guards, same rate limit), so behind
    /// `LATCHKEY_ADMIN_LISTEN` the console's sign-in does not get 404.
    static let consolePaths: Set<String> = [
        "/v1/passkeys/authentication/options", "/v1/passkeys/authentication/verify",
        "/v1/passkeys/registration/options", "/v1/passkeys/registration/verify",
        "/v1/step-up/challenges", "/v1/step-up/verify", "/v1/logout",
    ]

    func serves(_ request: Request) -> Bool {
        switch listener {
        case .all: true
        case .publicOnly: !Self.isAdminPath(request)
        case .adminOnly: Self.isAdminPath(request) || Self.consolePaths.contains(request.path)
        }
    }

    public func respond(to request: Request) -> Response {
        let start = runtime.uptime()
        var response: Response
        var route = "unmatched"
        var databaseFailure: DatabaseFailure? = nil
        var work = DatabaseWork()
        let served = serves(request)
        let corsOrigin = served ? allowedCORSOrigin(request) : nil
        if !served {
            // Not on this listener: the same answer as a path that does not exist.
            response = .problem(status: 404, code: "not_found", detail: "No resource at this path.")
        } else if request.method == "OPTIONS", corsOrigin != nil, request.header("Access-Control-Request-Method") != nil {
            // CORS preflight from an allowlisted web origin (a page on another host of the site):
            // every method the /v1 routes use (PUT: /v1/account/email) and every request header
            // they read (the step-up and ticket headers of device-key enrolment and recovery codes).
            response = .empty(status: 204, headers: [
                ("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE"),
                ("Access-Control-Allow-Headers", "Authorization, Content-Type, Latchkey-Step-Up, Latchkey-Ticket"),
                ("Access-Control-Max-Age", "600"),
            ])
            route = "preflight"
        } else if Self.isRateLimited(request), let wait = limiter.admit(clientAddress(request)) {
            response = Self.rateLimited(request, retryAfter: wait)
        } else if let step = startup.pendingStep, !Self.isOperations(request) {
            // Started without a reachable primary: nothing but health, readiness and metrics until
            // the start-up steps are done (the signing keys, the allowlist may not be loaded yet).
            response = ServiceError(.internalError, "not ready: \(step)", headers: [("Retry-After", "1")]).response
        } else {
            // Every database call of this request shares one budget (LATCHKEY_DB_QUERY_TIMEOUT).
            let ((answer, pattern), failure, traced) = database.withinTracedBudget(tracing: traceStatements) { router.dispatch(request) }
            response = answer
            work = traced
            if let pattern { route = pattern }
            if response.status == 503 { databaseFailure = failure }
        }
        if let origin = corsOrigin {
            response.headers += [("Access-Control-Allow-Origin", origin), ("Vary", "Origin"),
                                 ("Access-Control-Expose-Headers", "Retry-After, WWW-Authenticate")]
        }
        if response.status == 401, response.header("WWW-Authenticate") == nil {
            // RFC 9110 §15.5.2: every 401 names a challenge — here, the one place that answers them all.
            // RFC 6750 §3.1: a bearer token that was sent and refused (expired, revoked, malformed,
            // unknown) → `invalid_token`; a request without one gets the bare Bearer challenge. A
            // refusal with a challenge of its own (an enrolment ticket's `Ticket`) keeps it.
            let refused = BearerCredentials.value(request, scheme: "Bearer") != nil
            response.headers.append(("WWW-Authenticate", refused ? #"Bearer error="invalid_token""# : "Bearer"))
        }
        if response.header("Cache-Control") == nil {
            response.headers.append(("Cache-Control", "no-store"))
        }
        let seconds = runtime.uptime() - start
        metrics.observeRequest(route: route, method: request.method, status: response.status, seconds: seconds, roundTrips: work.roundTrips.total)
        databaseWork?(route, request.method, response.status, work)
        if response.status == 503 {
            // Every 503 names the database failure behind it (its class is a metric label).
            metrics.observeDatabaseFailure(databaseFailure?.kind ?? (startup.isReady ? "other" : "not_ready"))
            log.unavailable(request: request, route: route, failure: databaseFailure, notReady: startup.pendingReason, at: runtime.now())
        }
        log.write(request: request, route: route, status: response.status, seconds: seconds, at: runtime.now(),
                  databaseError: databaseFailure?.kind)
        return response
    }
}

extension Application {
    /// The request's `Origin` when it is an allowlisted web origin and the path is part of the
    /// public API (`/v1/…`, JWKS); admin routes never answer cross-origin.
    func allowedCORSOrigin(_ request: Request) -> String? {
        // SPEC "OpenID Provider": the token endpoint (and userinfo, revocation, discovery) answers CORS
        // for the origins of a public client's redirect URIs (a browser app exchanging its own code).
        if OpenIDProvider.corsPaths.contains(request.path), let origin = request.header("Origin") {
            return openID.publicClientOrigins().contains(origin) ? origin : nil
        }
        // SPEC "The cookie routes": the OP session's routes answer no CORS (the issuer's page is same-origin).
        guard let origin = request.header("Origin"), origin.hasPrefix("https://") || origin.hasPrefix("http://"),
              (request.path.hasPrefix("/v1/") && !request.path.hasPrefix("/v1/oauth/")) || request.path == "/.well-known/jwks.json",
              origins.policy().allows(origin) else { return nil }
        return origin
    }

    /// Health, readiness and metrics: answered before the start-up steps are done.
    static func isOperations(_ request: Request) -> Bool {
        request.path == "/healthz" || request.path == "/readyz" || request.path == "/metrics"
    }

    /// What the rate limiter counts: every method on the API (`/v1/…`: ceremonies, tokens, and the
    /// reads that query PostgreSQL per request) and the admin API, and `/readyz` (a database ping).
    /// Left out: `/healthz` and `/metrics` (no I/O), the well-known files and JWKS (served from
    /// memory), the web app's static files.
    static func isRateLimited(_ request: Request) -> Bool {
        request.path.hasPrefix("/v1/") || request.path.hasPrefix("/oauth2/") || request.path.hasPrefix("/admin/v1/") || request.path == "/readyz"
    }

    /// A 429 in the format of its endpoint (SPEC "OpenID Provider" → "Limits"): the styled page at
    /// the authorization endpoint (a person's browser, never redirected), OAuth's JSON on the other
    /// `/oauth2/*` endpoints, problem+json elsewhere; always with `Retry-After`.
    static func rateLimited(_ request: Request, retryAfter wait: Int) -> Response {
        let retry = ("Retry-After", String(wait))
        if request.path == "/oauth2/authorize" {
            let lang = ConsentDisplay.language(uiLocales: request.queryValue("ui_locales"), acceptLanguage: request.header("Accept-Language"), chosen: nil)
            return OAuthPages.page(.tooManyRequests, lang: lang, status: 429, extraHeaders: [retry])
        }
        if request.path.hasPrefix("/oauth2/") {
            return .json(status: 429, bytes: OAuthError("temporarily_unavailable", "too many requests; retry later").json.serialized(),
                         headers: [retry, ("Cache-Control", "no-store")])
        }
        return ServiceError(.rateLimited, "too many requests; retry later", headers: [retry]).response
    }

    func clientAddress(_ request: Request) -> String { Self.clientAddress(request, trustProxy: trustProxy) }

    /// The client's address (`LATCHKEY_TRUST_PROXY`: the last `X-Forwarded-For` hop), as every
    /// per-address limit counts it.
    static func clientAddress(_ request: Request, trustProxy: Bool) -> String {
        if trustProxy, let forwarded = request.header("X-Forwarded-For"),
           let last = forwarded.split(separator: ",").last.map({ String($0).trimmed }), !last.isEmpty {
            return last
        }
        return request.remoteAddress ?? "unknown"
    }
}

