public import EventLoop

/// The PostgreSQL connections of one event loop, lent to the tasks running on it one at a time:
/// no lock, because only the loop's thread touches them. A task that finds every connection lent
/// suspends until one comes back (first come, first served) or its deadline passes — the request's
/// budget, at most `acquireTimeout` — and then fails `.poolTimeout`, as the worker pool's would; it
/// never blocks the thread.
///
/// Connections are opened on first need, on a thread of their own (`EventLoop.offload`: libpq's
/// connect blocks, up to `connect_timeout` per host), and switched to non-blocking mode. One
/// that broke, or that comes back inside a transaction, is closed instead of kept (closing it
/// rolls that transaction back on the server).
public final class LoopConnections: @unchecked Sendable {
    public let loop: EventLoop
    public let maxConnections: Int
    private let url: String
    private let transactionPooling: Bool
    private let queryTimeout: Duration
    public let acquireTimeout: Duration
    // The loop's thread only.
    private var idle: [PostgresConnection] = []
    private var open = 0
    /// Tasks waiting for a connection, first come first served; resumed with true to try again,
    /// false when their deadline passed first.
    private var waiting: [(continuation: UnsafeContinuation<Bool, Never>, deadline: UInt64?)] = []
    private var expiring = false
    private var closed = false

    public init(loop: EventLoop, url: String, maxConnections: Int, transactionPooling: Bool = false,
                queryTimeout: Duration = PostgresConnection.defaultQueryTimeout, acquireTimeout: Duration = .seconds(10)) {
        self.loop = loop
        self.url = url
        self.maxConnections = max(1, maxConnections)
        self.transactionPooling = transactionPooling
        self.queryTimeout = queryTimeout
        self.acquireTimeout = acquireTimeout
    }

    /// Lends a connection to `body` (on the loop) and takes it back afterwards.
    public func withConnection<T>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        let connection = try await acquire()
        do {
            let value = try await body(connection)
            release(connection)
            return value
        } catch {
            release(connection)
            throw error
        }
    }

    /// Closes the idle connections (and the rest as they come back): on the loop while it runs,
    /// here once it has ended.
    public func close() {
        if loop.hasEnded { return closeIdle() }
        loop.execute { self.closeIdle() }
    }

    private func closeIdle() {
        closed = true
        if loop.isCurrent { for connection in idle { loop.forget(connection.socket) } }
        open -= idle.count
        idle.removeAll()
    }

    /// Connections open now and lent now (for tests).
    public var counts: (open: Int, idle: Int) { (open, idle.count) }

    private func acquire() async throws -> PostgresConnection {
        precondition(loop.isCurrent, "LoopConnections are used from tasks running on their loop")
        while true {
            if let connection = idle.popLast() { return connection }
            if open < maxConnections {
                open += 1
                do {
                    let (url, transactionPooling, queryTimeout) = (url, transactionPooling, queryTimeout)
                    let connection = try await EventLoop.offload {
                        Result { try PostgresConnection(url: url, transactionPooling: transactionPooling, queryTimeout: queryTimeout) }
                    }.get()
                    guard connection.makeNonBlocking() else {
                        throw PostgresError(.connection, "libpq would not switch the connection to non-blocking mode")
                    }
                    return connection
                } catch {
                    open -= 1
                    wakeOne()
                    throw PostgresDeadline.noted(error as? PostgresError ?? PostgresError(.connection, "\(error)"))
                }
            }
            let deadline = PostgresDeadline.callDeadline(limit: acquireTimeout)
            expireOnEveryTurn()
            guard await withUnsafeContinuation({ waiting.append(($0, deadline)) }) else {
                throw PostgresDeadline.noted(PostgresError(.poolTimeout,
                    "no database connection free on this event loop within \(acquireTimeout) (\(maxConnections) per loop)"))
            }
        }
    }

    /// From the first wait on: after every turn of the loop, the waits past their deadline end,
    /// and the loop sleeps no longer than the next deadline.
    private func expireOnEveryTurn() {
        guard !expiring else { return }
        expiring = true
        loop.onEveryTurn { [weak self] in
            guard let self, !waiting.isEmpty else { return -1 }
            let now = EventLoop.monotonicNanoseconds()
            var sleep: Int32 = -1
            waiting.removeAll { waiter in
                guard let deadline = waiter.deadline else { return false }
                if deadline <= now {
                    waiter.continuation.resume(returning: false)
                    return true
                }
                let limit = EventLoop.milliseconds(until: deadline, from: now)
                if sleep < 0 || limit < sleep { sleep = limit }
                return false
            }
            return sleep
        }
    }

    private func release(_ connection: PostgresConnection) {
        if !closed, connection.isConnected, !connection.needsRollback() {
            idle.append(connection)
        } else {
            loop.forget(connection.socket)
            open -= 1
        }
        wakeOne()
    }

    private func wakeOne() {
        guard !waiting.isEmpty else { return }
        waiting.removeFirst().continuation.resume(returning: true)
    }
}
