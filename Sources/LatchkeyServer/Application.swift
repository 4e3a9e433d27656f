import Foundation
import HTTP
import JSON
import PostgreSQL
import Storage
import WebAuthn

/// Every route of SPEC's HTTP contract → the service that answers it. Handlers parse, call one
/// service method, and turn its result or `ServiceError` into a response; nothing else.
public struct Application: Responder {
    let router: Router
    let metrics: Metrics
    let log: RequestLog
    let limiter: RateLimiter
    let trustProxy: Bool
    let origins: OriginCache

    public init(services: Services) {
        origins = services.origins
        metrics = services.metrics
        log = services.log
        limiter = RateLimiter(ratePerSecond: services.configuration.rateLimit)
        trustProxy = services.configuration.trustProxy
        var routes = RouteTable()
        // Each area registers its own routes (one file each: Routes+<Area>.swift).
        routes.addPasskeyRoutes(services)
        routes.addTokenRoutes(services)
        routes.addAdminRoutes(services)
        routes.addAppRoutes(services)
        routes.addOperationsRoutes(services)
        routes.addStepUpRoutes(services)
        routes.addWebRoutes(services)
        router = routes.router
    }

    public func respond(to request: Request) -> Response {
        let start = monotonicNow()
        var response: Response
        var route = "unmatched"
        let corsOrigin = allowedCORSOrigin(request)
        if request.method == "OPTIONS", corsOrigin != nil, request.header("Access-Control-Request-Method") != nil {
            // CORS preflight from an allowlisted web origin (a page on another host of the site).
            response = .empty(status: 204, headers: [
                ("Access-Control-Allow-Methods", "GET, POST, PATCH, DELETE"),
                ("Access-Control-Allow-Headers", "Authorization, Content-Type"), ("Access-Control-Max-Age", "600"),
            ])
            route = "preflight"
        } else if request.method == "POST", request.path.hasPrefix("/v1/"), let wait = limiter.admit(clientAddress(request)) {
            response = ServiceError("rate_limited", "too many requests; retry later", headers: [("Retry-After", String(wait))]).response
        } else {
            let (answer, pattern) = router.dispatch(request)
            response = answer
            if let pattern { route = pattern }
        }
        if let origin = corsOrigin {
            response.headers += [("Access-Control-Allow-Origin", origin), ("Vary", "Origin"),
                                 ("Access-Control-Expose-Headers", "Retry-After, WWW-Authenticate")]
        }
        if response.header("Cache-Control") == nil {
            response.headers.append(("Cache-Control", "no-store"))
        }
        let seconds = monotonicNow() - start
        metrics.observeRequest(route: route, method: request.method, status: response.status, seconds: seconds)
        log.write(request: request, route: route, status: response.status, seconds: seconds)
        return response
    }
}

extension Application {
    /// The request's `Origin` when it is an allowlisted web origin and the path is part of the
    /// public API (`/v1/…`, JWKS); admin routes never answer cross-origin.
    func allowedCORSOrigin(_ request: Request) -> String? {
        guard let origin = request.header("Origin"), origin.hasPrefix("https://") || origin.hasPrefix("http://"),
              request.path.hasPrefix("/v1/") || request.path == "/.well-known/jwks.json",
              origins.policy().allows(origin) else { return nil }
        return origin
    }

    func clientAddress(_ request: Request) -> String {
        if trustProxy, let forwarded = request.header("X-Forwarded-For"),
           let last = forwarded.split(separator: ",").last.map({ String($0).trimmed }), !last.isEmpty {
            return last
        }
        return request.remoteAddress ?? "unknown"
    }
}

func jsonBody(_ request: Request) throws(ServiceError) -> JSONValue {
    do {
        let value = try JSONParser.parse(request.body)
        guard case .object = value else { throw ServiceError.invalid("the body must be a JSON object") }
        return value
    } catch let e as JSONError {
        throw ServiceError.invalid("malformed JSON: \(e.reason)")
    } catch {
        throw ServiceError.invalid("the body must be a JSON object")
    }
}

/// OAuth token requests come form-encoded (RFC 6749 §4.1.3); JSON is accepted too.
func formOrJSON(_ request: Request) throws(ServiceError) -> [String: String] {
    if request.mediaType == "application/x-www-form-urlencoded" {
        var out: [String: String] = [:]
        for pair in String(decoding: request.body, as: UTF8.self).split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = formDecode(String(kv[0])), value = kv.count > 1 ? formDecode(String(kv[1])) : ""
            guard let key, let value else { throw ServiceError.invalid("malformed form body") }
            out[key] = value
        }
        return out
    }
    var out: [String: String] = [:]
    for member in try jsonBody(request).objectValue ?? [] {
        if let s = member.value.stringValue { out[member.key] = s }
    }
    return out
}

func formDecode(_ s: String) -> String? {
    var bytes: [UInt8] = []
    var it = Array(s.utf8).makeIterator()
    while let c = it.next() {
        if c == UInt8(ascii: "+") { bytes.append(0x20) }
        else if c == UInt8(ascii: "%") {
            guard let h = it.next(), let l = it.next(), let v = UInt8(String(decoding: [h, l], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(v)
        } else { bytes.append(c) }
    }
    return String(validating: bytes, as: UTF8.self)
}

/// Names shown to users: 1…64 characters, no control characters.
func validateName(_ value: String, _ field: String) throws(ServiceError) {
    guard !value.isEmpty, value.count <= 64, !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
        throw ServiceError.invalid("\(field) must be 1 to 64 printable characters")
    }
}
