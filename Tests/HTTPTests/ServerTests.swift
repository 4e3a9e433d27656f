import EventLoop
import Glibc
import HTTP
import Synchronization
import Testing

/// A router that reflects what the server handed it.
private func echoRouter() -> Router {
    var router = Router()
    router.get("/echo/{name}") { request, parameters in
        var lines = ["method=\(request.method)", "path=\(request.path)", "name=\(parameters["name"] ?? "-")"]
        for (name, value) in request.query { lines.append("q:\(name)=\(value)") }
        lines.append("x-test=\(request.header("x-test") ?? "-")")
        lines.append("remote=\(request.remoteAddress ?? "-")")
        return .text(lines.joined(separator: "\n"))
    }
    router.post("/echo", accepting: .any) { request, _ in
        Response(status: 200, headers: [("Content-Type", request.header("Content-Type") ?? "application/octet-stream"),
                                        ("X-Body-Count", String(request.body.count))],
                 body: request.body)
    }
    router.get("/bad-headers") { _, _ in
        Response(status: 200, headers: [("X-Ok", "yes"), ("X-Split", "a\r\nSet-Cookie: evil=1"),
                                        ("Content-Length", "999")], body: Array("fine".utf8))
    }
    return router
}

private func startServer(maxBodyBytes: Int = 65536, connectionTimeoutSeconds: Int = 30) throws -> HTTPServer {
    try HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threadPoolSize: 2,
                                        connectionTimeoutSeconds: connectionTimeoutSeconds, maxBodyBytes: maxBodyBytes),
                   responder: echoRouter())
}

@Suite struct ServerTests {
    @Test func bindsAnEphemeralPort() throws {
        let server = try startServer()
        defer { server.stop() }
        #expect(server.port > 0)
    }

    @Test func getEchoesPathQueryAndHeaders() throws {
        let server = try startServer()
        defer { server.stop() }
        let client = HTTPClient(host: "127.0.0.1", port: server.port)
        let response = try client.send(method: "GET", path: "/echo/a%2Fb%20c?x=1&y=two+words&z=%26",
                                       headers: [("X-Test", "hello")])
        #expect(response.status == 200)
        #expect(response.text == """
            method=GET
            path=/echo/a/b c
            name=a/b c
            q:x=1
            q:y=two words
            q:z=&
            x-test=hello
            remote=127.0.0.1
            """)
    }

    @Test func postEchoesBody() throws {
        let server = try startServer()
        defer { server.stop() }
        let client = HTTPClient(host: "127.0.0.1", port: server.port)
        let body = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        let response = try client.send(method: "POST", path: "/echo", headers: [("Content-Type", "application/json")],
                                       body: body)
        #expect(response.status == 200)
        #expect(response.body == body)
        #expect(response.header("content-type") == "application/json")
    }

    @Test func unknownRouteIsProblemJSON() throws {
        let server = try startServer()
        defer { server.stop() }
        let response = try HTTPClient(host: "127.0.0.1", port: server.port).send(method: "GET", path: "/missing")
        #expect(response.status == 404)
        #expect(response.header("Content-Type") == "application/problem+json")
        #expect(member("code", in: response.body) == "not_found")
    }

    @Test func unsafeResponseHeadersAreDropped() throws {
        let server = try startServer()
        defer { server.stop() }
        let response = try HTTPClient(host: "127.0.0.1", port: server.port).send(method: "GET", path: "/bad-headers")
        #expect(response.status == 200)
        #expect(response.text == "fine")
        #expect(response.header("X-Ok") == "yes")
        #expect(response.header("X-Split") == nil)
        #expect(response.header("Set-Cookie") == nil)
        #expect(response.header("Content-Length") == "4")
    }

    @Test func keepAliveReusesOneConnection() throws {
        let server = try startServer()
        defer { server.stop() }
        let client = HTTPClient(host: "127.0.0.1", port: server.port)
        for index in 0..<10 {
            let response = index % 2 == 0
                ? try client.send(method: "GET", path: "/echo/\(index)")
                : try client.send(method: "POST", path: "/echo", body: Array("body \(index)".utf8))
            #expect(response.status == 200)
            #expect(response.header("Connection")?.lowercased() != "close")
        }
        #expect(client.connectionsOpened == 1)
        #expect(server.openConnections >= 1)
    }

    @Test func clientReconnectsAfterServerClose() throws {
        let server = try startServer()
        defer { server.stop() }
        let client = HTTPClient(host: "127.0.0.1", port: server.port)
        let first = try client.send(method: "GET", path: "/echo/1", headers: [("Connection", "close")])
        #expect(first.status == 200)
        let second = try client.send(method: "GET", path: "/echo/2")
        #expect(second.status == 200)
        #expect(client.connectionsOpened == 2)
    }

    @Test func bodyAtLimitIsAccepted() throws {
        let server = try startServer(maxBodyBytes: 65536)
        defer { server.stop() }
        let client = HTTPClient(host: "127.0.0.1", port: server.port)
        let body = [UInt8](repeating: 0x61, count: 65536)
        let response = try client.send(method: "POST", path: "/echo", body: body)
        #expect(response.status == 200)
        #expect(response.header("X-Body-Count") == "65536")
        #expect(response.body == body)
    }

    @Test func bodyOverLimitIs413() throws {
        let server = try startServer(maxBodyBytes: 65536)
        defer { server.stop() }
        let client = HTTPClient(host: "127.0.0.1", port: server.port)
        let response = try client.send(method: "POST", path: "/echo", body: [UInt8](repeating: 0x61, count: 65537))
        #expect(response.status == 413)
        #expect(response.header("Content-Type") == "application/problem+json")
        #expect(member("code", in: response.body) == "payload_too_large")
        // The server still serves, and the client reconnects by itself.
        #expect(try client.send(method: "GET", path: "/echo/after").status == 200)
    }

    @Test func aRouteWithALargeBodyLimitTakesMoreThanTheOthers() throws {
        var router = echoRouter()
        router.post("/file", accepting: .any) { request, _ in .text(String(request.body.count)) }
        let server = try HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threadPoolSize: 2, maxBodyBytes: 1024,
                                                         largeBodies: ["POST /file": 8192]), responder: router)
        defer { server.stop() }
        let client = HTTPClient(host: "127.0.0.1", port: server.port)
        let within = try client.send(method: "POST", path: "/file", body: [UInt8](repeating: 0x61, count: 8192))
        #expect(within.status == 200 && String(decoding: within.body, as: UTF8.self) == "8192")
        let over = try client.send(method: "POST", path: "/file", body: [UInt8](repeating: 0x61, count: 8193))
        #expect(over.status == 413 && member("code", in: over.body) == "payload_too_large")
        // Every other route keeps maxBodyBytes, the same path with a query too (the key is the path).
        #expect(try client.send(method: "POST", path: "/echo", body: [UInt8](repeating: 0x61, count: 2048)).status == 413)
        #expect(try client.send(method: "POST", path: "/file?x=1", body: [UInt8](repeating: 0x61, count: 2048)).status == 200)
    }

    @Test func aStreamedBodyArrivesWholeAndOneCutShortIsSeenAsSuch() throws {
        var router = echoRouter()
        // 2 MiB in 1 KiB writes: far past the pipe's high-water mark, so the producer waits for the client.
        let piece = [UInt8](repeating: 0x62, count: 1024)
        router.get("/stream") { _, _ in
            var response = Response(status: 200, headers: [("Content-Type", "application/octet-stream")])
            response.stream = BodyStream { write in for _ in 0..<2048 { try write(piece) } }
            return response
        }
        router.get("/broken") { _, _ in
            var response = Response(status: 200, headers: [("Content-Type", "application/octet-stream")])
            response.stream = BodyStream { write in
                try write(piece)
                throw StreamCancelled()
            }
            return response
        }
        let server = try HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threadPoolSize: 2), responder: router)
        defer { server.stop() }
        let client = HTTPClient(host: "127.0.0.1", port: server.port)
        let whole = try client.send(method: "GET", path: "/stream")
        #expect(whole.status == 200 && whole.body.count == 2048 * 1024 && whole.body.allSatisfy { $0 == 0x62 })
        // Cut short: the last chunk never comes, so the client cannot take it for the whole body.
        #expect(throws: (any Error).self) { try HTTPClient(host: "127.0.0.1", port: server.port).send(method: "GET", path: "/broken") }
        // The server still serves.
        #expect(try HTTPClient(host: "127.0.0.1", port: server.port).send(method: "GET", path: "/echo/after").status == 200)
    }

    @Test func chunkedBodyWithinLimitIsAccepted() throws {
        let server = try startServer(maxBodyBytes: 100)
        defer { server.stop() }
        let reply = try rawExchange(port: server.port, Array("""
            POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
            5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n
            """.utf8), halfClose: false)
        #expect(reply.hasPrefix("HTTP/1.1 200"))
        #expect(reply.hasSuffix("hello world"))
    }

    @Test func chunkedBodyOverLimitIs413AndKeepsTheConnection() throws {
        let server = try startServer(maxBodyBytes: 100)
        defer { server.stop() }
        var request = Array("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
        for _ in 0..<5 {
            request += Array("32\r\n".utf8) + [UInt8](repeating: 0x62, count: 50) + Array("\r\n".utf8)
        }
        request += Array("0\r\n\r\n".utf8)
        request += Array("GET /echo/next HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8)
        let reply = try rawExchange(port: server.port, request, halfClose: false)
        #expect(reply.hasPrefix("HTTP/1.1 413"))
        #expect(reply.contains("\"code\":\"payload_too_large\""))
        #expect(reply.contains("path=/echo/next"), "the pipelined request after the 413 was answered")
    }

    @Test func endlessChunkedBodyIsCutOff() throws {
        let server = try startServer(maxBodyBytes: 100)
        defer { server.stop() }
        var request = Array("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
        let chunk = Array("10000\r\n".utf8) + [UInt8](repeating: 0x63, count: 65536) + Array("\r\n".utf8)
        for _ in 0..<40 { request += chunk }  // 2.5 MiB, never terminated
        let reply = try rawExchange(port: server.port, request)
        #expect(!reply.hasPrefix("HTTP/1.1 200"))
        #expect(try HTTPClient(host: "127.0.0.1", port: server.port).send(method: "GET", path: "/echo/x").status == 200)
    }

    @Test(arguments: ["POST", "PUT", "PATCH", "DELETE"])
    func declaredOversizedBodyIs413BeforeReading(method: String) throws {
        let server = try startServer(maxBodyBytes: 100)
        defer { server.stop() }
        // The body is never sent: the server must answer from the declared length alone.
        let reply = try rawExchange(port: server.port, Array("""
            \(method) /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n
            """.utf8), halfClose: false)
        #expect(reply.hasPrefix("HTTP/1.1 413"), "\(reply.prefix(60))")
        #expect(reply.contains("\"code\":\"payload_too_large\""))
    }

    @Test(arguments: MalformedRequest.all)
    func malformedRequestsDoNotHurtTheServer(_ malformed: MalformedRequest) throws {
        // libmicrohttpd 0.9.75 does not notice a half-close in the middle of a request (truncated
        // head or body); the connection timeout is what reaps such connections.
        let server = try startServer(connectionTimeoutSeconds: 1)
        defer { server.stop() }
        let reply = try rawExchange(port: server.port, malformed.bytes)
        // Refused with a 4xx, or the connection simply closed. libmicrohttpd itself answers an
        // unknown HTTP major version with 505, which is the status HTTP prescribes.
        let status = reply.isEmpty ? nil : Int(reply.dropFirst(9).prefix(3))
        if let status {
            #expect(reply.hasPrefix("HTTP/1."), "\(reply.prefix(80))")
            #expect((400..<500).contains(status) || (status == 505 && malformed.name == "HTTP/9.9")
                    || (status == 200 && malformed.lenientOK), "\(reply.prefix(80))")
        }
        let after = try HTTPClient(host: "127.0.0.1", port: server.port).send(method: "GET", path: "/echo/after")
        #expect(after.status == 200)
    }

    @Test func fiftyConcurrentClients() throws {
        let server = try startServer()
        defer { server.stop() }
        let clients = 50
        let requestsEach = 4
        let failures = Mutex<[String]>([])
        let successes = Atomic<Int>(0)
        let barrier = Barrier(count: clients)
        let port = server.port
        let threads = (0..<clients).map { index in
            spawnThread {
                let client = HTTPClient(host: "127.0.0.1", port: port)
                // Everybody connects first, then all 50 connections are open at the same time.
                do {
                    let first = try client.send(method: "GET", path: "/echo/\(index)-first")
                    if first.status == 200 { successes.add(1, ordering: .relaxed) }
                } catch {
                    failures.withLock { $0.append("client \(index): \(error)") }
                }
                barrier.wait()
                for request in 1..<requestsEach {
                    do {
                        let body = Array("client \(index) request \(request)".utf8)
                        let response = try client.send(method: "POST", path: "/echo", body: body)
                        if response.status == 200 && response.body == body {
                            successes.add(1, ordering: .relaxed)
                        } else {
                            failures.withLock { $0.append("client \(index): status \(response.status)") }
                        }
                    } catch {
                        failures.withLock { $0.append("client \(index): \(error)") }
                    }
                }
                if client.connectionsOpened != 1 {
                    failures.withLock { $0.append("client \(index) opened \(client.connectionsOpened) connections") }
                }
            }
        }
        for thread in threads { thread.join() }
        #expect(failures.withLock { $0 } == [])
        #expect(successes.load(ordering: .relaxed) == clients * requestsEach)
    }

    /// Issue 13 defect 8: one address may hold only `perAddressConnectionLimit` connections (slowloris
    /// from one host no longer takes every slot); others, and the same address once it lets go, are served.
    /// The per-connection memory (32 KiB) bounds the request head. Schemathesis found that 16 KiB
    /// turned a long percent-encoded path id (~20 KiB) into libmicrohttpd's HTML 414: such a path
    /// reaches the router (here a 200 from the echo route), a head past the limit gets 431, and the
    /// server goes on.
    @Test func requestHeadsFitTheConnectionMemory() throws {
        let server = try startServer()
        defer { server.stop() }
        let longId = String(repeating: "%F3%8A%B3%8F", count: 1700)  // 20,400 bytes, as Schemathesis sent
        let fits = "GET /echo/\(longId) HTTP/1.1\r\nHost: t\r\nX-Big: \(String(repeating: "b", count: 3000))\r\nConnection: close\r\n\r\n"
        #expect(try rawExchange(port: server.port, Array(fits.utf8), halfClose: false).hasPrefix("HTTP/1.1 200"))
        let tooBig = "GET /echo/x HTTP/1.1\r\nHost: t\r\nX-Big: \(String(repeating: "b", count: 40000))\r\nConnection: close\r\n\r\n"
        #expect(try rawExchange(port: server.port, Array(tooBig.utf8), halfClose: false).hasPrefix("HTTP/1.1 431"))
        #expect(try HTTPClient(host: "127.0.0.1", port: server.port).send(method: "GET", path: "/echo/x").status == 200)
    }

    @Test func connectionsPerAddressAreCapped() throws {
        let server = try HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threadPoolSize: 2, connectionTimeoutSeconds: 30,
                                                         perAddressConnectionLimit: 2),
                                    responder: echoRouter())
        defer { server.stop() }
        // Two idle connections, as a slowloris client holds them.
        let held = try (0..<2).map { _ in try connectedSocket(port: server.port) }
        var waited = 0
        while server.openConnections < 2, waited < 200 { usleep(10_000); waited += 1 }
        #expect(server.openConnections == 2)
        // A third from the same address is closed without an answer.
        #expect(try rawExchange(port: server.port, Array("GET /echo/x HTTP/1.1\r\nHost: t\r\n\r\n".utf8)) == "")
        // Once one is released, the address is served again.
        close(held[0])
        var answer = ""
        for _ in 0..<200 where !answer.hasPrefix("HTTP/1.1 200") {
            // Not half-closed: a client that shuts down its sending side before the answer may see the
            // connection closed instead (HTTPServer's documentation says why).
            answer = try rawExchange(port: server.port, Array("GET /echo/x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".utf8),
                                     halfClose: false)
            if !answer.hasPrefix("HTTP/1.1 200") { usleep(10_000) }
        }
        #expect(answer.hasPrefix("HTTP/1.1 200"))
        close(held[1])
    }

    @Test func stopIsIdempotentAndRefusesNewConnections() throws {
        let server = try startServer()
        let port = server.port
        #expect(try HTTPClient(host: "127.0.0.1", port: port).send(method: "GET", path: "/echo/x").status == 200)
        server.stop()
        server.stop()
        #expect(server.openConnections == 0)
        #expect(throws: HTTPError.self) {
            try HTTPClient(host: "127.0.0.1", port: port, timeoutSeconds: 5).send(method: "GET", path: "/echo/x")
        }
    }

    @Test func reusePortLetsTwoServersShareAPort() throws {
        let first = try HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threadPoolSize: 1, reusePort: true),
                                   responder: echoRouter())
        defer { first.stop() }
        let second = try HTTPServer(configuration: .init(host: "127.0.0.1", port: first.port, threadPoolSize: 1,
                                                         reusePort: true),
                                    responder: echoRouter())
        defer { second.stop() }
        #expect(second.port == first.port)
        #expect(try HTTPClient(host: "127.0.0.1", port: first.port).send(method: "GET", path: "/echo/x").status == 200)
    }

    @Test func occupiedPortWithoutReuseFails() throws {
        let first = try startServer()
        defer { first.stop() }
        #expect(throws: HTTPError.self) {
            try HTTPServer(configuration: .init(host: "127.0.0.1", port: first.port, threadPoolSize: 1),
                           responder: echoRouter())
        }
    }

    @Test func nonNumericHostIsRejected() {
        #expect(throws: HTTPError(.invalidAddress, "")) {
            try HTTPServer(configuration: .init(host: "localhost", port: 0), responder: echoRouter())
        }
    }
}

// MARK: - Helpers

struct MalformedRequest: Sendable, CustomTestStringConvertible {
    let name: String
    let bytes: [UInt8]
    /// Odd but parseable: a 200 is acceptable.
    var lenientOK = false
    var testDescription: String { name }

    static let all: [MalformedRequest] = [
        .init(name: "garbage", bytes: Array("GARBAGE\r\n\r\n".utf8)),
        .init(name: "no target", bytes: Array("GET\r\n\r\n".utf8)),
        .init(name: "HTTP/9.9", bytes: Array("GET / HTTP/9.9\r\nHost: x\r\n\r\n".utf8)),
        .init(name: "non-numeric Content-Length", bytes: Array("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n".utf8)),
        .init(name: "negative Content-Length", bytes: Array("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n".utf8)),
        .init(name: "conflicting Content-Length", bytes: Array("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd".utf8)),
        .init(name: "huge Content-Length", bytes: Array("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n".utf8)),
        .init(name: "bad chunk size", bytes: Array("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n".utf8)),
        .init(name: "header without colon", bytes: Array("GET /echo/a HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n".utf8)),
        .init(name: "control bytes and bad escapes in target",
              bytes: Array("GET /echo/\u{01}%00%zz HTTP/1.1\r\nHost: x\r\n\r\n".utf8), lenientOK: true),
        .init(name: "Content-Length with Transfer-Encoding", bytes: Array("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n".utf8)),
        .init(name: "100 KB header", bytes: Array(("GET /echo/a HTTP/1.1\r\nHost: x\r\nX-Long: " + String(repeating: "a", count: 100_000) + "\r\n\r\n").utf8)),
        .init(name: "binary", bytes: [0, 0xFF, 0xFE, 13, 10, 13, 10, 13, 10]),
        .init(name: "truncated head", bytes: Array("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Le".utf8)),
        .init(name: "truncated body", bytes: Array("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\nabc".utf8)),
    ]
}

/// A TCP connection to 127.0.0.1:`port` that sends nothing (the caller closes it).
func connectedSocket(port: Int) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    try #require(fd >= 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    try #require(connected == 0)
    return fd
}

/// Sends raw bytes, half-closes, and returns everything the server sent until it closed.
func rawExchange(port: Int, _ bytes: [UInt8], halfClose: Bool = true) throws -> String {
    let fd = try connectedSocket(port: port)
    defer { close(fd) }
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var offset = 0
    while offset < bytes.count {
        let sent = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
        if sent <= 0 { break }  // the server may refuse and close early
        offset += sent
    }
    if halfClose { shutdown(fd, Int32(SHUT_WR)) }
    var reply: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count <= 0 { break }
        reply += chunk[..<count]
    }
    return String(decoding: reply, as: UTF8.self)
}

/// A POSIX thread running `body` (swift-testing's tasks share a small pool; these must really block).
@discardableResult
func spawnThread(_ body: @escaping @Sendable () -> Void) -> StartedThread {
    guard let thread = startThread(body) else { preconditionFailure("pthread_create failed") }
    return thread
}


private final class Barrier: @unchecked Sendable {
    private var barrier = pthread_barrier_t()
    init(count: Int) { pthread_barrier_init(&barrier, nil, UInt32(count)) }
    func wait() { pthread_barrier_wait(&barrier) }
    deinit { pthread_barrier_destroy(&barrier) }
}

