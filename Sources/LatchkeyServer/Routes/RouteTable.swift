import HTTP

/// Collects routes; every handler's `ServiceError` becomes RFC 9457 problem+json with SPEC's code,
/// and anything unexpected a 503 problem (never a crash, never a stack trace).
struct RouteTable {
    var router = Router()

    mutating func add(_ method: String, _ pattern: String, accepting: AcceptedBody = .json,
                      _ handler: @escaping @Sendable (Request, PathParameters) throws -> Response) {
        router.add(method, pattern, accepting: accepting) { request, params in
            var response: Response
            do {
                response = try handler(request, params)
            } catch let error as ServiceError {
                response = error.response
            } catch {
                response = ServiceError(.internalError, "unexpected failure").response
            }
            return response
        }
    }
}
