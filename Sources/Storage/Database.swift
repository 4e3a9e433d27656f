import EventLoop
import PostgreSQL

/// How the server reaches PostgreSQL.
/// `.transaction`: PgBouncer (or alike) in transaction pooling mode in front — no named prepared
/// statements, no session-level SET, no LISTEN on pooled connections, no asynchronous-commit pool.
/// What one request asked of PostgreSQL: its round trips by kind and, when traced, each one's
/// statement text (no binds).
public struct DatabaseWork: Sendable, Equatable {
    public var roundTrips: RoundTripCounts
    public var statements: [String]
    /// For a bulk route's answer in JSON Lines (an export, an import's outcomes), its lines: the
    /// accounts its round trips are counted per (ARCHITECTURE.md "Round trips per route").
    public var items: Int?
    public init(roundTrips: RoundTripCounts = RoundTripCounts(), statements: [String] = [], items: Int? = nil) {
        self.roundTrips = roundTrips
        self.statements = statements
        self.items = items
    }
}

public enum PoolerMode: String, Sendable {
    case none
    case transaction
}

/// Latchkey's database: the pools, the schema, and one repository per concern. Every query
/// Latchkey runs lives in a repository; values are always bind parameters.
public final class Database: Sendable {
    /// Public for tests (they import PostgreSQL); the server never touches it.
    public let pool: PostgresPool
    /// Connections with `synchronous_commit = off`, for challenge rows only. A challenge that a
    /// crash forgets costs the client a retry; a consumed challenge that a crash brings back is
    /// harmless, because a login's own (synchronous) commit comes later in the WAL and flushes the
    /// consume with it. Everything else (credentials, tokens, audit) stays fully durable.
    /// With `.transaction` pooling this is `pool` (a session option cannot cross a pooler).
    let challengePool: PostgresPool
    public let pooler: PoolerMode
    /// `listenURL` as given: a connection past any pooler.
    private let directURL: String?
    /// The durable pool's URL, for the connections of an event loop (`loopConnections`).
    private let url: String

    public let challenges: ChallengeRepository
    /// A passkey login's one read and one write (sealed challenges' single use, the session).
    public let logins: LoginRepository
    /// Users, credentials (passkeys), enrolment tickets.
    public let accounts: AccountRepository
    /// Refresh-token families (sessions) and tokens, and their revocation feed.
    public let sessions: SessionRepository
    /// Device keys, step-up receipts.
    public let deviceKeys: DeviceKeyRepository
    /// Origins and apps, and their change feed.
    public let config: ConfigRepository
    public let audit: AuditRepository
    /// Token signing keys, server secrets.
    public let keys: KeyRepository
    /// Events written with the changes they report, and their deliveries (webhooks, mail).
    public let outbox: OutboxRepository
    /// Webhook endpoints (their deliveries are outbox deliveries on channel `webhook`).
    public let webhooks: WebhookRepository
    public let admins: AdminRepository
    /// Verified addresses, one-time codes, per-account limits, recovery codes, recoveries (migration 9).
    public let recovery: RecoveryRepository
    /// Mail waiting to go out, for the mail channel's deliveries (migration 9).
    public let mail: MailRepository
    /// The last accepted FIDO MDS3 BLOB number per signing root (migration 13: no rollback).
    public let metadataState: MetadataStateRepository
    /// The OpenID Provider's clients, requests, codes and grants (migration 17).
    public let oauth: OAuthRepository
    /// The transparency log of receipt commitments (migration 26).
    public let transparencyLog: TransparencyLogRepository
    /// Quorum approvals: policies, approvals, who approved them, cancel links (migration 27).
    public let approvals: ApprovalRepository
    /// The PRF vault: salts and wrapped keys, ciphertext only (migration 28).
    public let vaults: VaultRepository
    public let portability: PortabilityRepository
    /// DPoP proofs seen, kept for their replay window (migration 30).
    public let dpopProofs: DPoPProofRepository

    /// Builds the pools (connections are opened lazily, up to `connections` in each).
    /// - Parameters:
    ///   - pooler: `.transaction` when a transaction-pooling proxy sits in front of `url`.
    ///   - listenURL: a direct connection (past any pooler) for LISTEN. Without it LISTEN uses `url`
    ///     with `pooler == .none`, and does not happen at all with `.transaction`.
    ///   - queryTimeout: seconds one database call may wait for the server (LATCHKEY_DB_QUERY_TIMEOUT).
    public init(url: String, connections: Int, pooler: PoolerMode = .none, listenURL: String? = nil,
                queryTimeout: Double = Database.defaultQueryTimeout) {
        self.pooler = pooler
        self.url = url
        directURL = listenURL
        self.queryTimeout = queryTimeout
        pool = Database.makePool(url: url, connections: connections, pooler: pooler, queryTimeout: queryTimeout)
        switch pooler {
        case .none:
            challengePool = Database.makePool(url: Database.asynchronousCommitURL(url), connections: connections, pooler: pooler,
                                              queryTimeout: queryTimeout)
        case .transaction:
            challengePool = pool
        }
        let listen = listenURL ?? (pooler == .none ? url : nil)
        challenges = ChallengeRepository(pool: challengePool, maintenance: pool)
        logins = LoginRepository(pool: pool)
        accounts = AccountRepository(pool: pool)
        sessions = SessionRepository(pool: pool, listenURL: listen)
        deviceKeys = DeviceKeyRepository(pool: pool)
        config = ConfigRepository(pool: pool, listenURL: listen)
        audit = AuditRepository(pool: pool)
        keys = KeyRepository(pool: pool)
        outbox = OutboxRepository(pool: pool)
        webhooks = WebhookRepository(pool: pool)
        admins = AdminRepository(pool: pool)
        recovery = RecoveryRepository(pool: pool)
        mail = MailRepository(pool: pool)
        metadataState = MetadataStateRepository(pool: pool)
        oauth = OAuthRepository(pool: pool)
        transparencyLog = TransparencyLogRepository(pool: pool)
        approvals = ApprovalRepository(pool: pool)
        vaults = VaultRepository(pool: pool)
        portability = PortabilityRepository(pool: pool)
        dpopProofs = DPoPProofRepository(pool: pool)
    }

    /// The one place a pool is made.
    private static func makePool(url: String, connections: Int, pooler: PoolerMode, queryTimeout: Double) -> PostgresPool {
        // Behind a transaction pooler: unnamed statements only, no session SET (PostgresConnection).
        PostgresPool(url: url, maxConnections: connections, transactionPooling: pooler == .transaction,
                     queryTimeout: .milliseconds(Int64(queryTimeout * 1000)))
    }

    /// Durable connections of their own for the tasks of one event loop (`LATCHKEY_EVENT_LOOPS`),
    /// with the pool's URL, pooler mode and per-call timeout.
    public func loopConnections(on loop: EventLoop, connections: Int) -> LoopConnections {
        LoopConnections(loop: loop, url: url, maxConnections: connections, transactionPooling: pooler == .transaction,
                        queryTimeout: .milliseconds(Int64(queryTimeout * 1000)))
    }

    /// LATCHKEY_DB_QUERY_TIMEOUT's default, in seconds.
    public static let defaultQueryTimeout = 5.0
    /// Seconds one database call may wait (and a request's budget for all of its calls).
    public let queryTimeout: Double

    /// `withinBudget` for a task on an event loop (the budget is a task-local, so it follows the task).
    public func withinBudget<T>(tracing: Bool = false, _ body: () async -> T) async -> (T, DatabaseFailure?, DatabaseWork) {
        let (value, budget) = await PostgresDeadline.within(seconds: queryTimeout, tracing: tracing, body)
        return (value, budget.lastFailure.map { DatabaseFailure(kind: $0.failureClass, reason: $0.description) },
                DatabaseWork(roundTrips: budget.counts, statements: budget.statements))
    }

    /// Runs `body` (one request's work) with all of its database calls bounded, together, by
    /// `queryTimeout`; returns what the last database failure inside it was, if any (for the
    /// 503's log line and metric: `DatabaseFailure.kind`), and its round trips to PostgreSQL by
    /// kind — with `tracing`, each one's statement text too (for the test that an unknown username
    /// or address costs the same statements as a known one).
    public func withinBudget<T>(tracing: Bool = false, _ body: () throws -> T) rethrows -> (T, DatabaseFailure?, DatabaseWork) {
        let (value, budget) = try PostgresDeadline.within(seconds: queryTimeout, tracing: tracing, body)
        return (value, budget.lastFailure.map { DatabaseFailure(kind: $0.failureClass, reason: $0.description) },
                DatabaseWork(roundTrips: budget.counts, statements: budget.statements))
    }

    /// `url` with `synchronous_commit=off` for every session (URI or key=value conninfo).
    static func asynchronousCommitURL(_ url: String) -> String {
        if url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") {
            return url + (url.contains("?") ? "&" : "?") + "options=-c%20synchronous_commit%3Doff"
        }
        return url + " options='-c synchronous_commit=off'"
    }

    /// Applies the migrations still missing (LatchkeyMigrations) and returns their versions; safe
    /// to call from several instances at once (the Migrator holds a session advisory lock). Behind a
    /// transaction pooler that lock needs a real session: the direct `listenURL` when given.
    @discardableResult
    public func migrate() throws(StorageError) -> [Int] {
        do {
            // The Migrator serialises with a transaction-scoped advisory lock, so this is safe through a
            // transaction pooler and with many instances starting at once.
            return try Migrator(LatchkeyMigrations.migrations).migrate(using: pool)
        } catch {
            throw StorageError(error)
        }
    }

    /// True when a pooled connection answers `SELECT 1`.
    public func ping() -> Bool { readiness() == nil }

    /// Nil when a pooled connection answers `SELECT 1` on a primary that accepts writes; else why not.
    public func readiness() -> DatabaseFailure? {
        do {
            let writable = try pool.withConnection { c in
                try c.query("SELECT NOT pg_is_in_recovery() AS writable").first?.bool("writable") ?? false
            }
            return writable ? nil : DatabaseFailure(kind: "read_only", reason: "the database is a standby (in recovery): no writes")
        } catch let error as PostgresError {
            return DatabaseFailure(kind: error.failureClass, reason: error.description)
        } catch {
            return DatabaseFailure(kind: "other", reason: String(describing: error))
        }
    }

    /// The durable pool's counters (the challenge pool, when separate, is not counted).
    public var connectionStats: (open: Int, inUse: Int, waiting: Int) {
        let stats = pool.stats
        return (stats.open, stats.inUse, stats.waiting)
    }

    /// Closes idle connections; later calls fail with `.unavailable`.
    public func shutdown() {
        pool.shutdown()
        if challengePool !== pool { challengePool.shutdown() }
    }
}

/// A database failure as logs and metrics name it: `kind` is one of a closed set (`connection_lost`,
/// `timeout`, `pool_timeout`, `serialization`, `read_only`, `query`, `other`); `reason` is the
/// PostgreSQL error's text (server messages, never bind values).
public struct DatabaseFailure: Sendable, Hashable, CustomStringConvertible {
    public let kind: String
    public let reason: String
    public init(kind: String, reason: String) {
        self.kind = kind
        self.reason = reason
    }
    public var description: String { "\(kind): \(reason)" }
}
