/// A fixed-size pool of `PostgresConnection`s, created lazily.
///
/// - `withConnection` blocks until a connection is free or `acquireTimeout` passes (`.poolTimeout`).
/// - Before an idle connection is handed out it is probed without a round trip; one the server
///   closed (restart, `pg_terminate_backend`) is discarded and replaced.
/// - A connection returned in a broken state (`CONNECTION_BAD`, or timed out) is discarded, and
///   with it every idle connection (they most likely point at the same failed server).
/// - Every call has a deadline: `queryTimeout` per statement, and inside `PostgresDeadline.within`
///   the request's remaining budget, for the wait for a connection too (see `PostgresConnection`).
///   A timed-out call is `.timeout` and never retried (it may have run).
/// - `query`/`execute` on the pool retry once on a fresh connection when the statement failed
///   because the connection dropped. They run outside any transaction (autocommit), which is what
///   makes one retry acceptable; note that if the connection drops after the server committed but
///   before the reply arrived, a retried write runs twice, so write statements meant for this path
///   should be idempotent or guarded (`ON CONFLICT`, `WHERE … AND used_at IS NULL`).
public final class PostgresPool: Sendable {
    /// Counters for metrics.
    public struct Stats: Sendable, Hashable {
        /// Connections currently open (idle + in use + being opened).
        public var open: Int
        public var inUse: Int
        public var idle: Int
        /// Threads blocked waiting for a connection.
        public var waiting: Int
        public var maxConnections: Int
        /// Connections opened since the pool was created.
        public var created: Int
        /// Connections thrown away because they were broken.
        public var discarded: Int
        /// Acquisitions that gave up after `acquireTimeout`.
        public var timeouts: Int
        /// Statements retried after a dropped connection.
        public var retries: Int
    }

    private struct State {
        var idle: [PostgresConnection] = []
        var open = 0
        var inUse = 0
        var waiting = 0
        var created = 0
        var discarded = 0
        var timeouts = 0
        var retries = 0
        var closed = false
    }

    public let maxConnections: Int
    public let acquireTimeout: Duration
    /// Whether every connection is opened with `transactionPooling` (PgBouncer in transaction mode).
    public let transactionPooling: Bool
    /// The longest one statement may wait for the server (`PostgresConnection.queryTimeout`).
    public let queryTimeout: Duration
    private let url: String
    private let lock = ConditionLock()
    // Only touched with `lock` held.
    private nonisolated(unsafe) var state = State()
    let probeOnCheckout: Bool

    /// - Parameters:
    ///   - url: libpq URL, e.g. `postgresql://postgres@127.0.0.1:54329/latchkey`.
    ///   - maxConnections: the most connections ever open at once (≥ 1).
    ///   - acquireTimeout: how long `withConnection` waits for a free connection.
    ///   - transactionPooling: `url` is PgBouncer in `pool_mode = transaction`: connections keep no
    ///     session state (no named prepared statements, no `SET`; see `PostgresConnection`).
    ///   - queryTimeout: the longest one statement may wait for the server (then `.timeout`).
    public convenience init(url: String, maxConnections: Int = 10, acquireTimeout: Duration = .seconds(10),
                            transactionPooling: Bool = false, queryTimeout: Duration = PostgresConnection.defaultQueryTimeout) {
        self.init(url: url, maxConnections: maxConnections, acquireTimeout: acquireTimeout, probeOnCheckout: true,
                  transactionPooling: transactionPooling, queryTimeout: queryTimeout)
    }

    init(url: String, maxConnections: Int, acquireTimeout: Duration, probeOnCheckout: Bool, transactionPooling: Bool = false,
         queryTimeout: Duration = PostgresConnection.defaultQueryTimeout) {
        self.queryTimeout = queryTimeout
        self.url = url
        self.maxConnections = max(1, maxConnections)
        self.acquireTimeout = acquireTimeout
        self.probeOnCheckout = probeOnCheckout
        self.transactionPooling = transactionPooling
    }

    public var stats: Stats {
        lock.withLock {
            Stats(open: state.open, inUse: state.inUse, idle: state.idle.count, waiting: state.waiting,
                  maxConnections: maxConnections, created: state.created, discarded: state.discarded,
                  timeouts: state.timeouts, retries: state.retries)
        }
    }

    /// Lends a connection to `body` and takes it back afterwards (discarding it if it broke).
    /// A transaction left open by `body` is rolled back before the connection is reused.
    @discardableResult
    public func withConnection<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        let connection = try acquire()
        var healthy = false
        defer { release(connection, healthy: healthy) }
        do {
            let value = try body(connection)
            healthy = connection.isConnected
            return value
        } catch {
            healthy = connection.isConnected
            throw error
        }
    }

    /// `withConnection { try $0.transaction(isolation:, body) }`.
    @discardableResult
    public func transaction<T>(
        isolation: PostgresConnection.IsolationLevel? = nil, _ body: (PostgresConnection) throws -> T
    ) throws -> T {
        try withConnection { try $0.transaction(isolation: isolation, body) }
    }

    /// Runs one autocommit statement; retried once on a fresh connection if the connection dropped.
    @discardableResult
    public func query(_ sql: SQL) throws -> [Row] {
        try retryingOnConnectionLoss { try $0.query(sql) }
    }

    /// Runs one autocommit statement and returns the affected row count; retried once like `query`.
    @discardableResult
    public func execute(_ sql: SQL) throws -> Int {
        try retryingOnConnectionLoss { try $0.execute(sql) }
    }

    /// Closes idle connections and makes later acquisitions fail with `.poolClosed`. Connections
    /// in use close when they are returned.
    public func shutdown() {
        let idle = lock.withLock { () -> [PostgresConnection] in
            state.closed = true
            let idle = state.idle
            state.idle.removeAll()
            state.open -= idle.count
            lock.broadcast()
            return idle
        }
        _ = idle  // released here, outside the lock: deinit closes each socket
    }

    // MARK: - Internals

    private func retryingOnConnectionLoss<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        do {
            return try withConnection(body)
        } catch let error as PostgresError where error.code == .connection {
            lock.withLock { state.retries += 1 }
            return try withConnection(body)
        }
    }

    private func acquire() throws -> PostgresConnection {
        let deadline = PostgresDeadline.callDeadline(limit: acquireTimeout) ?? (ConditionLock.monotonicNanoseconds() &+ acquireTimeout.nanosecondsClamped)
        while true {
            enum Next { case reuse(PostgresConnection), open }
            let next: Next = try lock.withLock {
                while true {
                    if state.closed { throw PostgresError(.poolClosed, "the connection pool is shut down") }
                    if let connection = state.idle.popLast() {
                        state.inUse += 1
                        return .reuse(connection)
                    }
                    if state.open < maxConnections {
                        state.open += 1
                        state.inUse += 1
                        return .open
                    }
                    state.waiting += 1
                    let signalled = lock.wait(untilMonotonicNanoseconds: deadline)
                    state.waiting -= 1
                    if !signalled, state.idle.isEmpty, state.open >= maxConnections {
                        state.timeouts += 1
                        throw PostgresDeadline.noted(PostgresError(.poolTimeout, "no database connection free within \(acquireTimeout) (pool of \(maxConnections))"))
                    }
                }
            }
            switch next {
            case .reuse(let connection):
                if !probeOnCheckout || connection.probeIdle() { return connection }
                // The server closed it while idle; replace it.
                lock.withLock {
                    state.inUse -= 1
                    state.open -= 1
                    state.discarded += 1
                }
                continue
            case .open:
                do {
                    let connection = try PostgresConnection(url: url, transactionPooling: transactionPooling, queryTimeout: queryTimeout)
                    lock.withLock { state.created += 1 }
                    return connection
                } catch {
                    lock.withLock {
                        state.open -= 1
                        state.inUse -= 1
                        lock.signal()
                    }
                    throw error
                }
            }
        }
    }

    private func release(_ connection: PostgresConnection, healthy: Bool) {
        var keep = healthy
        // Left inside a transaction by hand-written BEGIN? Roll it back before reuse. (`transaction { }`
        // always closes its own before `withConnection`'s body returns.)
        if keep, connection.needsRollback() {
            keep = (try? connection.executeScript("ROLLBACK")) != nil && connection.isConnected
        }
        let flushed = lock.withLock { () -> [PostgresConnection] in
            state.inUse -= 1
            var flushed: [PostgresConnection] = []
            if keep, !state.closed {
                state.idle.append(connection)
            } else {
                state.open -= 1
                if !keep {
                    HostOrder.demote(url: url, host: connection.connectedHost)
                    state.discarded += 1
                    // A connection broke (the server restarted, failed over, or hangs): the idle ones
                    // most likely share its fate. They are dropped and re-opened on demand, rather than
                    // each costing a request its whole deadline to find out (a hung primary's kernel
                    // still answers, so the idle probe cannot tell).
                    flushed = state.idle
                    state.idle.removeAll()
                    state.open -= flushed.count
                    state.discarded += flushed.count
                }
            }
            // One connection came back (or one slot opened): one waiter can use it. Waking them all
            // would have every waiter fight for the mutex to find one connection; only a flush frees
            // several slots at once.
            if flushed.isEmpty { lock.signal() } else { lock.broadcast() }
            return flushed
        }
        _ = flushed  // closed here, outside the lock
    }
}
