import HTTP
import PostgreSQL
import Storage

/// One request on its way through the pipeline: the request, and what the stages learned about it
/// for the stages after them (and for the way out).
struct Exchange {
    let request: Request
    /// When the request came in (`Runtime.uptime`).
    var start = 0.0
    /// The label of metrics and the log: the router pattern that answered, `preflight` or `unmatched`.
    var route = "unmatched"
    /// The allowlisted web origin the answer names (CORS); nil: no CORS headers.
    var corsOrigin: String? = nil
    /// The handler's round trips to PostgreSQL by kind (and their statements, when traced).
    var work = DatabaseWork()
    /// The database failure behind a 503 the handler answered.
    var databaseFailure: DatabaseFailure? = nil

    init(_ request: Request) { self.request = request }
}

/// One concern of the request pipeline. On the way in, a stage may answer the request itself (the
/// stages after it never see it); on the way out, every stage the request reached, innermost
/// first, may add to the answer.
protocol RequestStage: Sendable {
    /// Nil passes the request on.
    func enter(_ exchange: inout Exchange) -> Response?
    func leave(_ response: inout Response, _ exchange: Exchange)
}

extension RequestStage {
    func enter(_ exchange: inout Exchange) -> Response? { nil }
    func leave(_ response: inout Response, _ exchange: Exchange) {}
}

/// The stages in order, then the route table, which answers whatever reaches it. Built once; a
/// request walks a fixed array of values (no closures made, nothing allocated by the walk itself).
struct Pipeline: Sendable {
    let stages: [any RequestStage]
    let dispatch: RouteDispatch

    func respond(to request: Request) -> Response {
        var exchange = Exchange(request)
        let (early, reached) = enter(&exchange)
        var response = early ?? dispatch.answer(&exchange)
        leave(&response, exchange, reached: reached)
        return response
    }

    /// The same walk for a request whose route answers on an event loop (`Router.loopRoute`): the
    /// stages as above, on the loop's thread, and the route's answer awaited there.
    func respond(to request: Request, route: (pattern: String, answer: @Sendable () async -> Response)) async -> Response {
        var exchange = Exchange(request)
        let (early, reached) = enter(&exchange)
        var response: Response
        if let early { response = early } else { response = await dispatch.answer(&exchange, route: route) }
        leave(&response, exchange, reached: reached)
        return response
    }

    /// The way in: the first stage that answers, and how many stages the request reached.
    private func enter(_ exchange: inout Exchange) -> (Response?, reached: Int) {
        for index in stages.indices {
            if let early = stages[index].enter(&exchange) { return (early, index + 1) }
        }
        return (nil, stages.count)
    }

    /// The way out: every stage the request reached, innermost first.
    private func leave(_ response: inout Response, _ exchange: Exchange, reached: Int) {
        for index in stages.indices.prefix(reached).reversed() {
            stages[index].leave(&response, exchange)
        }
    }
}

/// Every database call of one request shares one budget (`LATCHKEY_DB_QUERY_TIMEOUT`), and its
/// round trips are counted (`Database.withinBudget`).
protocol RequestBudget: Sendable {
    func withinBudget<T>(tracing: Bool, _ body: () throws -> T) rethrows -> (T, DatabaseFailure?, DatabaseWork)
    func withinBudget<T>(tracing: Bool, _ body: () async -> T) async -> (T, DatabaseFailure?, DatabaseWork)
}

extension Database: RequestBudget {}

/// The innermost responder: the route table, within the request's database budget. Names the
/// route that answered, the round trips it made and, for a 503, the database failure behind it.
struct RouteDispatch: Sendable {
    let router: Router
    let budget: any RequestBudget
    /// Keep each round trip's statement text (`Application.traceStatements`: tests only).
    var tracing = false

    func answer(_ exchange: inout Exchange) -> Response {
        let request = exchange.request
        let ((response, pattern), failure, work) = budget.withinBudget(tracing: tracing) { router.dispatch(request) }
        exchange.work = work
        if let pattern { exchange.route = pattern }
        if response.status == 503 { exchange.databaseFailure = failure }
        return response
    }

    func answer(_ exchange: inout Exchange, route: (pattern: String, answer: @Sendable () async -> Response)) async -> Response {
        let (response, failure, work) = await budget.withinBudget(tracing: tracing) { await route.answer() }
        exchange.work = work
        exchange.route = route.pattern
        if response.status == 503 { exchange.databaseFailure = failure }
        return response
    }
}
