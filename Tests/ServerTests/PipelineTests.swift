import Foundation
import HTTP
import JSON
@testable import LatchkeyServer
import PostgreSQL
import Storage
import Synchronization
import Testing

/// The request pipeline's stages, each on `Request` values alone (no socket, no PostgreSQL), then
/// the whole pipeline for the order SPEC's answers depend on: a path the listener does not serve is
/// 404 without CORS, a preflight is answered before the rate limit, the rate limit before the
/// start-up gate, and every answer gets its headers in one order and is measured and logged.
@Suite("Request pipeline: one stage, one concern")
struct PipelineTests {
    static let site = "https://app.latchkey.test"
    static let browserApp = "https://spa.example.test"

    static func request(_ method: String, _ target: String, _ headers: [(String, String)] = [],
                        from address: String = "192.0.2.1") -> Request {
        Request(method: method, target: target, headers: headers, remoteAddress: address)
    }

    static func request(_ target: String, _ headers: [(String, String)] = [], from address: String = "192.0.2.1") -> Request {
        request("GET", target, headers, from: address)
    }

    /// `stage` entered with a fresh exchange (or `exchange`): its answer, and the exchange after.
    static func enter(_ stage: some RequestStage, _ request: Request) -> (Response?, Exchange) {
        var exchange = Exchange(request)
        let answer = stage.enter(&exchange)
        return (answer, exchange)
    }

    static func problem(_ response: Response) throws -> JSONValue {
        try JSONParser.parse(response.body)
    }

    static let cors = CORS(publicClientOrigins: { [browserApp] }, allowlisted: { $0 == site })

    // MARK: the listener

    @Test("a listener answers what it does not serve as a path that does not exist")
    func listenerFilter() throws {
        let publicOnly = ListenerFilter(listener: .publicOnly)
        let (hidden, _) = Self.enter(publicOnly, Self.request("/admin/v1/users"))
        let answer = try #require(hidden)
        #expect(answer.status == 404)
        #expect(try Self.problem(answer)["code"]?.stringValue == "not_found")
        #expect(try Self.problem(answer)["detail"]?.stringValue == "No resource at this path.")
        #expect(Self.enter(publicOnly, Self.request("/%61dmin/v1/users")).0?.status == 404, "the decoded path decides")
        #expect(Self.enter(publicOnly, Self.request("/v1/account")).0 == nil)

        let adminOnly = ListenerFilter(listener: .adminOnly)
        #expect(Self.enter(adminOnly, Self.request("/admin/v1/users")).0 == nil)
        #expect(Self.enter(adminOnly, Self.request("POST", "/v1/passkeys/authentication/options")).0 == nil, "the console signs in here")
        #expect(Self.enter(adminOnly, Self.request("/v1/account")).0?.status == 404)
        #expect(Self.enter(adminOnly, Self.request("/healthz")).0?.status == 404)

        let all = ListenerFilter(listener: .all)
        for target in ["/admin/v1/users", "/v1/account", "/healthz"] { #expect(Self.enter(all, Self.request(target)).0 == nil) }
    }

    // MARK: CORS and preflight

    @Test("CORS names an allowlisted origin on the public API and JWKS, a public client's origin on its endpoints, nothing elsewhere")
    func corsOrigin() {
        let origin = [("Origin", Self.site)]
        #expect(Self.enter(Self.cors, Self.request("/v1/account", origin)).1.corsOrigin == Self.site)
        #expect(Self.enter(Self.cors, Self.request("/.well-known/jwks.json", origin)).1.corsOrigin == Self.site)
        #expect(Self.enter(Self.cors, Self.request("/v1/oauth/requests/x", origin)).1.corsOrigin == nil, "the OP's own page is same-origin")
        #expect(Self.enter(Self.cors, Self.request("/admin/v1/users", origin)).1.corsOrigin == nil, "admin routes never answer cross-origin")
        #expect(Self.enter(Self.cors, Self.request("/v1/account", [("Origin", "https://other.test")])).1.corsOrigin == nil)
        #expect(Self.enter(Self.cors, Self.request("/v1/account", [("Origin", "null")])).1.corsOrigin == nil)
        #expect(Self.enter(Self.cors, Self.request("/v1/account")).1.corsOrigin == nil)
        // A public client's origin, on the endpoints a browser app calls itself (and only there).
        #expect(Self.enter(Self.cors, Self.request("POST", "/oauth2/token", [("Origin", Self.browserApp)])).1.corsOrigin == Self.browserApp)
        #expect(Self.enter(Self.cors, Self.request("POST", "/oauth2/token", origin)).1.corsOrigin == nil)
        #expect(Self.enter(Self.cors, Self.request("/v1/account", [("Origin", Self.browserApp)])).1.corsOrigin == nil)
        // It never answers on its own.
        #expect(Self.enter(Self.cors, Self.request("/v1/account", origin)).0 == nil)
    }

    @Test("CORS headers go on whatever answered, and only with an origin")
    func corsHeaders() {
        var exchange = Exchange(Self.request("/v1/account", [("Origin", Self.site)]))
        exchange.corsOrigin = Self.site
        var response = Response.json(status: 401, bytes: Array("{}".utf8))
        Self.cors.leave(&response, exchange)
        #expect(response.headers.map(\.0) == ["Content-Type", "Access-Control-Allow-Origin", "Vary", "Access-Control-Expose-Headers"])
        #expect(response.header("Access-Control-Allow-Origin") == Self.site)
        #expect(response.header("Access-Control-Expose-Headers") == "Retry-After, WWW-Authenticate, DPoP-Nonce")

        var plain = Response.json(bytes: Array("{}".utf8))
        Self.cors.leave(&plain, Exchange(Self.request("/v1/account")))
        #expect(plain.headers.count == 1)
    }

    @Test("a preflight is answered for an allowlisted origin that asks for a method, and named `preflight`")
    func preflight() {
        var exchange = Exchange(Self.request("OPTIONS", "/v1/account/email", [("Origin", Self.site), ("Access-Control-Request-Method", "PUT")]))
        exchange.corsOrigin = Self.site
        let answer = Preflight().enter(&exchange)
        #expect(answer?.status == 204)
        #expect(answer?.body.isEmpty == true)
        #expect(answer?.headers.map(\.0) == ["Access-Control-Allow-Methods", "Access-Control-Allow-Headers", "Access-Control-Max-Age"])
        #expect(answer?.header("Access-Control-Allow-Methods") == "GET, POST, PUT, PATCH, DELETE")
        #expect(answer?.header("Access-Control-Allow-Headers") == "Authorization, Content-Type, Latchkey-Step-Up, Latchkey-Ticket, DPoP")
        #expect(answer?.header("Access-Control-Max-Age") == "600")
        #expect(exchange.route == "preflight")

        // Not an allowlisted origin, or no method asked for, or not OPTIONS: on to the route table.
        var unlisted = Exchange(Self.request("OPTIONS", "/v1/account/email", [("Access-Control-Request-Method", "PUT")]))
        #expect(Preflight().enter(&unlisted) == nil)
        #expect(unlisted.route == "unmatched")
        var noMethod = Exchange(Self.request("OPTIONS", "/v1/account/email", [("Origin", Self.site)]))
        noMethod.corsOrigin = Self.site
        #expect(Preflight().enter(&noMethod) == nil)
        var get = Exchange(Self.request("GET", "/v1/account", [("Origin", Self.site), ("Access-Control-Request-Method", "PUT")]))
        get.corsOrigin = Self.site
        #expect(Preflight().enter(&get) == nil)
    }

    // MARK: rate limit and start-up

    @Test("the rate limit counts the API per client address and answers 429 in its endpoint's format")
    func rateLimit() throws {
        let stage = RateLimit(limiter: RateLimiter(ratePerSecond: 1, clock: { 0 }), trustProxy: false)
        // A burst of two, then 429 with Retry-After.
        #expect(Self.enter(stage, Self.request("/v1/account")).0 == nil)
        #expect(Self.enter(stage, Self.request("/v1/account")).0 == nil)
        let limited = try #require(Self.enter(stage, Self.request("/v1/account")).0)
        #expect(limited.status == 429)
        #expect(limited.header("Retry-After") == "1")
        #expect(try Self.problem(limited)["code"]?.stringValue == "rate_limited")
        // OAuth's endpoints answer in OAuth's JSON.
        let token = try #require(Self.enter(stage, Self.request("POST", "/oauth2/token")).0)
        #expect(token.status == 429)
        #expect(try Self.problem(token)["error"]?.stringValue == "temporarily_unavailable")
        #expect(token.header("Cache-Control") == "no-store")
        // Another address has its own bucket; what is not counted is never refused.
        #expect(Self.enter(stage, Self.request("/v1/account", from: "192.0.2.2")).0 == nil)
        for target in ["/healthz", "/metrics", "/.well-known/jwks.json", "/"] { #expect(Self.enter(stage, Self.request(target)).0 == nil) }
        #expect(Self.enter(stage, Self.request("/readyz")).0?.status == 429)
    }

    @Test("behind a trusted proxy the last X-Forwarded-For hop is the address counted")
    func rateLimitBehindProxy() {
        let stage = RateLimit(limiter: RateLimiter(ratePerSecond: 1, clock: { 0 }), trustProxy: true)
        let proxy = "10.0.0.1"
        for _ in 0..<2 { #expect(Self.enter(stage, Self.request("/v1/account", [("X-Forwarded-For", "198.51.100.7")], from: proxy)).0 == nil) }
        #expect(Self.enter(stage, Self.request("/v1/account", [("X-Forwarded-For", "203.0.113.1, 198.51.100.7")], from: proxy)).0?.status == 429)
        #expect(Self.enter(stage, Self.request("/v1/account", [("X-Forwarded-For", "198.51.100.8")], from: proxy)).0 == nil)
    }

    @Test("until start-up is done only health, readiness and metrics get past the gate")
    func startupGate() throws {
        let startup = StartupState()
        startup.waiting("waiting for the database (migrate): connection refused to db.internal")
        let gate = StartupGate(startup: startup)
        let answer = try #require(Self.enter(gate, Self.request("/v1/account")).0)
        #expect(answer.status == 503)
        #expect(answer.header("Retry-After") == "1")
        #expect(try Self.problem(answer)["code"]?.stringValue == "internal_error")
        #expect(try Self.problem(answer)["detail"]?.stringValue == "not ready: waiting for the database (migrate)", "the step, not the hosts")
        for target in ["/healthz", "/readyz", "/metrics"] { #expect(Self.enter(gate, Self.request(target)).0 == nil) }
        startup.finished()
        #expect(Self.enter(gate, Self.request("/v1/account")).0 == nil)
    }

    // MARK: the way out

    @Test("every 401 names a challenge: invalid_token when a Bearer token was sent, its own when it has one")
    func challenge() {
        func out(_ response: Response, _ headers: [(String, String)] = []) -> Response {
            var response = response
            AuthChallenge().leave(&response, Exchange(Self.request("/v1/account", headers)))
            return response
        }
        let refusal = ServiceError.unauthorized.response
        #expect(out(refusal).header("WWW-Authenticate") == "Bearer")
        #expect(out(refusal, [("Authorization", "Bearer expired")]).header("WWW-Authenticate") == #"Bearer error="invalid_token""#)
        #expect(out(refusal, [("Authorization", "bearer expired")]).header("WWW-Authenticate") == #"Bearer error="invalid_token""#)
        #expect(out(refusal, [("Authorization", "Ticket t")]).header("WWW-Authenticate") == "Bearer")
        let ticket = Response(status: 401, headers: [("WWW-Authenticate", "Ticket")])
        #expect(out(ticket).headers.filter { $0.0 == "WWW-Authenticate" }.map(\.1) == ["Ticket"])
        #expect(out(ServiceError(.forbidden, "no").response).header("WWW-Authenticate") == nil)
    }

    @Test("an answer without Cache-Control is no-store; one with its own keeps it")
    func cacheDefault() {
        var plain = Response.json(bytes: [])
        CacheDefault().leave(&plain, Exchange(Self.request("/v1/account")))
        #expect(plain.headers.last?.0 == "Cache-Control" && plain.headers.last?.1 == "no-store")
        var cached = Response.json(bytes: [], headers: [("cache-control", "public, max-age=300")])
        CacheDefault().leave(&cached, Exchange(Self.request("/.well-known/jwks.json")))
        #expect(cached.headers.filter { $0.0.lowercased() == "cache-control" }.map(\.1) == ["public, max-age=300"])
    }

    @Test("every answer is counted and logged; a 503 also names its database failure, or the start-up wait")
    func observation() {
        let clock = ManualClock()
        let log = RecordingLog()
        let metrics = Metrics()
        let work = Mutex<[(String, Int, RoundTripCounts)]>([])
        let startup = StartupState()
        startup.finished()
        var stage = Observation(runtime: clock.runtime(), metrics: metrics, log: log, startup: startup)
        stage.databaseWork = { route, _, status, done in work.withLock { $0.append((route, status, done.roundTrips)) } }

        var exchange = Exchange(Self.request("/v1/things/abc"))
        #expect(stage.enter(&exchange) == nil)
        clock.advance(0.25)
        exchange.route = "/v1/things/{id}"
        exchange.work.roundTrips = RoundTripCounts(reads: 1, writes: 1)
        exchange.databaseFailure = DatabaseFailure(kind: "timeout", reason: "canceling statement due to statement timeout")
        var unavailable = ServiceError.storageUnavailable.response
        stage.leave(&unavailable, exchange)

        var ok = Exchange(Self.request("/healthz"))
        _ = stage.enter(&ok)
        var fine = Response.empty(status: 200)
        stage.leave(&fine, ok)

        let text = metrics.render(pool: (0, 0, 0))
        #expect(text.contains(#"latchkey_http_requests_total{route="/v1/things/{id}",method="GET",status="503"} 1"#))
        #expect(text.contains(#"latchkey_http_requests_total{route="unmatched",method="GET",status="200"} 1"#))
        #expect(text.contains(#"latchkey_db_unavailable_total{class="timeout"} 1"#))
        #expect(text.contains(#"latchkey_db_round_trips_total{route="/v1/things/{id}",method="GET"} 2"#))
        let lines = log.lines.withLock { $0 }
        #expect(lines.map(\.route) == ["/v1/things/{id}", "unmatched"])
        #expect(lines.map(\.status) == [503, 200])
        #expect(lines.map(\.seconds) == [0.25, 0])
        #expect(lines.map(\.databaseError) == ["timeout", nil])
        let outages = log.outages.withLock { $0 }
        #expect(outages.count == 1)
        #expect(outages.first?.failure?.kind == "timeout" && outages.first?.route == "/v1/things/{id}")
        #expect(work.withLock { $0 }.map(\.0) == ["/v1/things/{id}", "unmatched"])
        #expect(work.withLock { $0 }.first?.2.total == 2)

        // While start-up waits, a 503 without a database failure is `not_ready`, with the wait logged.
        let waiting = StartupState()
        waiting.waiting("waiting for the database (migrate): refused")
        let gated = Observation(runtime: clock.runtime(), metrics: metrics, log: log, startup: waiting)
        var early = Exchange(Self.request("/v1/account"))
        _ = gated.enter(&early)
        var notReady = Response.empty(status: 503)
        gated.leave(&notReady, early)
        #expect(metrics.render(pool: (0, 0, 0)).contains(#"latchkey_db_unavailable_total{class="not_ready"} 1"#))
        #expect(log.outages.withLock { $0 }.last?.notReady == "waiting for the database (migrate): refused")
    }

    // MARK: the route table

    @Test("the route table answers within the budget, naming its route, its round trips and a 503's failure")
    func routeDispatch() {
        var router = Router()
        router.add("GET", "/v1/things/{id}") { _, _ in ServiceError.storageUnavailable.response }
        router.add("GET", "/v1/fine") { _, _ in .empty(status: 200) }
        let failure = DatabaseFailure(kind: "connection_lost", reason: "server closed the connection")
        let dispatch = RouteDispatch(router: router, budget: FixedBudget(failure: failure, trips: RoundTripCounts(reads: 1, writes: 1, control: 1)))

        var broken = Exchange(Self.request("/v1/things/abc"))
        #expect(dispatch.answer(&broken).status == 503)
        #expect(broken.route == "/v1/things/{id}")
        #expect(broken.work.roundTrips.total == 3)
        #expect(broken.databaseFailure == failure)

        // A failure the handler got past (a retry that succeeded) is not what a 200 is about.
        var fine = Exchange(Self.request("/v1/fine"))
        #expect(dispatch.answer(&fine).status == 200)
        #expect(fine.databaseFailure == nil)

        var missing = Exchange(Self.request("/v1/none"))
        #expect(dispatch.answer(&missing).status == 404)
        #expect(missing.route == "unmatched")
    }

    // MARK: the whole pipeline

    /// The stages in `Application`'s order over `router`, with fakes for what they read.
    static func pipeline(_ router: Router, listener: Application.Listener = .all, rate: Int = 0, startup: StartupState,
                         log: RecordingLog, metrics: Metrics = Metrics()) -> Pipeline {
        let observation = Observation(runtime: ManualClock().runtime(), metrics: metrics, log: log, startup: startup)
        return Pipeline(stages: [observation, CacheDefault(), AuthChallenge(), ListenerFilter(listener: listener), cors, Preflight(),
                                 RateLimit(limiter: RateLimiter(ratePerSecond: rate, clock: { 0 }), trustProxy: false), StartupGate(startup: startup)],
                        dispatch: RouteDispatch(router: router, budget: FixedBudget(failure: nil, trips: RoundTripCounts())))
    }

    static var router: Router {
        var router = Router()
        router.add("GET", "/v1/account") { _, _ in ServiceError.unauthorized.response }
        router.add("GET", "/admin/v1/users") { _, _ in .empty(status: 200) }
        return router
    }

    @Test("the application's order: listener, CORS, preflight, rate limit, start-up gate, route table; headers out in one order")
    func order() throws {
        let started = StartupState()
        started.finished()
        let log = RecordingLog()
        let origin = ("Origin", Self.site)

        // A path this listener does not serve: 404, no CORS whatever the origin, still no-store and logged.
        let hidden = Self.pipeline(Self.router, listener: .publicOnly, startup: started, log: log).respond(to: Self.request("/admin/v1/users", [origin]))
        #expect(hidden.status == 404)
        #expect(hidden.headers.map(\.0) == ["Content-Type", "Cache-Control"])
        #expect(log.lines.withLock { $0 }.last?.route == "unmatched")

        // A 401 from the route table, cross-origin: CORS headers, then the challenge, then Cache-Control.
        let refused = Self.pipeline(Self.router, startup: started, log: log).respond(to: Self.request("/v1/account", [origin, ("Authorization", "Bearer x")]))
        #expect(refused.status == 401)
        #expect(refused.headers.map(\.0) == ["Content-Type", "Access-Control-Allow-Origin", "Vary", "Access-Control-Expose-Headers",
                                             "WWW-Authenticate", "Cache-Control"])
        #expect(refused.header("WWW-Authenticate") == #"Bearer error="invalid_token""#)
        #expect(log.lines.withLock { $0 }.last?.route == "/v1/account")

        // A preflight is answered before the rate limit (here every request would be refused at once).
        let starting = StartupState()
        let limited = Self.pipeline(Self.router, rate: 1, startup: starting, log: log)
        for _ in 0..<2 { #expect(limited.respond(to: Self.request("/v1/account", from: "192.0.2.9")).status == 503) }
        let preflight = limited.respond(to: Self.request("OPTIONS", "/v1/account", [origin, ("Access-Control-Request-Method", "GET")], from: "192.0.2.9"))
        #expect(preflight.status == 204)
        #expect(preflight.headers.map(\.0) == ["Access-Control-Allow-Methods", "Access-Control-Allow-Headers", "Access-Control-Max-Age",
                                               "Access-Control-Allow-Origin", "Vary", "Access-Control-Expose-Headers", "Cache-Control"])
        #expect(log.lines.withLock { $0 }.last?.route == "preflight")
        // … and the rate limit before the start-up gate: 429, not 503.
        let tooMany = limited.respond(to: Self.request("/v1/account", [origin], from: "192.0.2.9"))
        #expect(tooMany.status == 429)
        #expect(tooMany.header("Access-Control-Allow-Origin") == Self.site)
        // The start-up gate's 503 is logged as one, with the wait behind it.
        #expect(log.outages.withLock { $0 }.count == 2)
        #expect(log.outages.withLock { $0 }.allSatisfy { $0.notReady == "starting" && $0.failure == nil })
    }
}

/// The log lines the pipeline would write.
final class RecordingLog: RequestLogging {
    struct Line: Sendable { let route: String; let status: Int; let seconds: Double; let databaseError: String? }
    struct Outage: Sendable { let route: String; let failure: DatabaseFailure?; let notReady: String? }
    let lines = Mutex<[Line]>([])
    let outages = Mutex<[Outage]>([])

    func write(request: Request, route: String, status: Int, seconds: Double, at time: Date, databaseError: String?) {
        lines.withLock { $0.append(Line(route: route, status: status, seconds: seconds, databaseError: databaseError)) }
    }

    func unavailable(request: Request, route: String, failure: DatabaseFailure?, notReady: String?, at time: Date) {
        outages.withLock { $0.append(Outage(route: route, failure: failure, notReady: notReady)) }
    }
}

/// A budget that runs the work and reports a fixed failure and count, as `Database` would.
struct FixedBudget: RequestBudget {
    let failure: DatabaseFailure?
    let trips: RoundTripCounts

    func withinBudget<T>(tracing: Bool, _ body: () throws -> T) rethrows -> (T, DatabaseFailure?, DatabaseWork) {
        (try body(), failure, DatabaseWork(roundTrips: trips))
    }

    func withinBudget<T>(tracing: Bool, _ body: () async -> T) async -> (T, DatabaseFailure?, DatabaseWork) {
        (await body(), failure, DatabaseWork(roundTrips: trips))
    }
}
