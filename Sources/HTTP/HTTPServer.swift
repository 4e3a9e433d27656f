import CMicroHTTPD
import Glibc
import Synchronization
public import EventLoop

/// An HTTP/1.1 server on libmicrohttpd. This file and ServerCore.swift are the only Swift code that
/// calls libmicrohttpd.
///
/// libmicrohttpd reads requests fully (up to `maxBodyBytes`) on one polling thread; each complete
/// request is handed to the first free thread of a `WorkerPool`, which runs the `Responder` while
/// its connection is suspended, then resumes it with the response. A body that is declared or turns
/// out to be larger gets 413 `payload_too_large` without being buffered, and the connection is closed.
/// With `eventLoops`, each loop drives a daemon of its own instead of a polling thread, and a
/// `LoopResponder` answers what it takes on the loop (`ServerCore.dispatch`).
///
/// A client that shuts down its sending side (TCP half-close) before it has read the answer may
/// have the connection closed instead: libmicrohttpd 0.9.75 reads once more when a connection
/// resumes, and takes the FIN it finds as the client going away. HTTP clients (browsers, curl,
/// every HTTP library) keep the connection open until the response has arrived.
public final class HTTPServer: Sendable {
    public struct Configuration: Sendable {
        /// Numeric IPv4 or IPv6 address; "" binds every IPv4 address.
        public var host: String
        /// 0 picks an ephemeral port; read it back from `HTTPServer.port`.
        public var port: Int
        /// Threads that run the responder, all taking requests from one queue (libmicrohttpd's
        /// network I/O runs on one more thread of its own).
        public var threadPoolSize: Int
        /// Idle connections are closed after this many seconds (0 = never).
        public var connectionTimeoutSeconds: Int
        /// Maximum simultaneous connections (spread over the worker threads).
        public var connectionLimit: Int
        /// Maximum simultaneous connections from one client address (0 = no per-address cap).
        /// Behind a reverse proxy every connection comes from the proxy: leave it 0 there.
        public var perAddressConnectionLimit: Int
        /// Largest request body handed to the responder.
        public var maxBodyBytes: Int
        /// A larger limit for the routes that take whole files, by `"<METHOD> <path as sent>"`
        /// (`"POST /admin/v1/import"`); every other request keeps `maxBodyBytes`.
        public var largeBodies: [String: Int]
        /// SO_REUSEPORT, so several processes can listen on the same port.
        public var reusePort: Bool
        /// libmicrohttpd's memory per connection: the request line and headers must fit (a larger
        /// head gets libmicrohttpd's own 414 or 431), bodies stream through it. 32 KiB, its default:
        /// with 16 KiB, long percent-encoded path ids get an HTML 414 instead of the API's problem
        /// answer (libmicrohttpd zeroes this memory per request, so smaller would be cheaper, but
        /// not at that price).
        public var connectionMemoryBytes: Int
        /// Event loops (`EventLoop`), each with a libmicrohttpd daemon of its own on the same port
        /// (SO_REUSEPORT spreads the connections): a `LoopResponder`'s requests are answered on
        /// their loop's thread, the rest still on the worker threads. 0: one daemon with its own
        /// polling thread, every request on a worker thread.
        public var eventLoops: Int

        public init(host: String = "127.0.0.1", port: Int = 8080, threadPoolSize: Int = HTTPServer.processorCount,
                    connectionTimeoutSeconds: Int = 30, connectionLimit: Int = 1000, perAddressConnectionLimit: Int = 0,
                    maxBodyBytes: Int = 65536, reusePort: Bool = false, connectionMemoryBytes: Int = 32 * 1024,
                    largeBodies: [String: Int] = [:], eventLoops: Int = 0) {
            self.host = host
            self.port = port
            self.threadPoolSize = threadPoolSize
            self.connectionTimeoutSeconds = connectionTimeoutSeconds
            self.connectionLimit = connectionLimit
            self.perAddressConnectionLimit = perAddressConnectionLimit
            self.maxBodyBytes = maxBodyBytes
            self.largeBodies = largeBodies
            self.reusePort = reusePort
            self.connectionMemoryBytes = connectionMemoryBytes
            self.eventLoops = eventLoops
        }
    }

    /// Online processors, the default thread-pool size.
    public static var processorCount: Int { max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN))) }

    public let configuration: Configuration
    /// The port actually bound (differs from `configuration.port` when that was 0).
    public let port: Int

    private let cores: [ServerCore]
    private let workers: WorkerPool
    private let loops: [EventLoop]
    private let daemons: Mutex<[DaemonHandle]?>

    /// Binds and starts serving immediately.
    public init(configuration: Configuration, responder: some Responder) throws(HTTPError) {
        guard (0...65535).contains(configuration.port) else {
            throw HTTPError(.invalidAddress, "port \(configuration.port) is out of range")
        }
        let workers = WorkerPool(threads: configuration.threadPoolSize)
        let loops = (0..<max(0, configuration.eventLoops)).map { _ in EventLoop() }
        let onLoop = loops.isEmpty ? nil : responder as? any LoopResponder
        var cores: [ServerCore] = []
        var started: [DaemonHandle] = []
        var port = configuration.port
        func undo() {
            for handle in started { MHD_stop_daemon(handle.pointer) }
            workers.close()
        }
        for index in 0..<max(1, loops.count) {
            let loop = loops.isEmpty ? nil : loops[index]
            let core = ServerCore(responder: responder, loopResponder: onLoop, maxBodyBytes: max(0, configuration.maxBodyBytes),
                                  largeBodies: configuration.largeBodies.mapValues { max(0, $0) }, workers: workers, loop: loop)
            let context = Unmanaged.passUnretained(core).toOpaque()
            var error: Int32 = 0
            let daemon: OpaquePointer? = configuration.host.withCString { host in
                var config = latchkey_mhd_config()
                config.host = host
                config.port = UInt16(port)
                config.thread_pool_size = 1
                config.allow_suspend_resume = 1
                config.external_polling = loop == nil ? 0 : 1
                config.connection_timeout_seconds = UInt32(clamping: configuration.connectionTimeoutSeconds)
                // Each loop's daemon takes its share of the limit.
                config.connection_limit = UInt32(clamping: max(1, configuration.connectionLimit / max(1, loops.count)))
                // The per-address cap too, rounded up: one address's connections are spread over
                // the daemons by the kernel, and together they must not pass the cap by more than
                // a rounding.
                let perAddress = max(0, configuration.perAddressConnectionLimit)
                config.per_ip_connection_limit = UInt32(clamping: (perAddress + max(1, loops.count) - 1) / max(1, loops.count))
                config.reuse_port = configuration.reusePort || loops.count > 1 ? 1 : 0
                config.connection_memory_limit = max(4096, configuration.connectionMemoryBytes)
                return latchkey_mhd_start(&config, accessHandler, context, requestCompleted, context, &error)
            }
            guard let daemon else {
                undo()
                if error == Int32(LATCHKEY_MHD_BAD_HOST) {
                    throw HTTPError(.invalidAddress, "host must be a numeric IP address: \(configuration.host)")
                }
                throw HTTPError(.startFailed, "libmicrohttpd could not listen on \(configuration.host):\(configuration.port)")
            }
            if index == 0 {
                let bound = Int(latchkey_mhd_bound_port(daemon))
                if bound != 0 { port = bound }
            }
            core.daemon.store(UInt(bitPattern: Int(bitPattern: daemon)), ordering: .releasing)
            cores.append(core)
            started.append(DaemonHandle(pointer: daemon))
        }
        for (loop, handle) in zip(loops, started) { Self.drive(handle, on: loop) }
        self.configuration = configuration
        self.port = port
        self.cores = cores
        self.workers = workers
        self.loops = loops
        self.daemons = Mutex(started)
    }

    /// Starts `loop` and has it run the daemon whenever the daemon's epoll descriptor is readable
    /// or its nearest timeout is due.
    private static func drive(_ handle: DaemonHandle, on loop: EventLoop) {
        loop.start()
        loop.execute {
            let descriptor = latchkey_mhd_epoll_fd(handle.pointer)
            loop.watch(descriptor) { _ = MHD_run(handle.pointer) }
            loop.onEveryTurn {
                let due = latchkey_mhd_timeout_ms(handle.pointer)
                guard due == 0 else { return due }
                _ = MHD_run(handle.pointer)
                return latchkey_mhd_timeout_ms(handle.pointer)
            }
        }
    }

    /// Connections open right now (0 once stopped); for metrics and tests.
    public var openConnections: Int {
        daemons.withLock { handles in handles.map { $0.reduce(0) { $0 + Int(latchkey_mhd_connection_count($1.pointer)) } } ?? 0 }
    }

    /// Request contexts not yet freed by libmicrohttpd's completion callback; 0 once stopped.
    var pendingRequestContexts: Int { cores.reduce(0) { $0 + $1.liveExchanges.load(ordering: .relaxed) } }

    /// Stops accepting, closes every connection and joins the worker threads. Idempotent.
    public func stop() {
        let handles = daemons.withLock { state -> [DaemonHandle] in
            defer { state = nil }
            return state ?? []
        }
        // Every request a worker holds is answered and its connection resumed before the daemon
        // goes (libmicrohttpd must not be left with suspended connections); what arrives meanwhile
        // is answered on the polling thread itself. Requests on a loop finish on it first.
        workers.close()
        if !loops.isEmpty {
            var waited = 0
            while cores.contains(where: { $0.onLoop.load(ordering: .acquiring) > 0 }), waited < 10_000 {
                usleep(1000)
                waited += 1
            }
            for loop in loops { loop.stop() }
        }
        for handle in handles { MHD_stop_daemon(handle.pointer) }
    }

    deinit {
        // Stored properties (`core`, whose unretained pointer libmicrohttpd holds) are released
        // only after this body, i.e. after the daemon has stopped.
        stop()
    }
}

/// The daemon pointer; only ever used under the server's mutex or after taking it out.
private struct DaemonHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// How much of an oversized streamed (chunked) body is read and dropped so that the client can
/// still get its 413; past this the connection is simply closed. Only a declared Content-Length
/// lets the server refuse before reading, because libmicrohttpd 0.9.75 accepts a response only
/// before the body or after all of it.
private let overflowDiscardBytes = 1 << 20

private func payloadTooLarge(_ limit: Int) -> Response {
    Response.problem(status: 413, code: "payload_too_large",
                     detail: "The request body exceeds the limit of \(limit) bytes.")
}

private let accessHandler: MHD_AccessHandlerCallback = { cls, connection, url, method, _, uploadData, uploadDataSize, conCls in
    guard let cls, let connection, let url, let method, let uploadDataSize, let conCls else { return .NO }
    let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()

    guard let state = conCls.pointee else {
        // First call: headers only. Never respond here to a normal request — in 0.9.75 a response
        // queued on the first call forces `Connection: close` — except to refuse a declared
        // oversized body, where closing instead of reading it is what we want.
        let exchange = Exchange()
        conCls.pointee = Unmanaged.passRetained(exchange).toOpaque()
        core.liveExchanges.add(1, ordering: .relaxed)
        exchange.headers = values(of: connection, kind: .HEADER_KIND, decodeQuery: false)
        exchange.limit = core.largeBodies.isEmpty ? core.maxBodyBytes
            : core.largeBodies[String(cString: method) + " " + String(cString: url)] ?? core.maxBodyBytes
        switch framing(of: exchange.headers) {
        case .ambiguous:
            // Several different Content-Lengths, or one next to Transfer-Encoding: the body's end
            // is ambiguous (RFC 9112 §6.3), a request-smuggling vector. Refuse and close.
            exchange.responded = true
            return queue(.problem(status: 400, code: "invalid_request",
                                  detail: "Ambiguous message framing (Content-Length / Transfer-Encoding).",
                                  headers: [("Connection", "close")]), on: connection)
        case .length(let length) where length > UInt64(exchange.limit):
            exchange.responded = true
            return queue(payloadTooLarge(exchange.limit), on: connection)
        case .length(let length):
            exchange.body.reserveCapacity(Int(length))
        case .none:
            break
        }
        return .YES
    }

    let exchange = Unmanaged<Exchange>.fromOpaque(state).takeUnretainedValue()
    let chunk = uploadDataSize.pointee
    if chunk > 0 {
        uploadDataSize.pointee = 0
        exchange.received = exchange.received &+ chunk
        if exchange.responded || exchange.overflowed {
            return exchange.received > exchange.limit + overflowDiscardBytes ? .NO : .YES
        }
        guard let uploadData, chunk <= exchange.limit - exchange.body.count else {
            exchange.overflowed = true
            exchange.body = []
            return .YES
        }
        uploadData.withMemoryRebound(to: UInt8.self, capacity: chunk) { bytes in
            exchange.body.append(contentsOf: UnsafeBufferPointer(start: bytes, count: chunk))
        }
        return .YES
    }
    if exchange.responded {
        // Called again after a worker resumed the connection: send what it answered.
        if let (response, pipe) = exchange.answer.withLock({ answer in defer { answer = nil }; return answer }) {
            return queue(response, on: connection, pipe: pipe)
        }
        return .YES
    }
    exchange.responded = true
    if exchange.overflowed { return queue(payloadTooLarge(exchange.limit), on: connection) }

    let request = Request(method: String(cString: method), rawPath: String(cString: url),
                          query: values(of: connection, kind: .GET_ARGUMENT_KIND, decodeQuery: true),
                          headers: exchange.headers, body: exchange.body, remoteAddress: clientAddress(connection))
    exchange.body = []
    // Suspended before the job is queued, so a worker can never resume it first. libmicrohttpd
    // calls this handler again once the worker has resumed it (the branch above).
    let suspended = SuspendedConnection(pointer: connection)
    MHD_suspend_connection(connection)
    core.dispatch(request, exchange, suspended)
    return .YES
}

private let requestCompleted: MHD_RequestCompletedCallback = { cls, _, conCls, _ in
    guard let cls, let conCls, let state = conCls.pointee else { return }
    Unmanaged<Exchange>.fromOpaque(state).release()
    conCls.pointee = nil
    Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue().liveExchanges.subtract(1, ordering: .relaxed)
}

private func queue(_ response: Response, on connection: OpaquePointer, pipe: StreamPipe? = nil) -> MHD_Result {
    let created: OpaquePointer?
    if let pipe {
        let reading = Unmanaged.passRetained(StreamReading(pipe: pipe, connection: connection)).toOpaque()
        created = MHD_create_response_from_callback(UInt64.max, 64 * 1024, streamReader, reading, streamDone)
        if created == nil { Unmanaged<StreamReading>.fromOpaque(reading).release(); pipe.cancel() }
    } else {
        created = response.body.withUnsafeBytes { bytes in
            MHD_create_response_from_buffer(bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress),
                                            .RESPMEM_MUST_COPY)
        }
    }
    guard let created else { return .NO }
    defer { MHD_destroy_response(created) }
    for (name, value) in response.headers where isSendable(name: name, value: value) {
        _ = MHD_add_response_header(created, name, value)
    }
    // 1xx would leave libmicrohttpd waiting for a final response: treat it as a responder bug.
    let status = (200...599).contains(response.status) ? UInt32(response.status) : 500
    return MHD_queue_response(connection, status, created)
}

/// A streamed body's reader: libmicrohttpd's `cls` for the content callbacks.
private final class StreamReading: @unchecked Sendable {
    let pipe: StreamPipe
    let connection: OpaquePointer
    init(pipe: StreamPipe, connection: OpaquePointer) { self.pipe = pipe; self.connection = connection }
}

/// Bytes the producer wrote; none yet → the connection suspended until it writes (returning 0).
private let streamReader: MHD_ContentReaderCallback = { cls, _, buffer, max in
    guard let cls, let buffer else { return -2 }
    let reading = Unmanaged<StreamReading>.fromOpaque(cls).takeUnretainedValue()
    switch reading.pipe.read(into: buffer, max: max, suspend: { MHD_suspend_connection(reading.connection) }) {
    case .bytes(let n): return n
    case .wait: return 0
    case .end: return -1    // MHD_CONTENT_READER_END_OF_STREAM
    case .failed: return -2 // MHD_CONTENT_READER_END_WITH_ERROR: the client sees the body cut short
    }
}

/// The connection is done with the body: a producer still writing is stopped.
private let streamDone: MHD_ContentReaderFreeCallback = { cls in
    guard let cls else { return }
    let reading = Unmanaged<StreamReading>.fromOpaque(cls).takeRetainedValue()
    reading.pipe.cancel()
}

private final class ValueCollector {
    var pairs: [(String, String)] = []
    let decodeQuery: Bool
    init(decodeQuery: Bool) { self.decodeQuery = decodeQuery }
}

private func values(of connection: OpaquePointer, kind: MHD_ValueKind, decodeQuery: Bool) -> [(String, String)] {
    let collector = ValueCollector(decodeQuery: decodeQuery)
    withExtendedLifetime(collector) {
        _ = MHD_get_connection_values_n(connection, kind, { cls, _, key, keySize, value, valueSize in
            guard let cls, let key else { return .YES }
            let collector = Unmanaged<ValueCollector>.fromOpaque(cls).takeUnretainedValue()
            let name = string(key, keySize)
            let text = value.map { string($0, valueSize) } ?? ""
            if collector.decodeQuery {
                // The unescape callback leaves arguments raw; decode them here, `+` as space.
                collector.pairs.append((PercentDecoding.decode(name[...], plusAsSpace: true),
                                        PercentDecoding.decode(text[...], plusAsSpace: true)))
            } else {
                collector.pairs.append((name, text))
            }
            return .YES
        }, Unmanaged.passUnretained(collector).toOpaque())
    }
    return collector.pairs
}

private func string(_ pointer: UnsafePointer<CChar>, _ count: Int) -> String {
    pointer.withMemoryRebound(to: UInt8.self, capacity: count) {
        String(decoding: UnsafeBufferPointer(start: $0, count: count), as: UTF8.self)
    }
}

private func clientAddress(_ connection: OpaquePointer) -> String? {
    withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buffer -> String? in
        guard let base = buffer.baseAddress,
              latchkey_mhd_client_address(connection, base, buffer.count) == 0 else { return nil }
        return String(cString: base)
    }
}
