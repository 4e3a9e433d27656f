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
public struct Application: LoopResponder {
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
    /// The request pipeline: the stages of PipelineStages.swift, assembled from the parts below.
    private(set) var pipeline: Pipeline
    private(set) var listener: Listener = .all
    /// Told each request's route and its round trips to PostgreSQL by kind (the round-trip
    /// invariant's tests record them; nil in a served deployment, which has the metric).
    public var databaseWork: (@Sendable (_ route: String, _ method: String, _ status: Int, _ work: DatabaseWork) -> Void)? {
        didSet { observation.databaseWork = databaseWork; pipeline = assemble() }
    }
    /// `databaseWork` is also told each round trip's statement text (tests only: it costs a string per trip).
    public var traceStatements = false {
        didSet { dispatch.tracing = traceStatements; pipeline = assemble() }
    }
    private var observation: Observation
    let cors: CORS
    let rateLimit: RateLimit
    let startupGate: StartupGate
    let authChallenge: AuthChallenge
    private(set) var dispatch: RouteDispatch

    /// The routes whose body is a whole file, with their body limit (`HTTPServer.Configuration.largeBodies`).
    public static func largeBodies(_ c: Configuration) -> [String: Int] { ["POST /admin/v1/import": c.importMaxBody] }

    public init(services: Services) {
        var routes = RouteTable(services: services)
        // Each feature folder registers its own routes (<Feature>/<Feature>Routes.swift).
        routes.addPasskeyRoutes(services)
        routes.addTokenRoutes(services)
        routes.addOAuthRoutes(services)
        routes.addCIBARoutes(services)
        routes.addSessionRoutes(services)
        routes.addAdminRoutes(services)
        routes.addAppRoutes(services)
        routes.addOperationsRoutes(services)
        routes.addStepUpRoutes(services)
        routes.addTransparencyRoutes(services)
        routes.addRecoveryRoutes(services)
        routes.addApprovalRoutes(services)
        routes.addVaultRoutes(services)
        routes.addPortabilityRoutes(services)
        routes.addWebRoutes(services)
        routes.addConformanceRoutes(services)
        router = routes.router
        guards = routes.declared.map { DeclaredGuard(method: $0.method, pattern: $0.pattern, access: $0.access.name, stepUp: $0.stepUp != nil,
                                                enabled: $0.available) }
        observation = Observation(runtime: services.runtime, metrics: services.metrics, log: services.log, startup: services.startup)
        let (openID, origins) = (services.openID, services.origins)
        cors = CORS(publicClientOrigins: { openID.publicClientOrigins() }, allowlisted: { origins.policy().allows($0) })
        rateLimit = RateLimit(limiter: RateLimiter(ratePerSecond: services.configuration.rateLimit, clock: services.runtime.uptime),
                              trustProxy: services.configuration.trustProxy)
        startupGate = StartupGate(startup: services.startup)
        authChallenge = AuthChallenge(dpopNonce: { openID.currentDPoPNonce() })
        dispatch = RouteDispatch(router: router, budget: services.database)
        pipeline = Pipeline(stages: [], dispatch: dispatch)  // every part is set: now the stages can be listed
        pipeline = assemble()
    }

    /// The stages, outermost first (PipelineStages.swift says what each one does).
    private func assemble() -> Pipeline {
        Pipeline(stages: [observation, CacheDefault(), authChallenge, ListenerFilter(listener: listener), cors, Preflight(), rateLimit, startupGate],
                 dispatch: dispatch)
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
        copy.pipeline = copy.assemble()
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

    /// `GET /v1/providers/{aaguid}/icon`: the console shows passkeys' provider icons, so the admin
    /// listener serves them too (a public route: same guard, same rate limit).
    static func isProviderIcon(_ request: Request) -> Bool {
        request.path.hasPrefix("/v1/providers/") && request.path.hasSuffix("/icon")
    }

    public func respond(to request: Request) -> Response { pipeline.respond(to: request) }

    /// The routes with a handler for the event loop (a passkey sign-in's options and verify) are
    /// answered there; nil for every other request, before any stage has seen it.
    public func respondOnLoop(to request: Request) async -> Response? {
        guard let route = router.loopRoute(request) else { return nil }
        return await pipeline.respond(to: request, route: route)
    }
}

extension Application {
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
            // SPEC "Limits": at the CIBA poll the limit is CIBA Core §11's slow_down.
            let cibaPoll = request.path == OAuthEndpoint.token.rawValue
                && formPairs(request.body).contains { $0.0 == "grant_type" && $0.1 == CIBAPoll.grantType }
            return .json(status: 429, bytes: OAuthError(cibaPoll ? .slowDown : .temporarilyUnavailable, "too many requests; retry later").json.serialized(),
                         headers: [retry, ("Cache-Control", "no-store")])
        }
        return ServiceError(.rateLimited, "too many requests; retry later", headers: [retry]).response
    }

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

