import PostgreSQL

/// Every way a repository call can fail. Callers map these to HTTP in one table; `unavailable`'s
/// text is for logs only (it is a PostgresError's description: server messages, never bind values).
public enum StorageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A unique constraint (or a compare-and-set) refused the write.
    case conflict(Conflict)
    /// A row the call needed does not exist (where a Bool or nil return does not already say so):
    /// the credential a use or a flag is recorded on.
    case notFound
    /// A value PostgreSQL cannot hold (a NUL in text) reached a statement: the input's fault, never
    /// the database's. The edge checks ids and strings first; this is the net under it, so such an
    /// input is a 400, not a 503 (SPEC: no input yields a 5xx).
    case unstorableInput
    /// A stored value could not be read as the code expects (NULL where a value must be, another
    /// type): a bug or a schema out of step with the code, never the database being down; names the column.
    case undecodable(column: String)
    /// The database could not be reached or failed.
    case unavailable(String)

    public enum Conflict: Sendable, Equatable {
        case usernameTaken       // users_username_key
        case credentialExists    // credentials_pkey
        /// A credential use's compare-and-set found the stored counter not below the new one.
        case signCountRegression
        /// The step-up token a change was to redeem was already used (or is not this user's, or
        /// for another action): the change was rolled back.
        case stepUpUsed
        /// The credential is the account's last way in (SPEC "Assurance"): no other live passkey,
        /// no unused recovery code, and no verified address that counts; nothing was revoked.
        case lastWayIn
        case other(String)       // the constraint's name
    }

    public var description: String {
        switch self {
        case .conflict(.usernameTaken): "conflict: username taken"
        case .conflict(.credentialExists): "conflict: credential already registered"
        case .conflict(.signCountRegression): "conflict: sign count not above the stored one"
        case .conflict(.stepUpUsed): "conflict: the step-up was already used"
        case .conflict(.lastWayIn): "conflict: the account's last way in"
        case .conflict(.other(let constraint)): "conflict: \(constraint)"
        case .notFound: "not found"
        case .unstorableInput: "a value PostgreSQL cannot hold (a NUL character)"
        case .undecodable(let column): "stored data could not be read: column \(column)"
        case .unavailable(let reason): "database unavailable: \(reason)"
        }
    }

    /// The one mapping from whatever a query threw to a StorageError.
    init(_ error: any Error) {
        switch error {
        case let error as StorageError:
            self = error
        case let error as PostgresError where error.code == .decode:
            self = .undecodable(column: error.column ?? "unknown")
        case let error as PostgresError where error.code == .invalidArgument && error.reason.contains("NUL"):
            self = .unstorableInput
        case let error as PostgresError where error.isUniqueViolation:
            switch error.constraint {
            case "users_username_key": self = .conflict(.usernameTaken)
            case "credentials_pkey": self = .conflict(.credentialExists)
            default: self = .conflict(.other(error.constraint ?? "unknown"))
            }
        default:
            self = .unavailable(String(describing: error))
        }
    }
}

extension PostgresPool {
    /// `withConnection`, with every failure mapped to a StorageError. No retry: most statements
    /// here write, and a write retried after a lost reply could run twice.
    @discardableResult
    func run<T>(_ body: (PostgresConnection) throws -> T) throws(StorageError) -> T {
        do { return try withConnection(body) } catch { throw StorageError(error) }
    }

    /// `run` inside one transaction: COMMIT when `body` returns, ROLLBACK when it throws.
    @discardableResult
    func runTransaction<T>(_ body: (PostgresConnection) throws -> T) throws(StorageError) -> T {
        do { return try withConnection { c in try c.transaction(body) } } catch { throw StorageError(error) }
    }
}
