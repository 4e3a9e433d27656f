import EventLoop
import LatchkeyServer
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A loopback TCP relay between a server the bench starts and its PostgreSQL that counts what
/// crosses the wire (PostgreSQL protocol v3, §55.7 "Message Formats"): each `ReadyForQuery` ('Z')
/// after the start-up is one round trip (the server answers every Sync and every simple Query
/// with exactly one), each `CommandComplete` ('C') one statement, and a `ReadyForQuery` back to
/// idle ('I') after work — a transaction block ending or an autocommit statement — one
/// transaction, a commit unless its tag was ROLLBACK or an `ErrorResponse` came first. These are
/// the figures the server's own code decides, read where no code of it can misreport them; they
/// need no `shared_preload_libraries` (pg_stat_statements does) and, unlike
/// `pg_stat_database`, they are current at once (a backend flushes its counters at most once a
/// second, and an idle one later still), so a single request can be measured.
///
/// The relay reads only the server-to-client stream; a client's SSLRequest or GSSENCRequest is
/// answered 'N' here (the bench's server then talks in clear to the relay, which is loopback), so
/// the upstream connection must not require TLS.
final class PostgresWireCounter: @unchecked Sendable {
    /// Counts since the relay started; `snapshot()` reads them all.
    struct Counts: Sendable, Equatable {
        var roundTrips = 0, statements = 0, commits = 0, rollbacks = 0, errors = 0, connections = 0
        /// Statements by the first word of their CommandComplete tag (`SELECT`, `INSERT`, `BEGIN`, …;
        /// a `WITH … DELETE … SELECT` is tagged by its outer statement, `SELECT`).
        var tags: [String: Int] = [:]

        static func - (a: Counts, b: Counts) -> Counts {
            a + Counts(roundTrips: -b.roundTrips, statements: -b.statements, commits: -b.commits, rollbacks: -b.rollbacks,
                       errors: -b.errors, connections: -b.connections, tags: b.tags.mapValues { -$0 })
        }

        static func + (a: Counts, b: Counts) -> Counts {
            Counts(roundTrips: a.roundTrips + b.roundTrips, statements: a.statements + b.statements, commits: a.commits + b.commits,
                   rollbacks: a.rollbacks + b.rollbacks, errors: a.errors + b.errors, connections: a.connections + b.connections,
                   tags: a.tags.merging(b.tags, uniquingKeysWith: +).filter { $0.value != 0 })
        }
    }

    let port: Int
    private let upstreamHost: String
    private let upstreamPort: Int
    private let listener: Int32
    private let counts = Mutex(Counts())
    private var acceptThread: StartedThread? = nil

    /// A relay on a free loopback port to `host:port`; nil (with the reason on stderr) when it cannot listen.
    init?(upstreamHost: String, upstreamPort: Int) {
        self.upstreamHost = upstreamHost
        self.upstreamPort = upstreamPort
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { printError("wire counter: socket() failed"); return nil }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        guard bound == 0, named == 0, listen(fd, 128) == 0 else { close(fd); printError("wire counter: cannot listen on loopback"); return nil }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        acceptThread = spawnThread { [self] in acceptLoop() }
    }

    /// `url` (a `postgresql://` URL naming host and port) with this relay's address in their place and
    /// `sslmode=disable`, or nil when the URL is not of that form (a Unix socket, key=value conninfo).
    static func parse(_ url: String) -> (host: String, port: Int, relayed: (Int) -> String)? {
        guard let scheme = ["postgresql://", "postgres://"].first(where: { url.hasPrefix($0) }) else { return nil }
        let rest = url.dropFirst(scheme.count)
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd], tail = rest[authorityEnd...]
        let userInfo = authority.lastIndex(of: "@").map { String(authority[...$0]) } ?? ""
        let hostPort = authority.lastIndex(of: "@").map { authority[authority.index(after: $0)...] } ?? authority
        let parts = hostPort.split(separator: ":")
        guard let host = parts.first.map(String.init), !host.isEmpty, !host.contains(","), parts.count <= 2 else { return nil }
        let port = parts.count == 2 ? Int(parts[1]) : 5432
        guard let port else { return nil }
        return (host, port, { relay in
            let joined = "\(scheme)\(userInfo)127.0.0.1:\(relay)\(tail)"
            return joined + (joined.contains("?") ? "&" : "?") + "sslmode=disable&gssencmode=disable"
        })
    }

    func snapshot() -> Counts { counts.withLock { $0 } }

    /// Waits until nothing has crossed for `quiet` seconds (at most `limit`): work a request set off
    /// after its answer (an outbox wake-up) is then counted with that request.
    func settle(quiet: Double = 0.02, limit: Double = 0.5) {
        let end = monotonicNow() + limit
        var last = snapshot()
        while monotonicNow() < end {
            usleep(UInt32(quiet * 1_000_000))
            let now = snapshot()
            if now == last { return }
            last = now
        }
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        acceptThread?.join()
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                return
            }
            guard let upstream = connectUpstream() else { close(client); continue }
            noDelay(client)
            counts.withLock { $0.connections += 1 }
            // One thread a direction. The server-to-client side owns both sockets: when its stream
            // ends it shuts both down (which wakes the other side's read), waits for it, then closes.
            let relay = spawnThread { [self] in
                let other = spawnThread { [self] in clientToServer(client, upstream) }
                serverToClient(upstream, client)
                shutdown(client, Int32(SHUT_RDWR))
                shutdown(upstream, Int32(SHUT_RDWR))
                other.join()
                close(client)
                close(upstream)
            }
            relay.detach()
        }
    }

    private func connectUpstream() -> Int32? {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(upstreamHost, String(upstreamPort), &hints, &list) == 0, let list else { return nil }
        defer { freeaddrinfo(list) }
        var cursor: UnsafeMutablePointer<addrinfo>? = list
        while let info = cursor {
            let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
            if fd >= 0 {
                if connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 { noDelay(fd); return fd }
                close(fd)
            }
            cursor = info.pointee.ai_next
        }
        return nil
    }

    private func noDelay(_ fd: Int32) {
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Start-up first: an SSLRequest (80877103) or GSSENCRequest (80877104) is answered 'N' here and
    /// the next start-up packet read; from then on bytes are copied unread.
    private func clientToServer(_ client: Int32, _ upstream: Int32) {
        defer { shutdown(upstream, Int32(SHUT_WR)) }
        while true {
            guard let head = readExactly(client, 8) else { return }
            let length = Int(head[0]) << 24 | Int(head[1]) << 16 | Int(head[2]) << 8 | Int(head[3])
            let code = UInt32(head[4]) << 24 | UInt32(head[5]) << 16 | UInt32(head[6]) << 8 | UInt32(head[7])
            if length == 8, code == 80_877_103 || code == 80_877_104 {
                guard writeAll(client, [UInt8(ascii: "N")]) else { return }
                continue
            }
            guard writeAll(upstream, head) else { return }
            break
        }
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(client, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0, writeAll(upstream, Array(buffer[0..<n])) else { return }
        }
    }

    /// Copies the server's messages to the client and counts them (see the type's comment).
    private func serverToClient(_ upstream: Int32, _ client: Int32) {
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        var started = false                 // the start-up's own ReadyForQuery has been seen
        var worked = false, failed = false  // since the last ReadyForQuery: a CommandComplete, an ErrorResponse
        var lastTag = ""
        var status = UInt8(ascii: "I")
        while true {
            let n = buffer.withUnsafeMutableBytes { read(upstream, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0, writeAll(client, Array(buffer[0..<n])) else { return }
            pending += buffer[0..<n]
            var offset = 0
            var delta = Counts()
            while pending.count - offset >= 5 {
                let type = pending[offset]
                let length = Int(pending[offset + 1]) << 24 | Int(pending[offset + 2]) << 16 | Int(pending[offset + 3]) << 8 | Int(pending[offset + 4])
                guard length >= 4, pending.count - offset >= 1 + length else { break }
                let body = (offset + 5)..<(offset + 1 + length)
                switch type {
                case UInt8(ascii: "C"):
                    delta.statements += 1
                    worked = true
                    lastTag = String(decoding: pending[body].prefix(while: { $0 != 0 && $0 != UInt8(ascii: " ") }), as: UTF8.self)
                    delta.tags[lastTag, default: 0] += 1
                case UInt8(ascii: "E"):
                    delta.errors += 1
                    failed = true
                case UInt8(ascii: "Z"):
                    let now = body.isEmpty ? UInt8(ascii: "I") : pending[body.lowerBound]
                    if started {
                        delta.roundTrips += 1
                        // Back to idle after a block ('T'/'E' before) or after an autocommit statement.
                        if now == UInt8(ascii: "I"), status != UInt8(ascii: "I") || worked {
                            if failed || lastTag == "ROLLBACK" { delta.rollbacks += 1 } else { delta.commits += 1 }
                        }
                    }
                    started = true
                    status = now
                    if now == UInt8(ascii: "I") { failed = false }
                    worked = false
                    lastTag = ""
                default: break
                }
                offset += 1 + length
            }
            pending.removeFirst(offset)
            if delta != Counts() {
                counts.withLock { $0 = $0 + delta }
            }
        }
    }

    private func readExactly(_ fd: Int32, _ count: Int) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = out.withUnsafeMutableBytes { read(fd, $0.baseAddress! + got, count - got) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return nil }
            got += n
        }
        return out
    }

    private func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return false }
            offset += n
        }
        return true
    }
}
