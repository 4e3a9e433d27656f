import CLibPQ
import Glibc
import Synchronization

/// A NOTIFY received on a channel this listener LISTENs to.
public struct PostgresNotification: Sendable, Hashable {
    public let channel: String
    public let payload: String
    /// Backend pid of the session that sent it.
    public let senderPID: Int32
}

/// One dedicated libpq connection that LISTENs and waits for NOTIFY (PostgreSQL docs, "Asynchronous
/// Notification": `PQsocket` + `poll`, then `PQconsumeInput` and `PQnotifies`). Separate from the
/// pool on purpose: a pooled connection is reused by other work and would miss or swallow
/// notifications. Meant to be driven by one thread; calls are serialised by a lock anyway.
///
/// LISTEN is session state: through PgBouncer in transaction mode it lands on whichever server
/// session ran it and notifications never reach this connection. Give the listener a URL straight
/// to PostgreSQL (or PgBouncer in session mode), or poll instead.
public final class PostgresListener: Sendable {
    private struct State: ~Copyable {
        let handle: OpaquePointer  // PGconn *
        /// Set when a ping timed out: the connection is given up.
        let fatalFlag: UnsafeMutablePointer<Int32>
        init(handle: OpaquePointer) {
            self.handle = handle
            fatalFlag = .allocate(capacity: 1)
            fatalFlag.initialize(to: 0)
        }
        deinit {
            PQfinish(handle)
            fatalFlag.deallocate()
        }
    }

    private let state: Mutex<State>
    public let channels: [String]
    private let url: String

    /// Connects and LISTENs on every channel (lower-case letters, digits and `_` only); the LISTEN
    /// waits at most `timeout`.
    public init(url: String, channels: [String], timeout: Duration = PostgresConnection.defaultQueryTimeout) throws {
        for channel in channels { try Self.check(channel) }
        state = Mutex(State(handle: try PostgresConnection.openHandle(url: url)))
        self.channels = channels
        self.url = url
        let deadline = ConditionLock.monotonicNanoseconds() &+ timeout.nanosecondsClamped
        try state.withLock { s in
            for channel in channels {
                PQclear(try Exchange.run(s.handle, s.fatalFlag, deadline: deadline) { PQsendQuery($0, "LISTEN \"\(channel)\"") })
            }
        }
    }

    /// Channel names are spliced into `LISTEN`, so only `[a-z0-9_]+` (at most 63 bytes, an identifier) passes.
    private static func check(_ channel: String) throws {
        guard !channel.isEmpty, channel.utf8.count <= 63,
              channel.utf8.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x5F }) else {
            throw PostgresError(.invalidArgument, "channel names are [a-z0-9_]+")
        }
    }

    /// LISTENs on one more channel (named as in `init`), waiting at most `timeout`.
    public func listen(_ channel: String, timeout: Duration) throws {
        try Self.check(channel)
        let deadline = ConditionLock.monotonicNanoseconds() &+ timeout.nanosecondsClamped
        try state.withLock { s in
            PQclear(try Exchange.run(s.handle, s.fatalFlag, deadline: deadline) { PQsendQuery($0, "LISTEN \"\(channel)\"") })
        }
    }

    /// NOTIFY `channel` with `payload` from this connection, a round trip that must come back within
    /// `timeout` (else `.timeout`, and the connection is given up, as with `ping`). Sent to a channel
    /// this listener LISTENs to, the notification comes back to it: PostgreSQL delivers notifications
    /// in the order their transactions committed, so once it is back, every notification committed
    /// before it was sent has been received too (a heartbeat that proves the feed, not just the
    /// socket). Its transaction commits asynchronously (`synchronous_commit` off for it alone): a
    /// heartbeat needs no durable commit, so it never waits for a WAL flush.
    public func notify(_ channel: String, payload: String, timeout: Duration) throws {
        // The leading comment names the connection in pg_stat_activity as a listener's (the
        // failover test and operators count LISTEN sessions by it), whatever it last sent.
        let sql: SQL = "-- latchkey: LISTEN heartbeat\nSELECT set_config('synchronous_commit', 'off', true), pg_notify(\(channel), \(payload))"
        let parameters = WireParameters(sql.binds)
        let deadline = ConditionLock.monotonicNanoseconds() &+ timeout.nanosecondsClamped
        try state.withLock { s in
            PQclear(try Exchange.run(s.handle, s.fatalFlag, deadline: deadline) { h in
                parameters.withValuePointers { values in
                    PQsendQueryParams(h, sql.text, Int32(parameters.count), parameters.types, values, parameters.lengths, parameters.formats, 0)
                }
            })
        }
    }

    /// A round trip (an empty query) that must come back within `timeout`, else `.timeout` (and
    /// the connection is given up). A hung server (SIGSTOP, a partition its kernel still answers
    /// TCP keepalives for) looks exactly like a quiet channel; only this tells them apart.
    /// Notifications that arrive meanwhile are kept for the next `wait`.
    public func ping(timeout: Duration) throws {
        let deadline = ConditionLock.monotonicNanoseconds() &+ timeout.nanosecondsClamped
        try state.withLock { s in
            defer {
                if s.fatalFlag.pointee != 0 || PQstatus(s.handle) != CONNECTION_OK {
                    let host = "\(PQhost(s.handle).map { String(cString: $0) } ?? ""):\(PQport(s.handle).map { String(cString: $0) } ?? "")"
                    HostOrder.demote(url: url, host: host)
                }
            }
            // An empty query (a comment): named so that pg_stat_activity still shows what the session is.
            PQclear(try Exchange.run(s.handle, s.fatalFlag, deadline: deadline) { PQsendQuery($0, "-- latchkey: LISTEN keep-alive") })
        }
    }

    /// Waits up to `timeout` seconds and returns what arrived (possibly nothing). Throws
    /// `.connection` once the connection is gone: the caller reconnects, and must assume it
    /// missed notifications in between.
    public func wait(timeout: Double) throws -> [PostgresNotification] {
        try state.withLock { s throws -> [PostgresNotification] in
            guard s.fatalFlag.pointee == 0 else { throw PostgresError(.connection, "the listening connection was given up") }
            var out = try Self.drain(s.handle)
            guard out.isEmpty else { return out }
            let fd = PQsocket(s.handle)
            guard fd >= 0 else { throw PostgresError(.connection, "the listening connection has no socket") }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&p, 1, Int32(max(0, min(timeout, 3600)) * 1000))
            if ready < 0 && errno != EINTR { throw PostgresError(.connection, "poll failed (errno \(errno))") }
            if ready > 0 { out = try Self.drain(s.handle) }
            return out
        }
    }

    /// The server process serving the LISTEN.
    public var backendPID: Int32 { state.withLock { PQbackendPID($0.handle) } }

    public var isConnected: Bool { state.withLock { PQstatus($0.handle) == CONNECTION_OK && $0.fatalFlag.pointee == 0 } }

    private static func drain(_ handle: OpaquePointer) throws -> [PostgresNotification] {
        guard PQconsumeInput(handle) == 1, PQstatus(handle) == CONNECTION_OK else {
            throw PostgresError(.connection, "the listening connection was lost")
        }
        var out: [PostgresNotification] = []
        while let n = PQnotifies(handle) {
            out.append(PostgresNotification(channel: String(cString: n.pointee.relname),
                                            payload: n.pointee.extra.map { String(cString: $0) } ?? "",
                                            senderPID: n.pointee.be_pid))
            PQfreemem(n)
        }
        return out
    }
}
