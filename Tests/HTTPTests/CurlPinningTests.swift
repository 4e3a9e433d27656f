import Curl
import HTTP
import Synchronization
import Testing

/// `CurlOptions.connectOnlyTo` (webhook deliveries, SPEC "Assurance"): the URL's host is pinned to
/// checked addresses, nothing is looked up, a socket to any other address is refused, redirects are
/// answers. Every connection here goes to 127.0.0.1.
@Suite struct CurlPinningTests {
    /// Records each request (path and Host header); `/redirect` answers 302 to `/elsewhere`.
    final class Recorder: Responder, Sendable {
        let seen = Mutex<[(path: String, host: String)]>([])
        func respond(to request: Request) -> Response {
            seen.withLock { $0.append((request.path, request.header("Host") ?? "")) }
            if request.path == "/redirect" { return Response(status: 302, headers: [("Location", "/elsewhere")]) }
            return .empty(status: 204)
        }
        var paths: [String] { seen.withLock { $0.map(\.path) } }
    }

    static let loopback: [UInt8] = [127, 0, 0, 1]

    func serve() throws -> (HTTPServer, Recorder) {
        let recorder = Recorder()
        let server = try HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threadPoolSize: 2, maxBodyBytes: 4096),
                                    responder: recorder)
        return (server, recorder)
    }

    func options(_ addresses: [[UInt8]]) -> CurlOptions {
        var o = CurlOptions()
        o.protocols = "http"
        o.timeoutSeconds = 5
        o.connectOnlyTo = addresses
        return o
    }

    @Test("a name nobody can resolve is reached at its pinned address, with its own Host header")
    func pinnedNameIsNotLookedUp() throws {
        let (server, recorder) = try serve()
        defer { server.stop() }
        // `.test` is reserved (RFC 6761): without the pin this could only fail to resolve.
        for url in ["http://pinned.latchkey.test:\(server.port)/a", "http://PINNED.latchkey.test.:\(server.port)/b"] {
            let response = try Curl.post(url, headers: [], body: Array("{}".utf8), options: options([Self.loopback]))
            #expect(response.status == 204)
        }
        #expect(recorder.paths == ["/a", "/b"])
        #expect(recorder.seen.withLock { $0.map(\.host) } == ["pinned.latchkey.test:\(server.port)", "PINNED.latchkey.test.:\(server.port)"])
    }

    @Test("a connection to an address that was not checked is refused before it is made")
    func unpinnedAddressIsRefused() throws {
        let (server, recorder) = try serve()
        defer { server.stop() }
        // The literal host needs no lookup; 127.0.0.1 is simply not in the checked list.
        #expect {
            _ = try Curl.post("http://127.0.0.1:\(server.port)/x", headers: [], body: [], options: options([[127, 0, 0, 2]]))
        } throws: { error in
            guard let e = error as? CurlError else { return false }
            return e.code == .connectionFailed && e.reason.contains("refused to connect to 127.0.0.1")
        }
        #expect {
            _ = try Curl.post("http://[::1]:\(server.port)/x", headers: [], body: [], options: options([Self.loopback]))
        } throws: { error in (error as? CurlError)?.reason.contains("refused to connect to [::1]") == true }
        // No checked address at all: nothing is attempted.
        #expect(throws: CurlError.self) { _ = try Curl.post("http://127.0.0.1:\(server.port)/y", headers: [], body: [], options: options([])) }
        #expect(recorder.paths.isEmpty)
    }

    @Test("a redirect is the answer: its status comes back and its Location is never requested")
    func redirectsAreNotFollowed() throws {
        let (server, recorder) = try serve()
        defer { server.stop() }
        let response = try Curl.post("http://pinned.latchkey.test:\(server.port)/redirect", headers: [], body: Array("{}".utf8),
                                     options: options([Self.loopback]))
        #expect(response.status == 302)
        #expect(recorder.paths == ["/redirect"])
    }
}
