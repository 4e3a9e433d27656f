import CLibPQ
public import EventLoop
import Glibc
import Synchronization

extension PostgresConnection {
    /// `pipeline(_:)` for a task running on `loop`: the statements and their Sync are sent with
    /// libpq's non-blocking calls, and while PostgreSQL works the task is suspended on the loop's
    /// epoll set instead of a thread blocking in `poll`. The same statements, rider, round-trip
    /// count, deadline and prepared-statement cache as `pipeline(_:)`.
    ///
    /// The connection must be this task's alone for the call (`LoopConnections` lends it so): its
    /// lock is taken to send and to read the results, not across the wait.
    @discardableResult
    public func pipeline(_ given: [SQL], on loop: EventLoop) async throws -> [[Row]] {
        let (statements, carrying) = try starting(given)
        let prepare = !transactionPooling
        let deadline = PostgresDeadline.callDeadline(limit: queryTimeout)
        do {
            let sent = try state.withLock { state in
                try Self.markingLoss(&state) { state in Sent.List(commands: try Self.sendPipeline(statements, &state, prepare: prepare)) }
            }
            let (handle, fatal) = state.withLock { ($0.handle, $0.fatalFlag) }
            let arrived: Arrived
            do {
                arrived = Arrived(sent: sent, results: try await Self.gather(handle, fatal, deadline, on: loop))
            } catch let error as PostgresError {
                throw PostgresDeadline.noted(error)
            }
            let rows = try state.withLock { state in
                try Self.markingLoss(&state) { state in try arrived.collect(count: statements.count, &state) }
            }
            if carrying { PostgresDeadline.current?.rode(nil) }
            return rows
        } catch let error as PostgresError {
            if carrying { PostgresDeadline.current?.rode(error) }
            throw error
        }
    }

    /// The results `gather` took, handed to the collection that reads them under the connection's
    /// lock (the connection is the calling task's alone, so nothing else reads them meanwhile).
    private struct Arrived: @unchecked Sendable {
        let sent: Sent.List
        let results: [OpaquePointer?]

        /// `collectPipeline` over these results; whatever it did not take (it stopped at a failure)
        /// is freed.
        func collect(count: Int, _ state: inout State) throws -> [[Row]] {
            var index = 0
            defer { for leftover in results[min(index, results.count)...] { if let leftover { PQclear(leftover) } } }
            return try PostgresConnection.collectPipeline(sent.commands, count: count, &state) {
                guard index < results.count else {
                    throw PostgresError(.connection, "the connection broke before the pipeline's results were in")
                }
                defer { index += 1 }
                return results[index]
            }
        }
    }

    /// Flushes what libpq still holds of the pipeline, then takes every result up to the Sync's
    /// (nil between two commands' results, as `PQgetResult` gives them), suspending on `loop`
    /// whenever the socket has nothing to read. A timeout cancels the statement on the server and
    /// marks the connection broken; so does a socket that fails.
    private static func gather(_ handle: OpaquePointer, _ fatal: UnsafeMutablePointer<Int32>, _ deadline: UInt64?,
                               on loop: EventLoop) async throws -> [OpaquePointer?] {
        var arrived: [OpaquePointer?] = []
        func fail(_ error: PostgresError) -> PostgresError {
            for result in arrived { if let result { PQclear(result) } }
            arrived.removeAll()
            fatal.pointee = 1
            return error
        }
        func check(_ readiness: EventLoop.Readiness) throws(PostgresError) {
            switch readiness {
            case .ready: return
            case .timedOut:
                _ = lk_cancel_in_background(handle)
                throw fail(PostgresError(.timeout, "the server did not answer within the deadline; the statement was cancelled and the connection dropped"))
            case .failed(let code):
                throw fail(PostgresError(.connection, "waiting on the connection's socket failed (errno \(code))"))
            }
        }
        let socket = PQsocket(handle)
        guard socket >= 0 else { throw fail(PostgresError(.connection, "the connection has no socket")) }
        while true {
            let pending = PQflush(handle)
            if pending == 0 { break }
            guard pending == 1 else { throw fail(failure(handle, nil)) }
            try check(await loop.writable(socket, until: deadline))
        }
        while true {
            while PQisBusy(handle) == 1 {
                try check(await loop.readable(socket, until: deadline))
                guard PQconsumeInput(handle) == 1 else { throw fail(failure(handle, nil)) }
            }
            let result = PQgetResult(handle)
            arrived.append(result)
            if let result, PQresultStatus(result) == PGRES_PIPELINE_SYNC { return arrived }
            if result == nil, PQstatus(handle) != CONNECTION_OK { return arrived }
        }
    }

    /// Switches the connection to libpq's non-blocking mode (for `pipeline(_:on:)`); false when
    /// libpq refuses.
    func makeNonBlocking() -> Bool {
        state.withLock { PQsetnonblocking($0.handle, 1) == 0 }
    }

    /// The connection's socket, to take it out of a loop's epoll set before it closes.
    var socket: Int32 { state.withLock { PQsocket($0.handle) } }
}

extension PostgresConnection.Sent {
    /// A pipeline's commands between sending them and reading their results, which the task that
    /// owns the connection carries across its wait.
    struct List: @unchecked Sendable {
        let commands: [PostgresConnection.Sent]
    }
}
