import Synchronization

/// How long database calls may still take, and the last database failure seen under it.
///
/// A request binds one budget (`PostgresDeadline.within`) around all of its work: every statement,
/// connection acquisition and COMMIT inside waits at most until the budget's deadline (and never
/// longer than the pool's own per-call `queryTimeout`). A call that runs out is cancelled on the
/// server (`PQcancel`, from a detached thread) and its connection dropped: a hung primary costs a
/// request its budget, never a worker thread for good.
public final class PostgresBudget: Sendable {
    /// Monotonic nanoseconds (`ConditionLock.monotonicNanoseconds`); `nil`: no deadline (migrations).
    public let deadline: UInt64?
    private let failure = Mutex<PostgresError?>(nil)
    private let trips = Mutex(RoundTripCounts())
    /// Whether each round trip's statement text is kept (in `trace`, in order).
    private let tracing: Bool
    private let trace = Mutex<[String]>([])

    init(deadline: UInt64?, tracing: Bool = false) {
        self.deadline = deadline
        self.tracing = tracing
    }

    /// The round trips to PostgreSQL made under this budget (each statement, BEGIN and COMMIT): one
    /// request's, for SPEC "Performance targets" → "Round trips".
    public var roundTrips: Int { trips.withLock { $0.total } }

    /// The same, by kind: reads, writes and transaction control.
    public var counts: RoundTripCounts { trips.withLock { $0 } }

    /// The statements sent under this budget, one entry per round trip (a pipeline's statements
    /// joined by `; `), when traced; empty otherwise. Binds are never part of it.
    public var statements: [String] { trace.withLock { $0 } }

    func countRoundTrip(_ kind: RoundTripKind, _ text: () -> String) {
        trips.withLock { $0.add(kind) }
        if tracing { let statement = text(); trace.withLock { $0.append(statement) } }
    }

    /// The last error a database call raised under this budget (for the 503's log line and metric).
    public var lastFailure: PostgresError? { failure.withLock { $0 } }

    func record(_ error: PostgresError) { failure.withLock { $0 = error } }

    // MARK: A CTE the request's first committed write carries

    private let rider = Mutex<Rider?>(nil)

    struct Rider {
        let name: String
        let cte: SQL
        let refusedBy: String
        let alone: SQL
        var state: RiderState
    }

    /// Where a CTE given to `carry` stands.
    public enum RiderState: Sendable, Equatable {
        /// No statement has carried it yet (none wrote, or each that tried failed and rolled back).
        case pending
        /// A statement that committed carried it.
        case carried
        /// The statement that carried it failed on `refusedBy`: the CTE itself was refused.
        case refused
        /// No write carried it, and `takeAlone` handed out its statement to run on its own.
        case alone
    }

    /// Gives the request's first writing statement that commits on its own (autocommit, or a
    /// pipeline that ends with COMMIT) one more CTE, `name AS (cte)`, first in its WITH list: a
    /// write the request must make, made in the round trip and commit of the write it makes anyway.
    /// `cte` must write (an INSERT) and fail the statement, with a violation of the constraint
    /// `refusedBy`, when it may not be made: then nothing of that statement is written. One rider a
    /// budget; `riderState` says what became of it, and `takeAlone` gives `alone`, the same change
    /// as a statement of its own, for a request that wrote nothing that could carry it.
    public func carry(cte name: String, _ cte: SQL, refusedBy constraint: String, alone: SQL) {
        rider.withLock { $0 = Rider(name: name, cte: cte, refusedBy: constraint, alone: alone, state: .pending) }
    }

    /// The rider's statement of its own when no write carried it (and from then on no write will).
    public func takeAlone() -> SQL? {
        if case .alone(let statement) = settleRider() { return statement }
        return nil
    }

    /// What became of the rider, in one look after the request's work: `alone` hands out its
    /// statement of its own when no write carried it (and from then on no write will).
    public enum Settled: Sendable {
        case none, carried, refused, alone(SQL)
    }

    public func settleRider() -> Settled {
        rider.withLock { r in
            switch r?.state {
            case nil, .alone?: return .none
            case .carried?: return .carried
            case .refused?: return .refused
            case .pending?:
                r?.state = .alone
                return r.map { .alone($0.alone) } ?? .none
            }
        }
    }

    /// What became of the CTE given to `carry`; nil when none was.
    public var riderState: RiderState? { rider.withLock { $0?.state } }

    /// `statement` with the pending rider, when it is a statement that may carry it: one that
    /// writes and begins with WITH, INSERT, UPDATE, DELETE or SELECT (a CTE can lead those).
    /// Throws for a write once the rider was refused: the request writes nothing more (a store that
    /// catches the failed statement and writes a refusal's own record instead is stopped here).
    func riding(_ statement: SQL) throws(PostgresError) -> SQL? {
        try rider.withLock { r throws(PostgresError) -> SQL? in
            guard let r, r.state == .pending || r.state == .refused, statement.writes else { return nil }
            guard r.state == .pending else {
                throw PostgresError(.query, "the request's \(r.name) was refused: it writes nothing more",
                                    sqlState: "23505", constraint: r.refusedBy)
            }
            return statement.leading(cte: r.name, r.cte)
        }
    }

    /// The carrying statement's outcome: committed, refused on the rider's constraint, or failed
    /// otherwise (rolled back: the rider stays pending for a later write).
    func rode(_ error: PostgresError?) {
        rider.withLock { r in
            guard r != nil else { return }
            if let error {
                if error.sqlState == "23505", error.constraint == r?.refusedBy { r?.state = .refused }
            } else {
                r?.state = .carried
            }
        }
    }
}

public enum PostgresDeadline {
    /// The budget bound to this thread (a task-local, bound synchronously by the HTTP worker).
    @TaskLocal static var current: PostgresBudget?

    /// Runs `body` with every database call inside it bounded, together, by `seconds` from now.
    /// Returns the budget too, so the caller can read `lastFailure` afterwards.
    /// With `tracing`, the budget also keeps each round trip's statement text (`statements`).
    public static func within<T>(seconds: Double, tracing: Bool = false, _ body: () throws -> T) rethrows -> (T, PostgresBudget) {
        let budget = PostgresBudget(deadline: ConditionLock.monotonicNanoseconds() &+ UInt64(max(0, seconds) * 1e9), tracing: tracing)
        let value = try $current.withValue(budget) { try body() }
        return (value, budget)
    }

    /// `within` for asynchronous work (a task on an event loop).
    public static func within<T>(seconds: Double, tracing: Bool = false, _ body: () async -> T) async -> (T, PostgresBudget) {
        let budget = PostgresBudget(deadline: ConditionLock.monotonicNanoseconds() &+ UInt64(max(0, seconds) * 1e9), tracing: tracing)
        let value = await $current.withValue(budget) { await body() }
        return (value, budget)
    }

    /// Runs `body` under the bound budget's deadline but without counting its round trips against
    /// the request (SPEC "Performance targets" → "Round trips": the revocation check of a stale
    /// instance is the one extra read a request may make, and it is not the route's own cost).
    public static func uncounted<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        guard let outer = current else { return try body() }
        let inner = PostgresBudget(deadline: outer.deadline)
        defer { if let failure = inner.lastFailure { outer.record(failure) } }
        var result: Result<T, E>? = nil
        $current.withValue(inner) { result = Result { () throws(E) in try body() } }
        return try result!.get()
    }

    /// Runs `body` without a client-side deadline (and with `statement_timeout = 0` in its
    /// transactions): schema migrations, whose statements may rightly run for minutes.
    public static func unbounded<T>(_ body: () throws -> T) rethrows -> T {
        try $current.withValue(PostgresBudget(deadline: nil)) { try body() }
    }

    /// The monotonic deadline of a call starting now that may take at most `limit`: the bound
    /// budget's deadline when sooner. `nil`: wait as long as it takes.
    static func callDeadline(limit: Duration) -> UInt64? {
        let own = ConditionLock.monotonicNanoseconds() &+ limit.nanosecondsClamped
        guard let budget = current else { return own }
        guard let deadline = budget.deadline else { return nil }
        return min(own, deadline)
    }

    /// `PostgresBudget.carry` on the bound budget; false when none is bound (no request: the
    /// caller writes the CTE's change itself).
    public static func carry(cte name: String, _ sql: SQL, refusedBy constraint: String, alone: SQL) -> Bool {
        guard let budget = current else { return false }
        budget.carry(cte: name, sql, refusedBy: constraint, alone: alone)
        return true
    }

    /// What became of the bound budget's rider (`PostgresBudget.riderState`).
    public static var riderState: PostgresBudget.RiderState? { current?.riderState }

    /// `PostgresBudget.takeAlone` on the bound budget.
    public static func takeAlone() -> SQL? { current?.takeAlone() }

    /// `PostgresBudget.settleRider` on the bound budget (`.none` when no budget is bound).
    public static func settleRider() -> PostgresBudget.Settled { current?.settleRider() ?? .none }

    /// Counts one round trip of `kind` on the bound budget (if any); `text` is read only when traced.
    static func roundTrip(_ kind: RoundTripKind, _ text: @autoclosure () -> String) { current?.countRoundTrip(kind, text) }

    /// Records `error` on the bound budget (if any) and returns it, for `throw PostgresDeadline.noted(e)`.
    static func noted(_ error: PostgresError) -> PostgresError {
        current?.record(error)
        return error
    }
}

extension Duration {
    /// Whole nanoseconds, 0 for a negative duration: what a deadline on the monotonic clock adds.
    var nanosecondsClamped: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        return UInt64(seconds) &* 1_000_000_000 &+ UInt64(attoseconds / 1_000_000_000)
    }
}
