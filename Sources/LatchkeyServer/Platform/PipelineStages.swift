import Foundation
import HTTP
import PostgreSQL
import Storage

// The request pipeline's stages, outermost first (`Application.pipeline` lists them in this order):
//
//   Observation → CacheDefault → AuthChallenge → ListenerFilter → CORS → Preflight → RateLimit
//   → StartupGate → RouteDispatch (the route table, within the database budget)
//
// A request not served by the listener is 404 before CORS is looked at; a preflight is answered
// before the rate limit, the rate limit before the start-up gate. On the way out CORS headers are
// added first, then the 401 challenge, then `Cache-Control`, and every answer is measured and logged.

/// Metrics and the request log for every request, whatever answered it; a 503 also names the
/// database failure (or the start-up wait) behind it, as a metric label and a log line.
struct Observation: RequestStage {
    let runtime: Runtime
    let metrics: Metrics
    let log: any RequestLogging
    let startup: StartupState
    /// Told each request's route and its database work (`Application.databaseWork`).
    var databaseWork: (@Sendable (_ route: String, _ method: String, _ status: Int, _ work: DatabaseWork) -> Void)?

    func enter(_ exchange: inout Exchange) -> Response? {
        exchange.start = runtime.uptime()
        return nil
    }

    func leave(_ response: inout Response, _ exchange: Exchange) {
        let request = exchange.request
        let seconds = runtime.uptime() - exchange.start
        metrics.observeRequest(route: exchange.route, method: request.method, status: response.status, seconds: seconds,
                               roundTrips: exchange.work.roundTrips.total)
        if let databaseWork {
            var work = exchange.work
            if response.header("Content-Type") == "application/jsonl" { work.items = response.body.reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) } }
            databaseWork(exchange.route, request.method, response.status, work)
        }
        if response.status == 503 {
            metrics.observeDatabaseFailure(exchange.databaseFailure?.kind ?? (startup.isReady ? "other" : "not_ready"))
            log.unavailable(request: request, route: exchange.route, failure: exchange.databaseFailure, notReady: startup.pendingReason,
                            at: runtime.now())
        }
        log.write(request: request, route: exchange.route, status: response.status, seconds: seconds, at: runtime.now(),
                  databaseError: exchange.databaseFailure?.kind)
    }
}

/// Where the pipeline's log lines go (`RequestLog`: standard output and, for a 503, standard error).
protocol RequestLogging: Sendable {
    func write(request: Request, route: String, status: Int, seconds: Double, at time: Date, databaseError: String?)
    func unavailable(request: Request, route: String, failure: DatabaseFailure?, notReady: String?, at time: Date)
}

extension RequestLog: RequestLogging {}

/// An answer that sets no `Cache-Control` is `no-store` (API answers name accounts and tokens).
struct CacheDefault: RequestStage {
    func leave(_ response: inout Response, _ exchange: Exchange) {
        if response.header("Cache-Control") == nil {
            response.headers.append(("Cache-Control", "no-store"))
        }
    }
}

/// RFC 9110 §15.5.2: every 401 names a challenge, here, the one place that answers them all.
/// RFC 6750 §3.1: a bearer token that was sent and refused (expired, revoked, malformed, unknown) →
/// `invalid_token`; a request without one gets the bare Bearer challenge. A refusal with a
/// challenge of its own (an enrolment ticket's `Ticket`) keeps it.
struct AuthChallenge: RequestStage {
    /// The current DPoP nonce (SPEC "Sender-constrained tokens": every answer to a request that
    /// carried a proof or a DPoP-bound token names it in `DPoP-Nonce`).
    var dpopNonce: @Sendable () -> String? = { nil }

    func leave(_ response: inout Response, _ exchange: Exchange) {
        let request = exchange.request
        let presentedDPoP = BearerCredentials.value(request, scheme: "DPoP") != nil
        if presentedDPoP || SessionDPoP.carriesProof(request), response.header("DPoP-Nonce") == nil, let nonce = dpopNonce() {
            response.headers.append(("DPoP-Nonce", nonce))
        }
        guard response.status == 401, response.header("WWW-Authenticate") == nil else { return }
        // RFC 9449 §7.1: a token presented under the DPoP scheme is refused under it.
        if presentedDPoP {
            response.headers.append(("WWW-Authenticate", "DPoP error=\"invalid_token\", algs=\"\(SessionDPoP.algorithms)\""))
            return
        }
        let refused = BearerCredentials.value(request, scheme: "Bearer") != nil
        response.headers.append(("WWW-Authenticate", refused ? #"Bearer error="invalid_token""# : "Bearer"))
    }
}

/// A path this listener does not serve gets the answer of a path that does not exist.
struct ListenerFilter: RequestStage {
    let listener: Application.Listener

    func enter(_ exchange: inout Exchange) -> Response? {
        Self.serves(listener, exchange.request) ? nil : .problem(status: 404, code: "not_found", detail: "No resource at this path.")
    }

    static func serves(_ listener: Application.Listener, _ request: Request) -> Bool {
        switch listener {
        case .all: true
        case .publicOnly: !Application.isAdminPath(request)
        case .adminOnly: Application.isAdminPath(request) || Application.consolePaths.contains(request.path) || Application.isProviderIcon(request)
        }
    }
}

/// CORS (SPEC "Assurance", "OpenID Provider"): finds the request's allowlisted web origin on the
/// way in, and names it on whatever answers on the way out.
struct CORS: RequestStage {
    /// The origins of public clients' redirect URIs (`OpenIDProvider.publicClientOrigins`).
    let publicClientOrigins: @Sendable () -> Set<String>
    /// Whether the origin allowlist holds an origin (`OriginCache`).
    let allowlisted: @Sendable (String) -> Bool

    func enter(_ exchange: inout Exchange) -> Response? {
        exchange.corsOrigin = allowedOrigin(exchange.request)
        return nil
    }

    func leave(_ response: inout Response, _ exchange: Exchange) {
        guard let origin = exchange.corsOrigin else { return }
        response.headers += [("Access-Control-Allow-Origin", origin), ("Vary", "Origin"),
                             ("Access-Control-Expose-Headers", "Retry-After, WWW-Authenticate, DPoP-Nonce")]
    }

    /// The request's `Origin` when it is an allowlisted web origin and the path is part of the
    /// public API (`/v1/…`, JWKS); admin routes never answer cross-origin.
    func allowedOrigin(_ request: Request) -> String? {
        // SPEC "OpenID Provider": the token endpoint (and userinfo, revocation, discovery) answers CORS
        // for the origins of a public client's redirect URIs (a browser app exchanging its own code).
        if OpenIDProvider.corsPaths.contains(request.path), let origin = request.header("Origin") {
            return publicClientOrigins().contains(origin) ? origin : nil
        }
        // SPEC "The cookie routes": the OP session's routes answer no CORS (the issuer's page is same-origin).
        guard let origin = request.header("Origin"), origin.hasPrefix("https://") || origin.hasPrefix("http://"),
              (request.path.hasPrefix("/v1/") && !request.path.hasPrefix("/v1/oauth/")) || request.path == "/.well-known/jwks.json",
              allowlisted(origin) else { return nil }
        return origin
    }
}

/// A CORS preflight from an allowlisted web origin (a page on another host of the site): every
/// method the /v1 routes use (PUT: /v1/account/email) and every request header they read (the
/// step-up and ticket headers of device-key enrolment and recovery codes).
struct Preflight: RequestStage {
    func enter(_ exchange: inout Exchange) -> Response? {
        guard exchange.request.method == "OPTIONS", exchange.corsOrigin != nil,
              exchange.request.header("Access-Control-Request-Method") != nil else { return nil }
        exchange.route = "preflight"
        return .empty(status: 204, headers: [
            ("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE"),
            ("Access-Control-Allow-Headers", "Authorization, Content-Type, Latchkey-Step-Up, Latchkey-Ticket, DPoP"),
            ("Access-Control-Max-Age", "600"),
        ])
    }
}

/// `LATCHKEY_RATE_LIMIT` per client address, on the paths `Application.isRateLimited` names; a
/// 429 in the format of its endpoint.
struct RateLimit: RequestStage {
    let limiter: RateLimiter
    let trustProxy: Bool

    func enter(_ exchange: inout Exchange) -> Response? {
        let request = exchange.request
        guard Application.isRateLimited(request),
              let wait = limiter.admit(Application.clientAddress(request, trustProxy: trustProxy)) else { return nil }
        return Application.rateLimited(request, retryAfter: wait)
    }
}

/// Started without a reachable primary: nothing but health, readiness and metrics until the
/// start-up steps are done (the signing keys, the allowlist may not be loaded yet).
struct StartupGate: RequestStage {
    let startup: StartupState

    func enter(_ exchange: inout Exchange) -> Response? {
        guard let step = startup.pendingStep, !Application.isOperations(exchange.request) else { return nil }
        return ServiceError(.internalError, "not ready: \(step)", headers: [("Retry-After", "1")]).response
    }
}
