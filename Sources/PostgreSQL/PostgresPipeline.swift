import CLibPQ
import Glibc
import Synchronization

extension PostgresConnection {
    /// Runs `statements` in order as one pipeline (libpq pipeline mode: every statement sent, then
    /// one Sync): one round trip for all of them. Returns each statement's rows. A statement that
    /// fails throws its error and the ones after it do not run (the server skips them up to the
    /// Sync); an open transaction is then left aborted, for the caller's pool to roll back.
    ///
    /// This is how a transaction spans two round trips without a third: `["BEGIN", read]`, then
    /// `[write, "COMMIT"]`. Statements with binds are prepared once per connection as `query` does
    /// (not with `transactionPooling`: unnamed statements only, so nothing outlives the transaction).
    @discardableResult
    public func pipeline(_ given: [SQL]) throws -> [[Row]] {
        let (statements, carrying) = try starting(given)
        let prepare = !transactionPooling
        let deadline = PostgresDeadline.callDeadline(limit: queryTimeout)
        do {
            let rows = try state.withLock { state in
                try Self.markingLoss(&state) { state in try Self.runPipeline(statements, &state, deadline, prepare: prepare) }
            }
            if carrying { PostgresDeadline.current?.rode(nil) }
            return rows
        } catch let error as PostgresError {
            if carrying { PostgresDeadline.current?.rode(error) }
            throw error
        }
    }

    /// What every pipeline does before it sends: refuses a bind PostgreSQL text cannot hold, puts
    /// the request's rider on the first write that commits, and counts the round trip.
    func starting(_ given: [SQL]) throws -> (statements: [SQL], carrying: Bool) {
        for sql in given {
            if let bad = sql.binds.firstIndex(where: { $0.containsNUL }) {
                throw PostgresError(.invalidArgument, "parameter $\(bad + 1) contains a NUL character, which PostgreSQL text cannot hold")
            }
        }
        let (statements, carrying) = try riding(given)
        PostgresDeadline.roundTrip(SQL.roundTripKind(statements), statements.map(\.text).joined(separator: "; "))
        return (statements, carrying)
    }

    /// The statements with the request's rider (`PostgresBudget.carry`) on the first that writes,
    /// when the pipeline commits what it writes: it ends with COMMIT, or it is sent outside a
    /// transaction and opens none. Throws for a write once the rider was refused.
    private func riding(_ statements: [SQL]) throws(PostgresError) -> (statements: [SQL], carrying: Bool) {
        guard let budget = PostgresDeadline.current else { return (statements, false) }
        for (index, statement) in statements.enumerated() {
            guard let ridden = try budget.riding(statement) else { continue }
            let commits = statements.last?.begins(with: "COMMIT") == true
                || (!statements.contains { $0.begins(with: "BEGIN") } && state.withLock { PQtransactionStatus($0.handle) == PQTRANS_IDLE })
            guard commits else { return (statements, false) }
            var carried = statements
            carried[index] = ridden
            return (carried, true)
        }
        return (statements, false)
    }

    /// What each command sent in the pipeline answers with, in order.
    enum Sent {
        /// A statement prepared here, cached once its Parse succeeded.
        case prepare(StatementKey, PreparedStatement)
        /// `statements[index]`, with the prepared statement whose result layout it caches.
        case run(index: Int, PreparedStatement?)
    }

    private static func runPipeline(_ statements: [SQL], _ state: inout State, _ deadline: UInt64?, prepare: Bool) throws -> [[Row]] {
        let sent = try sendPipeline(statements, &state, prepare: prepare)
        let (handle, fatal) = (state.handle, state.fatalFlag)
        return try collectPipeline(sent, count: statements.count, &state) { try nextResult(handle, fatal, deadline) }
    }

    /// Sends every statement of the pipeline and its Sync, preparing statements with binds once per
    /// connection (`prepare`). What each command will answer with, in order.
    static func sendPipeline(_ statements: [SQL], _ state: inout State, prepare: Bool) throws -> [Sent] {
        let handle = state.handle
        let fatal = state.fatalFlag
        guard fatal.pointee == 0, PQstatus(handle) == CONNECTION_OK else {
            throw PostgresError(.connection, "the connection was dropped (the server closed it, or an earlier call timed out)")
        }
        guard PQenterPipelineMode(handle) == 1 else { throw failure(handle, nil) }
        var sent: [Sent] = []
        var created: [(StatementKey, PreparedStatement)] = []
        do {
            for (index, sql) in statements.enumerated() {
                let parameters = WireParameters(sql.binds)
                var statement: PreparedStatement? = nil
                if prepare, !sql.binds.isEmpty {
                    let key = StatementKey(text: sql.composed, types: parameters.types)
                    statement = state.statements[key] ?? created.first { $0.0 == key }?.1
                    if statement == nil, state.statements.count + created.count < statementCacheLimit {
                        let made = PreparedStatement(name: "lk_\(state.nextStatement)")
                        state.nextStatement += 1
                        let types = parameters.types
                        guard types.withUnsafeBufferPointer({ t in PQsendPrepare(handle, made.name, sql.text, Int32(types.count), t.baseAddress) }) == 1 else {
                            throw failure(handle, nil)
                        }
                        sent.append(.prepare(key, made))
                        created.append((key, made))
                        statement = made
                    }
                }
                let ok = parameters.withValuePointers { values in
                    if let statement {
                        PQsendQueryPrepared(handle, statement.name, Int32(parameters.count), values, parameters.lengths, parameters.formats, 0)
                    } else {
                        PQsendQueryParams(handle, sql.text, Int32(parameters.count), parameters.types, values, parameters.lengths,
                                          parameters.formats, 0)
                    }
                }
                guard ok == 1 else { throw failure(handle, nil) }
                sent.append(.run(index: index, statement))
            }
            guard PQpipelineSync(handle) == 1 else { throw failure(handle, nil) }
        } catch {
            // Nothing was synced: the connection's protocol state is unknown, so it is not reused.
            fatal.pointee = 1
            throw error
        }
        return sent
    }

    /// Reads what the pipeline `sent` answered, result by result from `next` (nil between two
    /// commands' results), up to the Sync's own result: each statement's rows, or the first
    /// statement's failure.
    static func collectPipeline(_ sent: [Sent], count: Int, _ state: inout State, next: () throws -> OpaquePointer?) throws -> [[Row]] {
        let handle = state.handle
        let fatal = state.fatalFlag
        var rows = [[Row]](repeating: [], count: count)
        var firstFailure: PostgresError? = nil
        for command in sent {
            // Each command's results, then a null.
            while let result = try next() {
                defer { PQclear(result) }
                switch PQresultStatus(result) {
                case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
                    switch command {
                    case .prepare(let key, let statement):
                        state.statements[key] = statement
                    case .run(let index, let statement):
                        let layout = statement?.layout.flatMap { matches($0, result) ? $0 : nil } ?? layout(of: result)
                        statement?.layout = layout
                        rows[index] = materialize(result, layout)
                    }
                case PGRES_PIPELINE_ABORTED:
                    break
                default:
                    let error = failure(handle, result)
                    if firstFailure == nil { firstFailure = error }
                    if error.sqlState == "26000" { state.statements.removeAll() }
                    if error.sqlState == "0A000", case .run(_, let statement?) = command {
                        state.statements = state.statements.filter { $0.value !== statement }
                    }
                }
            }
        }
        // Then the Sync's own result (a broken connection never sends it).
        while true {
            guard let result = try next() else {
                guard PQstatus(handle) == CONNECTION_OK else {
                    fatal.pointee = 1
                    throw firstFailure ?? failure(handle, nil)
                }
                continue
            }
            let status = PQresultStatus(result)
            PQclear(result)
            if status == PGRES_PIPELINE_SYNC { break }
        }
        _ = PQexitPipelineMode(handle)
        if let firstFailure { throw firstFailure }
        return rows
    }

    /// The next result once it is in (nil between two commands' results), within `deadline`.
    private static func nextResult(_ handle: OpaquePointer, _ fatal: UnsafeMutablePointer<Int32>, _ deadline: UInt64?) throws -> OpaquePointer? {
        while PQisBusy(handle) == 1 {
            var waitMilliseconds: Int32 = 60_000
            if let deadline {
                let now = ConditionLock.monotonicNanoseconds()
                guard now < deadline else {
                    _ = lk_cancel_in_background(handle)
                    fatal.pointee = 1
                    throw PostgresError(.timeout, "the server did not answer within the deadline; the statement was cancelled and the connection dropped")
                }
                waitMilliseconds = Int32(min((deadline - now) / 1_000_000 + 1, 60_000))
            }
            let ready = lk_wait_readable(handle, waitMilliseconds)
            if ready < 0 {
                if errno == EINTR { continue }
                fatal.pointee = 1
                throw PostgresError(.connection, "poll failed (errno \(errno))")
            }
            if ready > 0, PQconsumeInput(handle) == 0 {
                fatal.pointee = 1
                throw failure(handle, nil)
            }
        }
        return PQgetResult(handle)
    }
}
