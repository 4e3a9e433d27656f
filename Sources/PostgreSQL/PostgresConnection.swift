import CLibPQ
import Glibc
import Synchronization

/// One libpq connection (`PGconn`), closed by `deinit`.
///
/// Sendable: every libpq call is made under an internal lock, so handing the connection to another
/// thread is safe. It still runs one statement at a time; a pool gives each thread its own.
///
/// Statements with parameters are prepared once per connection (cached by SQL text and parameter
/// types) and executed with `PQsendQueryPrepared` afterwards, so hot-path queries are parsed once.
///
/// Every call has a deadline (`queryTimeout`, or sooner the budget of `PostgresDeadline.within`):
/// statements are sent asynchronously and the socket is polled until then; a call that runs out
/// throws `.timeout`, the server is asked to cancel it, and the connection is dropped
/// (`isConnected` turns false, so a pool discards it). Transactions also carry the remaining
/// budget as `SET LOCAL statement_timeout`, except behind a transaction pooler.
///
/// With `transactionPooling` (PgBouncer `pool_mode = transaction` in front of the server) the
/// connection keeps no session state, because consecutive transactions may run on different server
/// sessions: no named prepared statements (every statement with parameters goes through the
/// unnamed statement of `PQexecParams`), no `SET` at connect. Decoding does not depend on the
/// session's settings anyway: `client_encoding=UTF8` is a startup parameter (which PgBouncer tracks
/// per client), and `timestamptz` text carries its own offset for any server `TimeZone`.
public final class PostgresConnection: Sendable {
    struct State: ~Copyable {
        let handle: OpaquePointer  // PGconn *
        /// Set by the notice receiver when the server sends FATAL (it is closing the connection).
        let fatalFlag: UnsafeMutablePointer<Int32>
        var statements: [StatementKey: PreparedStatement] = [:]
        var nextStatement = 0
        /// Nesting depth of `transaction { }` (savepoints beyond 1).
        var transactionDepth = 0

        init(handle: OpaquePointer) {
            self.handle = handle
            fatalFlag = .allocate(capacity: 1)
            fatalFlag.initialize(to: 0)
            lk_install_notice_receiver(handle, fatalFlag)
        }

        deinit {
            PQfinish(handle)
            fatalFlag.deallocate()
        }
    }

    struct StatementKey: Hashable {
        let text: [UInt8]
        let types: [UInt32]

        /// A cheap digest of the text, computed once per key: SipHash over ~1.5 kB of a login's
        /// statement text cost ~5 k instructions per lookup. The text is the code's own SQL (values
        /// are binds), so no client can pick colliding keys; equality still compares every byte.
        let digest: UInt64

        init(text: [UInt8], types: [UInt32]) {
            self.text = text
            self.types = types
            self.digest = Self.digest(text)
        }

        static func == (a: StatementKey, b: StatementKey) -> Bool {
            a.digest == b.digest && a.text.count == b.text.count && a.types == b.types
                && a.text.withUnsafeBytes { x in b.text.withUnsafeBytes { y in x.isEmpty || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0 } }
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(digest)
            types.withUnsafeBytes { hasher.combine(bytes: $0) }
        }

        /// 8 bytes per step, multiply-and-rotate (the mixing of FxHash), then the tail bytes.
        static func digest(_ bytes: [UInt8]) -> UInt64 {
            bytes.withUnsafeBytes { raw in
                var h = UInt64(truncatingIfNeeded: raw.count) &* 0x9E37_79B9_7F4A_7C15
                var i = 0
                while i + 8 <= raw.count {
                    let word = raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                    h = ((h << 5) | (h >> 59)) ^ word
                    h = h &* 0x51_7CC1_B727_220A_95
                    i += 8
                }
                while i < raw.count {
                    h = (((h << 5) | (h >> 59)) ^ UInt64(raw[i])) &* 0x51_7CC1_B727_220A_95
                    i += 1
                }
                return h
            }
        }
    }

    /// A statement prepared on this connection, and the column layout of its results once one
    /// came back (built once, not per query).
    final class PreparedStatement {
        let name: String
        var layout: ColumnLayout?
        init(name: String) { self.name = name }
    }

    /// Prepared statements kept per connection before new ones run unprepared.
    static let statementCacheLimit = 500

    let state: Mutex<State>

    /// Whether this connection avoids session state (see the type's documentation).
    public let transactionPooling: Bool
    /// The longest any one call may wait for the server.
    public let queryTimeout: Duration

    /// The default `queryTimeout` (LATCHKEY_DB_QUERY_TIMEOUT's default).
    public static let defaultQueryTimeout: Duration = .seconds(5)

    /// Connects with a libpq connection string or URL
    /// (`postgresql://user[:password]@host:port/db?sslmode=…`), with `ConnectionDefaults` added for
    /// every keyword the URL does not set (a short `connect_timeout`, TCP keepalives,
    /// `tcp_user_timeout`); the client encoding is always UTF-8 (a startup parameter).
    ///
    /// - Parameter transactionPooling: `false` (a direct connection, or PgBouncer in session mode):
    ///   the session runs with `TimeZone=UTC`, `DateStyle=ISO`, `IntervalStyle=iso_8601` and
    ///   statements are prepared once. `true` (PgBouncer in transaction mode): nothing is `SET`
    ///   and nothing is prepared by name; the server's `DateStyle` must be ISO (its default), which
    ///   is checked here.
    public init(url: String, transactionPooling: Bool = false, queryTimeout: Duration = PostgresConnection.defaultQueryTimeout) throws {
        state = Mutex(State(handle: try Self.openHandle(url: url)))
        self.transactionPooling = transactionPooling
        self.queryTimeout = queryTimeout
        if transactionPooling {
            // Timestamps are decoded from ISO text; any other output style would be misread, so
            // refuse at connect rather than at the first date column.
            let dateStyle = state.withLock { PQparameterStatus($0.handle, "DateStyle").map { String(cString: $0) } }
            if let dateStyle, !dateStyle.hasPrefix("ISO") {
                throw PostgresError(.connection, "the server's DateStyle is '\(dateStyle)'; transaction pooling needs ISO output (ALTER DATABASE … SET DateStyle = 'ISO, YMD')")
            }
        } else {
            _ = try executeScript("SET TimeZone = 'UTC'; SET DateStyle = 'ISO, YMD'; SET IntervalStyle = 'iso_8601'")
        }
    }

    /// A connected `PGconn` for `url` (`ConnectionDefaults` added where the URL is silent, and
    /// `client_encoding=UTF8`); the caller owns it (`PQfinish`). Shared with `PostgresListener`.
    static func openHandle(url: String) throws -> OpaquePointer {
        // Keywords after the expanded `dbname` override what the URL says.
        var keys = ["dbname", "client_encoding"]
        // A multi-host URL's hosts in the order of preference (a host that failed us goes last).
        var values = [HostOrder.apply(url), "UTF8"]
        for (key, value) in ConnectionDefaults.missing(from: url) {
            keys.append(key)
            values.append(value)
        }
        let handle = withCStringArray(keys) { k in
            withCStringArray(values) { v in PQconnectdbParams(k, v, 1) }
        }
        guard let handle else {
            throw PostgresError(.connection, "out of memory creating a connection")
        }
        guard PQstatus(handle) == CONNECTION_OK else {
            let message = Self.message(handle)
            PQfinish(handle)
            throw PostgresDeadline.noted(PostgresError(.connection, "could not connect: \(message)"))
        }
        return handle
    }

    // MARK: - Status

    /// False once libpq has seen the connection break (`CONNECTION_BAD`). The socket closes when
    /// the last reference goes away.
    public var isConnected: Bool {
        state.withLock { PQstatus($0.handle) == CONNECTION_OK && $0.fatalFlag.pointee == 0 }
    }

    /// True while inside `transaction { }`.
    public var isInTransaction: Bool { state.withLock { $0.transactionDepth > 0 } }

    /// `host:port` this connection reached (of a multi-host URL, the one libpq settled on).
    public var connectedHost: String {
        state.withLock { s in
            "\(PQhost(s.handle).map { String(cString: $0) } ?? ""):\(PQport(s.handle).map { String(cString: $0) } ?? "")"
        }
    }

    /// The server process id serving this connection (`pg_backend_pid()`).
    public var backendPID: Int32 { state.withLock { PQbackendPID($0.handle) } }

    /// Number of statements prepared on this connection (always 0 with `transactionPooling`).
    public var preparedStatementCount: Int { state.withLock { $0.statements.count } }

    /// For a pool: whether the session is inside a transaction block it did not close.
    func needsRollback() -> Bool {
        state.withLock { PQtransactionStatus($0.handle) != PQTRANS_IDLE }
    }

    /// For a pool: an idle connection's cheap liveness probe (reads pending input, no round trip).
    func probeIdle() -> Bool {
        state.withLock { lk_idle_connection_alive($0.handle, $0.fatalFlag) == 1 }
    }

    // MARK: - Statements

    /// Runs a statement and returns its rows.
    @discardableResult
    public func query(_ sql: SQL) throws -> [Row] {
        try run(sql).rows
    }

    /// Runs a statement and returns the number of rows it inserted, updated or deleted.
    @discardableResult
    public func execute(_ sql: SQL) throws -> Int {
        try run(sql).affected
    }

    /// Runs several `;`-separated statements without parameters (migrations, schema setup) via the
    /// simple query protocol. Returns the rows affected by the last statement.
    @discardableResult
    public func executeScript(_ text: String) throws -> Int {
        PostgresDeadline.roundTrip(SQL.kind(Array(text.utf8)), text)
        let deadline = PostgresDeadline.callDeadline(limit: queryTimeout)
        return try state.withLock { state in
            try Self.markingLoss(&state) { state in
                let result = try Exchange.run(state.handle, state.fatalFlag, deadline: deadline) { PQsendQuery($0, text) }
                defer { PQclear(result) }
                return Self.affectedRows(result)
            }
        }
    }

    // MARK: - Transactions

    public enum IsolationLevel: String, Sendable {
        case readCommitted = "READ COMMITTED"
        case repeatableRead = "REPEATABLE READ"
        case serializable = "SERIALIZABLE"
    }

    /// Runs `body` in a transaction: COMMIT when it returns, ROLLBACK when it throws (the error is
    /// rethrown). Nested calls use savepoints. A COMMIT that the server turns into a ROLLBACK
    /// (because a statement failed and the error was swallowed) throws `.query` with SQLSTATE 25P02.
    @discardableResult
    public func transaction<T>(
        isolation: IsolationLevel? = nil, _ body: (PostgresConnection) throws -> T
    ) throws -> T {
        let depth = state.withLock { state -> Int in
            state.transactionDepth += 1
            return state.transactionDepth
        }
        defer { state.withLock { $0.transactionDepth -= 1 } }
        let savepoint = "lk_savepoint_\(depth)"
        if depth == 1 {
            var begin = isolation.map { "BEGIN ISOLATION LEVEL \($0.rawValue)" } ?? "BEGIN"
            // The server stops what the client would give up on anyway (in BEGIN's round trip): the
            // remaining budget, or the session's own statement_timeout (a DBA's) when that is lower.
            // Not behind a transaction pooler (its operators own the server settings there), and not
            // without a deadline (migrations keep whatever the session has).
            let budget = PostgresDeadline.statementTimeoutMilliseconds(limit: queryTimeout)
            if !transactionPooling, budget > 0 {
                begin += "; SELECT set_config('statement_timeout', (extract(epoch FROM least(nullif(current_setting('statement_timeout')::interval, "
                    + "interval '0'), interval '\(budget) milliseconds')) * 1000)::bigint::text, true)"
            }
            try executeScript(begin)
        } else {
            try executeScript("SAVEPOINT \(savepoint)")
        }
        let value: T
        do {
            value = try body(self)
        } catch {
            // Best effort: if the connection is gone the server has rolled back already.
            _ = try? executeScript(depth == 1 ? "ROLLBACK" : "ROLLBACK TO SAVEPOINT \(savepoint); RELEASE SAVEPOINT \(savepoint)")
            throw error
        }
        if depth == 1 {
            PostgresDeadline.roundTrip(.control, "COMMIT")
            let deadline = PostgresDeadline.callDeadline(limit: queryTimeout)
            let status = try state.withLock { state -> String in
                try Self.markingLoss(&state) { state in
                    let result = try Exchange.run(state.handle, state.fatalFlag, deadline: deadline) { PQsendQuery($0, "COMMIT") }
                    defer { PQclear(result) }
                    return String(cString: PQcmdStatus(result))
                }
            }
            if status == "ROLLBACK" {
                throw PostgresError(.query, "transaction was rolled back: a statement inside it failed", sqlState: "25P02")
            }
        } else {
            try executeScript("RELEASE SAVEPOINT \(savepoint)")
        }
        return value
    }

    // MARK: - Internals

    private func run(_ given: SQL) throws -> (rows: [Row], affected: Int) {
        if let bad = given.binds.firstIndex(where: { $0.containsNUL }) {
            throw PostgresError(.invalidArgument, "parameter $\(bad + 1) contains a NUL character, which PostgreSQL text cannot hold")
        }
        // The request's rider (`PostgresBudget.carry`) goes with a write that commits on its own:
        // one sent outside a transaction.
        let budget = PostgresDeadline.current
        let carrying = try budget?.riding(given).flatMap { ridden in
            state.withLock { PQtransactionStatus($0.handle) == PQTRANS_IDLE } ? ridden : nil
        }
        let sql = carrying ?? given
        let prepare = !transactionPooling
        PostgresDeadline.roundTrip(sql.writes ? .write : .read, sql.text)
        let deadline = PostgresDeadline.callDeadline(limit: queryTimeout)
        do {
            let result = try state.withLock { state in
                try Self.markingLoss(&state) { state in
                    prepare ? try Self.runCaching(sql, &state, deadline) : try Self.runUnnamed(sql, nil, state, deadline)
                }
            }
            if carrying != nil { budget?.rode(nil) }
            return result
        } catch let error as PostgresError {
            if carrying != nil { budget?.rode(error) }
            throw error
        }
    }

    /// A connection error (lost socket, or the server's 57P/08 "closing this session") or a
    /// timeout marks the connection broken for good, so a pool never reuses it. Every failure is
    /// noted on the bound budget (the 503's log line names its class).
    static func markingLoss<T>(_ state: inout State, _ body: (inout State) throws -> T) throws -> T {
        do {
            return try body(&state)
        } catch let error as PostgresError {
            if error.code == .connection || error.code == .timeout { state.fatalFlag.pointee = 1 }
            throw PostgresDeadline.noted(error)
        }
    }

    private static func runCaching(_ sql: SQL, _ state: inout State, _ deadline: UInt64?) throws -> (rows: [Row], affected: Int) {
        do {
            return try runPrepared(sql, &state, deadline)
        } catch let error as PostgresError where error.sqlState == "26000" || error.sqlState == "0A000" {
            // "prepared statement does not exist" (after DISCARD ALL / DEALLOCATE) or "cached
            // plan must not change result type" (after a schema change): prepare again, once.
            let key = StatementKey(text: sql.composed, types: sql.binds.map { $0.typeOID })
            guard let name = state.statements.removeValue(forKey: key)?.name else { throw error }
            if error.sqlState == "26000" { state.statements.removeAll() }
            // Inside a transaction the failure aborted it: report the original error.
            guard PQtransactionStatus(state.handle) == PQTRANS_IDLE else { throw error }
            if error.sqlState == "0A000" {
                PQclear(try Exchange.run(state.handle, state.fatalFlag, deadline: deadline) { PQsendQuery($0, "DEALLOCATE \(name)") })
            }
            return try runPrepared(sql, &state, deadline)
        }
    }

    private static func runPrepared(_ sql: SQL, _ state: inout State, _ deadline: UInt64?) throws -> (rows: [Row], affected: Int) {
        let handle = state.handle
        let fatal = state.fatalFlag
        let parameters = WireParameters(sql.binds)
        let types = parameters.types
        let key = StatementKey(text: sql.composed, types: types)
        var statement = state.statements[key]
        if statement == nil, state.statements.count < statementCacheLimit {
            let newName = "lk_\(state.nextStatement)"
            let prepared = try Exchange.run(handle, fatal, deadline: deadline) { h in
                types.withUnsafeBufferPointer { t in PQsendPrepare(h, newName, sql.text, Int32(types.count), t.baseAddress) }
            }
            PQclear(prepared)
            state.nextStatement += 1
            let created = PreparedStatement(name: newName)
            state.statements[key] = created
            statement = created
        }
        guard let statement else { return try runUnnamed(sql, parameters, state, deadline) }
        let name = statement.name
        let result = try Exchange.run(handle, fatal, deadline: deadline) { h in
            parameters.withValuePointers { values in
                PQsendQueryPrepared(h, name, Int32(parameters.count), values, parameters.lengths, parameters.formats, 0)
            }
        }
        defer { PQclear(result) }
        let layout = statement.layout.flatMap { matches($0, result) ? $0 : nil } ?? layout(of: result)
        statement.layout = layout
        return (materialize(result, layout), affectedRows(result))
    }

    /// Parse, bind and execute through the unnamed statement (`PQsendQueryParams`): one round
    /// trip, and nothing is left on the server session afterwards.
    private static func runUnnamed(_ sql: SQL, _ parameters: WireParameters?, _ state: borrowing State,
                                   _ deadline: UInt64?) throws -> (rows: [Row], affected: Int) {
        let parameters = parameters ?? WireParameters(sql.binds)
        let result = try Exchange.run(state.handle, state.fatalFlag, deadline: deadline) { h in
            parameters.withValuePointers { values in
                PQsendQueryParams(h, sql.text, Int32(parameters.count), parameters.types, values, parameters.lengths,
                                  parameters.formats, 0)
            }
        }
        defer { PQclear(result) }
        return (materialize(result, layout(of: result)), affectedRows(result))
    }
}
