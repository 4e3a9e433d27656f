@testable import HTTP
import Testing

@Suite struct LeakTests {
    /// Every per-request context libmicrohttpd was given is freed again, whatever the request did.
    @Test func requestContextsAreFreed() throws {
        let server = try HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threadPoolSize: 2,
                                                         connectionTimeoutSeconds: 1, maxBodyBytes: 100),
                                    responder: Router())
        let client = HTTPClient(host: "127.0.0.1", port: server.port)
        for _ in 0..<20 { _ = try client.send(method: "GET", path: "/nothing") }
        _ = try client.send(method: "POST", path: "/nothing", body: [UInt8](repeating: 1, count: 101))
        for malformed in MalformedRequest.all { _ = try rawExchange(port: server.port, malformed.bytes) }
        let open = HTTPClient(host: "127.0.0.1", port: server.port)
        _ = try open.send(method: "POST", path: "/nothing", body: [1, 2, 3])
        server.stop()  // also completes whatever is still open
        #expect(server.pendingRequestContexts == 0)
    }
}
