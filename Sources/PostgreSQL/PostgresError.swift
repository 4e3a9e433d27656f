/// The one error type of the PostgreSQL module.
///
/// `code` is stable and meant for mapping (the HTTP layer turns storage failures into 5xx or, for
/// constraint violations, into its own codes). `reason` never contains bind values or passwords.
public struct PostgresError: Error, Hashable, CustomStringConvertible, Sendable {
    /// Stable error category; a struct over a private enum, so new cases do not break callers.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case connection, query, decode, poolTimeout, poolClosed, invalidArgument, timeout
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// Could not connect, or the connection was lost (server restart, terminated backend).
        public static let connection = Code(.connection)
        /// The server rejected a statement; see `sqlState`.
        public static let query = Code(.query)
        /// A result column could not be decoded as the requested type (or was NULL); see `column`.
        public static let decode = Code(.decode)
        /// No pooled connection became free within the pool's acquire timeout.
        public static let poolTimeout = Code(.poolTimeout)
        /// The pool was shut down.
        public static let poolClosed = Code(.poolClosed)
        /// The server did not answer within the call's deadline (`queryTimeout` or the request's
        /// budget): the statement was cancelled and the connection dropped. Whether a write inside
        /// it committed is unknown (a COMMIT that timed out may have committed).
        public static let timeout = Code(.timeout)
        /// A caller mistake detected before talking to the server (bad migration list, bad name).
        public static let invalidArgument = Code(.invalidArgument)

        public var description: String {
            switch base {
            case .connection: "connection"
            case .query: "query"
            case .decode: "decode"
            case .poolTimeout: "pool_timeout"
            case .poolClosed: "pool_closed"
            case .invalidArgument: "invalid_argument"
            case .timeout: "timeout"
            }
        }
    }

    public let code: Code
    /// Human-readable; server messages are included, bind values and credentials never are.
    public let reason: String
    /// The five-character SQLSTATE for `.query` errors (and for server-reported connection
    /// errors such as `57P01` admin shutdown), e.g. `"23505"` unique violation.
    public let sqlState: String?
    /// The column a `.decode` error is about.
    public let column: String?
    /// The violated constraint's name, when the server reports one.
    public let constraint: String?

    package init(
        _ code: Code, _ reason: String, sqlState: String? = nil, column: String? = nil,
        constraint: String? = nil
    ) {
        self.code = code
        self.reason = reason
        self.sqlState = sqlState
        self.column = column
        self.constraint = constraint
    }

    /// What kind of database failure this is, for logs and metrics (a closed set):
    /// `connection_lost` (could not connect, or the connection broke: a restart, a failover),
    /// `timeout` (no answer within the deadline), `pool_timeout` (no connection free in time),
    /// `serialization` (40001 / 40P01), `read_only` (25006: a standby, or a demoted primary),
    /// `query` (any other server error), `other`.
    public var failureClass: String {
        switch code {
        case .connection: return sqlState == "25006" ? "read_only" : "connection_lost"
        case .timeout: return "timeout"
        case .poolTimeout, .poolClosed: return "pool_timeout"
        case .query:
            switch sqlState {
            case "40001", "40P01": return "serialization"
            case "25006": return "read_only"
            case "57014": return "timeout"  // statement_timeout / a cancel that reached the server
            default: return "query"
            }
        default: return "other"
        }
    }

    /// `23505`: a UNIQUE or PRIMARY KEY constraint rejected the row.
    public var isUniqueViolation: Bool { sqlState == "23505" }

    public var description: String {
        var text = "PostgresError(\(code)): \(reason)"
        if let sqlState { text += " [SQLSTATE \(sqlState)]" }
        if let column { text += " [column \(column)]" }
        return text
    }

    /// Equality compares `code` only, so `#expect(throws: PostgresError(.poolTimeout, ""))` and
    /// `catch let e as PostgresError where e == …` read naturally; compare `sqlState` explicitly.
    public static func == (lhs: PostgresError, rhs: PostgresError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}

/// Well-known SQLSTATE values callers test for.
public enum SQLState {
    public static let uniqueViolation = "23505"
}
