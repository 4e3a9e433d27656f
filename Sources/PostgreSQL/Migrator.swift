/// One numbered schema change.
public struct Migration: Sendable, Hashable {
    public let version: Int
    public let name: String
    public let sql: String

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }
}

/// Applies numbered migrations in order, each in its own transaction, recording them in a table
/// (`schema_migrations` by default). Several instances starting at once do not race:
///
/// - Each migration's transaction takes `pg_advisory_xact_lock(lockKey)` and then checks, inside
///   the transaction, whether its version is already recorded; if so it skips it. This is what
///   makes a migration apply exactly once, and it holds through PgBouncer in transaction mode,
///   where consecutive transactions may run on different server sessions.
/// - On a connection without `transactionPooling` the whole run also holds the session-level
///   `pg_advisory_lock` on the same key, so runs are serialised: the second instance waits, then
///   finds everything applied. Through transaction pooling a session lock would stay behind on
///   whichever server session took it, so there runs may interleave (each migration still
///   applies once, in order).
///
/// Migration SQL runs through the simple query protocol inside the transaction, so it may hold
/// several statements, but nothing that refuses a transaction block (`CREATE INDEX CONCURRENTLY`).
public struct Migrator: Sendable {
    public let migrations: [Migration]
    public let table: String
    /// The advisory lock key (session and transaction level); derived from the table name.
    public let lockKey: Int64

    public init(_ migrations: [Migration], table: String = "schema_migrations") throws {
        guard !table.isEmpty, table.utf8.count <= 63,
              table.utf8.allSatisfy({ $0 == UInt8(ascii: "_") || (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) }),
              !(0x30...0x39).contains(table.utf8.first!)
        else { throw PostgresError(.invalidArgument, "migration table name must be a lower-case identifier") }
        var seen = Set<Int>()
        for m in migrations {
            guard m.version > 0 else {
                throw PostgresError(.invalidArgument, "migration versions must be positive (got \(m.version))")
            }
            guard seen.insert(m.version).inserted else {
                throw PostgresError(.invalidArgument, "migration version \(m.version) appears twice")
            }
        }
        self.migrations = migrations.sorted { $0.version < $1.version }
        self.table = table
        // "Latchkey" in ASCII, mixed with a stable (FNV-1a) hash of the table name.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in table.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        self.lockKey = Int64(bitPattern: 0x4C61_7463_686B_6579 ^ (hash & 0x00FF_FFFF_FFFF_FFFF))
    }

    /// Convenience for `[(version, name, sql)]` lists.
    public init(_ migrations: [(version: Int, name: String, sql: String)], table: String = "schema_migrations") throws {
        try self.init(migrations.map { Migration(version: $0.version, name: $0.name, sql: $0.sql) }, table: table)
    }

    /// Applies what is missing on `connection` and returns the versions applied by this call
    /// (empty when the schema was current). Throws the failing migration's error; migrations
    /// before it stay applied, it and later ones do not.
    /// Runs without a client-side deadline (`PostgresDeadline.unbounded`): a migration may rightly
    /// take minutes, and another instance's run may hold the lock that long.
    @discardableResult
    public func migrate(on connection: PostgresConnection) throws -> [Int] {
        try PostgresDeadline.unbounded { try migrateUnbounded(on: connection) }
    }

    private func migrateUnbounded(on connection: PostgresConnection) throws -> [Int] {
        guard !connection.isInTransaction else {
            throw PostgresError(.invalidArgument, "migrate must not run inside a transaction")
        }
        let sessionLock = !connection.transactionPooling
        if sessionLock { try connection.execute("SELECT pg_advisory_lock(\(lockKey))") }
        defer { if sessionLock { _ = try? connection.execute("SELECT pg_advisory_unlock(\(lockKey))") } }

        // Under the lock: two first runs would otherwise race on creating the table.
        try locked(on: connection) { conn in
            try conn.executeScript("""
                CREATE TABLE IF NOT EXISTS \(table) (
                    version bigint PRIMARY KEY,
                    name text NOT NULL,
                    applied_at timestamptz NOT NULL DEFAULT now()
                )
                """)
        }
        let done = Set(try versions(on: connection))  // the table exists now
        var applied: [Int] = []
        for migration in migrations where !done.contains(migration.version) {
            do {
                let ran = try locked(on: connection) { conn -> Bool in
                    // Another migrator may have applied it since `done` was read.
                    let recorded = try conn.query(SQL(unsafeRaw: "SELECT 1 AS present FROM \(table) WHERE version = $1",
                                                      binds: [.int(migration.version)]))
                    guard recorded.isEmpty else { return false }
                    try conn.executeScript(migration.sql)
                    try conn.execute(SQL(unsafeRaw: "INSERT INTO \(table) (version, name) VALUES ($1, $2)",
                                         binds: [.int(migration.version), .text(migration.name)]))
                    return true
                }
                if ran { applied.append(migration.version) }
            } catch let error as PostgresError {
                throw PostgresError(error.code, "migration \(migration.version) (\(migration.name)) failed: \(error.reason)",
                                    sqlState: error.sqlState, column: error.column, constraint: error.constraint)
            }
        }
        return applied
    }

    /// Takes a connection from `pool` for the whole run (the session lock, when there is one, is
    /// per session).
    @discardableResult
    public func migrate(using pool: PostgresPool) throws -> [Int] {
        try PostgresDeadline.unbounded { try pool.withConnection { try migrate(on: $0) } }
    }

    /// Versions recorded in the migrations table, ascending (empty if the table does not exist).
    public func appliedVersions(on connection: PostgresConnection) throws -> [Int] {
        let exists = try connection.query("SELECT to_regclass(\(table)) IS NOT NULL AS present")
        guard try exists.first?.bool("present") == true else { return [] }
        return try versions(on: connection)
    }

    /// `body` in a READ COMMITTED transaction holding `pg_advisory_xact_lock(lockKey)` until it
    /// ends. READ COMMITTED takes a snapshot per statement, so what `body` reads after the lock was
    /// granted includes everything committed by the migrator that held it before (under REPEATABLE
    /// READ the snapshot would date from the lock statement itself, before the wait ended).
    /// A session that holds the session-level lock on the same key gets this one at once.
    @discardableResult
    private func locked<T>(on connection: PostgresConnection, _ body: (PostgresConnection) throws -> T) throws -> T {
        try connection.transaction(isolation: .readCommitted) { conn in
            try conn.execute("SELECT pg_advisory_xact_lock(\(lockKey))")
            return try body(conn)
        }
    }

    private func versions(on connection: PostgresConnection) throws -> [Int] {
        try connection.query(SQL(unsafeRaw: "SELECT version FROM \(table) ORDER BY version")).map { try $0.int("version") }
    }
}
