/// Turns a request into a response. Runs synchronously on a libmicrohttpd worker thread, so it
/// must not block for long; it never sees a body larger than the server's `maxBodyBytes`.
public protocol Responder: Sendable {
    func respond(to request: Request) -> Response
}

/// A responder that answers some requests on the event loop the request arrived on
/// (`HTTPServer.Configuration.eventLoops`), suspending while it waits on PostgreSQL instead of
/// holding a thread.
public protocol LoopResponder: Responder {
    /// The answer, made on the loop; nil when this request has no handler that runs there (it is
    /// then answered by `respond(to:)` on a worker thread). Nil must be decided before any work.
    func respondOnLoop(to request: Request) async -> Response?
}
