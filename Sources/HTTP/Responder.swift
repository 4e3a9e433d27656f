/// Turns a request into a response. Runs synchronously on a libmicrohttpd worker thread, so it
/// must not block for long; it never sees a body larger than the server's `maxBodyBytes`.
public protocol Responder: Sendable {
    func respond(to request: Request) -> Response
}
