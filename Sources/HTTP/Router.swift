/// Values captured by `{name}` segments of a route pattern, percent-decoded.
public struct PathParameters: Sendable {
    public private(set) var pairs: [(String, String)]

    public init(_ pairs: [(String, String)] = []) {
        self.pairs = pairs
    }

    public subscript(_ name: String) -> String? {
        pairs.first { $0.0 == name }?.1
    }
}

/// Which request bodies a route takes. Checked for POST, PUT and PATCH requests with a non-empty
/// body; anything else gets 415 with code `invalid_request`.
public struct AcceptedBody: Sendable, Hashable {
    private enum Value: Hashable, Sendable { case json, jsonOrForm, any }
    private let value: Value
    private init(_ value: Value) { self.value = value }

    /// `application/json` (parameters such as `charset` allowed). The default.
    public static let json = AcceptedBody(.json)
    /// `application/json` or `application/x-www-form-urlencoded` (OAuth's `/v1/token`).
    public static let jsonOrForm = AcceptedBody(.jsonOrForm)
    /// No media-type check.
    public static let any = AcceptedBody(.any)

    func allows(_ mediaType: String?) -> Bool {
        switch value {
        case .any: true
        case .json: mediaType == "application/json"
        case .jsonOrForm: mediaType == "application/json" || mediaType == "application/x-www-form-urlencoded"
        }
    }

    /// What to send instead, for the 415's detail.
    var expected: String {
        switch value {
        case .any: "any body"
        case .json: "application/json"
        case .jsonOrForm: "application/json or application/x-www-form-urlencoded"
        }
    }
}

/// Routes requests by method and path pattern (`/v1/passkeys/{id}`).
///
/// - No pattern matches the path → 404 `not_found`.
/// - A pattern matches but not for this method → 405 `invalid_request` with an `Allow` header.
/// - When several patterns match, the most specific wins: a literal segment beats a `{parameter}`
///   at the first position where they differ (`/v1/device-keys/challenges` beats `/v1/device-keys/{id}`),
///   for every method: the less specific pattern never answers that path (a method only it has is 405).
/// - `HEAD` is served by the `GET` route when no `HEAD` route exists.
public struct Router: Responder {
    public typealias Handler = @Sendable (Request, PathParameters) -> Response
    /// The same route's answer made on an event loop (`LoopResponder`).
    public typealias LoopHandler = @Sendable (Request, PathParameters) async -> Response

    private struct Route: Sendable {
        let method: String
        let pattern: String
        let segments: [Segment]
        let accepts: AcceptedBody
        let handler: Handler
        var loopHandler: LoopHandler? = nil
    }

    private enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
    }

    private var routes: [Route] = []
    /// Routes whose pattern has no `{parameter}`, by pattern, in registration order: a request path
    /// spelled exactly like one of them (and with no `%`, so decoding cannot change it) is owned by
    /// that pattern alone — an all-literal shape beats every templated one at the first segment where
    /// they differ — so `dispatch` looks it up instead of matching every route.
    private var literalRoutes: [String: [Int]] = [:]
    /// The patterns of the routes with a loop handler, when none has a `{parameter}` (nil when one
    /// has): a request to any other path is turned away by `loopRoute` with one lookup, not a match.
    private var loopPaths: Set<String>? = []

    public init() {}

    /// Registers `handler` for `method` (any case) on `pattern`. A pattern starts with "/"; a
    /// segment written `{name}` captures one non-empty path segment. Registering a malformed
    /// pattern is a programming error and traps.
    public mutating func add(_ method: String, _ pattern: String, accepting accepts: AcceptedBody = .json,
                             handler: @escaping Handler, onLoop loopHandler: LoopHandler? = nil) {
        precondition(pattern.hasPrefix("/"), "route pattern must start with /: \(pattern)")
        let segments = pattern.dropFirst().split(separator: "/", omittingEmptySubsequences: false).map { part -> Segment in
            if part.hasPrefix("{") && part.hasSuffix("}") && part.count > 2 {
                return .parameter(String(part.dropFirst().dropLast()))
            }
            precondition(!part.contains("{") && !part.contains("}"), "malformed route segment '\(part)' in \(pattern)")
            return .literal(String(part))
        }
        let route = Route(method: asciiUppercased(method), pattern: pattern,
                          segments: segments, accepts: accepts, handler: handler, loopHandler: loopHandler)
        precondition(!routes.contains { $0.method == route.method && $0.segments == route.segments },
                     "duplicate route \(route.method) \(pattern)")
        let literal = !segments.contains(where: { if case .parameter = $0 { true } else { false } })
        if literal { literalRoutes[pattern, default: []].append(routes.count) }
        if loopHandler != nil {
            if literal { loopPaths?.insert(pattern) } else { loopPaths = nil }
        }
        routes.append(route)
    }

    public mutating func get(_ pattern: String, handler: @escaping Handler) {
        add("GET", pattern, accepting: .any, handler: handler)
    }

    public mutating func post(_ pattern: String, accepting accepts: AcceptedBody = .json, handler: @escaping Handler) {
        add("POST", pattern, accepting: accepts, handler: handler)
    }

    public mutating func put(_ pattern: String, accepting accepts: AcceptedBody = .json, handler: @escaping Handler) {
        add("PUT", pattern, accepting: accepts, handler: handler)
    }

    public mutating func patch(_ pattern: String, accepting accepts: AcceptedBody = .json, handler: @escaping Handler) {
        add("PATCH", pattern, accepting: accepts, handler: handler)
    }

    public mutating func delete(_ pattern: String, handler: @escaping Handler) {
        add("DELETE", pattern, accepting: .any, handler: handler)
    }

    /// Every registered (method, pattern), in registration order: for tests that sweep all routes.
    public var patterns: [(method: String, pattern: String)] { routes.map { ($0.method, $0.pattern) } }

    public func respond(to request: Request) -> Response { dispatch(request).response }

    /// Answers `request` and names the route pattern that matched (nil for 404 and 405), so a
    /// caller can label metrics and logs by route rather than by raw path.
    public func dispatch(_ request: Request) -> (response: Response, pattern: String?) {
        switch select(request) {
        case .answered(let response, let pattern): return (response, pattern)
        case .route(let route, let parameters): return (route.handler(request, PathParameters(parameters)), route.pattern)
        }
    }

    /// The route that answers `request` on an event loop, and its pattern; nil when the route
    /// that owns it has no loop handler, or when the router answers it itself (404, 405, 415).
    public func loopRoute(_ request: Request) -> (pattern: String, answer: @Sendable () async -> Response)? {
        // A path with `%` may decode to a loop route's: only `select` can tell.
        if let loopPaths, !loopPaths.contains(request.rawPath), !request.rawPath.utf8.contains(UInt8(ascii: "%")) { return nil }
        guard case .route(let route, let parameters) = select(request), let handler = route.loopHandler else { return nil }
        return (route.pattern, { await handler(request, PathParameters(parameters)) })
    }

    private enum Selection {
        case answered(Response, pattern: String?)
        case route(Route, parameters: [(String, String)])
    }

    private func select(_ request: Request) -> Selection {
        if let owners = literalRoutes[request.rawPath], !request.rawPath.utf8.contains(UInt8(ascii: "%")) {
            return answer(request, owners.map { (routes[$0], []) })
        }
        let rawSegments = request.rawPath.hasPrefix("/")
            ? request.rawPath.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
            : []
        var decoded: [String?] = Array(repeating: nil, count: rawSegments.count)

        // The most specific shape that matches owns the path (OpenAPI 3.1 §4.8.8.2: concrete paths
        // match before templated ones): `DELETE /v1/recovery/challenges` is 405 with `Allow: POST`,
        // not a `DELETE /v1/recovery/{id}` with id "challenges".
        var matching: [(route: Route, parameters: [(String, String)])] = []
        for route in routes {
            guard let parameters = match(route.segments, rawSegments, &decoded) else { continue }
            if let owner = matching.first?.route.segments, !sameShape(route.segments, owner) {
                if moreSpecific(owner, than: route.segments) { continue }
                matching.removeAll()
            }
            matching.append((route, parameters))
        }
        return answer(request, matching)
    }

    /// Picks the route for the request's method among those of the one shape that owns the path
    /// (HEAD falls back to GET), or answers 404 / 405 / 415.
    private func answer(_ request: Request, _ matching: [(route: Route, parameters: [(String, String)])]) -> Selection {
        var best: (route: Route, parameters: [(String, String)])?
        var getFallback: (route: Route, parameters: [(String, String)])?
        var allowed: [String] = []
        for (route, parameters) in matching {
            if !allowed.contains(route.method) { allowed.append(route.method) }
            if route.method == request.method {
                if best == nil || moreSpecific(route.segments, than: best!.route.segments) {
                    best = (route, parameters)
                }
            } else if request.method == "HEAD" && route.method == "GET" {
                if getFallback == nil || moreSpecific(route.segments, than: getFallback!.route.segments) {
                    getFallback = (route, parameters)
                }
            }
        }

        guard let (route, parameters) = best ?? getFallback else {
            if allowed.isEmpty {
                return .answered(.problem(status: 404, code: "not_found", detail: "No resource at this path."), pattern: nil)
            }
            if allowed.contains("GET") && !allowed.contains("HEAD") { allowed.append("HEAD") }
            let allow = allowed.joined(separator: ", ")
            return .answered(.problem(status: 405, code: "invalid_request",
                                      detail: "Method \(request.method) is not allowed here; allowed: \(allow).",
                                      headers: [("Allow", allow)]), pattern: nil)
        }

        if !request.body.isEmpty, request.method == "POST" || request.method == "PUT" || request.method == "PATCH",
           !route.accepts.allows(request.mediaType) {
            return .answered(.problem(status: 415, code: "invalid_request",
                                      detail: "Content-Type \(request.mediaType ?? "(none)") is not accepted here: send Content-Type: \(route.accepts.expected)"
                                        + (route.accepts == .json ? " (curl: -H 'Content-Type: application/json')." : ".")), pattern: route.pattern)
        }
        return .route(route, parameters: parameters)
    }

    private func match(_ pattern: [Segment], _ raw: [Substring], _ decoded: inout [String?]) -> [(String, String)]? {
        guard pattern.count == raw.count else { return nil }
        var parameters: [(String, String)] = []
        for (index, segment) in pattern.enumerated() {
            switch segment {
            case .literal(let literal):
                // Literal segments compare against the decoded form, so "/a%62c" reaches "/abc".
                if raw[index] != literal {
                    if decoded[index] == nil { decoded[index] = PercentDecoding.decode(raw[index], plusAsSpace: false) }
                    if decoded[index] != literal { return nil }
                }
            case .parameter(let name):
                if raw[index].isEmpty { return nil }
                if decoded[index] == nil { decoded[index] = PercentDecoding.decode(raw[index], plusAsSpace: false) }
                parameters.append((name, decoded[index]!))
            }
        }
        return parameters
    }

    /// Literal and parameter segments at the same places (two patterns that match the same path).
    private func sameShape(_ lhs: [Segment], _ rhs: [Segment]) -> Bool {
        lhs.count == rhs.count && zip(lhs, rhs).allSatisfy { pair in
            switch pair {
            case (.literal, .literal), (.parameter, .parameter): true
            default: false
            }
        }
    }

    private func moreSpecific(_ lhs: [Segment], than rhs: [Segment]) -> Bool {
        for (left, right) in zip(lhs, rhs) {
            switch (left, right) {
            case (.literal, .parameter): return true
            case (.parameter, .literal): return false
            default: continue
            }
        }
        return false
    }
}
