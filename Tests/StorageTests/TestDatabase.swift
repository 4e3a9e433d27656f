import Foundation
import PostgreSQL
import PostgreSQLTesting
import Storage

/// Where the Storage tests run (`TestCluster`: `DATABASE_URL`, else the throwaway test cluster). Each test gets
/// a database of its own (`scratch()`), so tests run in parallel and migrations start from nothing.
enum TestDatabase {
    static func url() throws -> String { try TestCluster.url() }

    /// A new, empty database on the test server, migrated unless `migrated` is false.
    static func scratch(migrated: Bool = true, pooler: PoolerMode = .none) throws -> Scratch {
        let scratch = try Scratch(pooler: pooler)
        if migrated { try scratch.database.migrate() }
        return scratch
    }

    /// A fresh lower-case identifier (tests run in parallel).
    static func uniqueName(_ prefix: String) -> String { TestCluster.uniqueName(prefix) }
}

/// A database created for one test, dropped when the test lets go of it.
final class Scratch: Sendable {
    let name: String
    let url: String
    let database: Database
    private let serverURL: String

    init(pooler: PoolerMode) throws {
        let serverURL = try TestDatabase.url()
        self.serverURL = serverURL
        name = TestDatabase.uniqueName("lk_storage")
        let admin = try PostgresConnection(url: serverURL)
        try admin.execute(SQL(unsafeRaw: "CREATE DATABASE \(name)"))
        // Same server and parameters, other database: postgresql://…/<name>[?…].
        let query = serverURL.firstIndex(of: "?").map { String(serverURL[$0...]) } ?? ""
        let base = String(serverURL.dropLast(query.count))
        guard let slash = base.lastIndex(of: "/"), base.contains("://") else {
            throw TestSetupError(message: "the Storage tests need a postgresql:// URL")
        }
        url = String(base[...slash]) + name + query
        database = Database(url: url, connections: 4, pooler: pooler)
    }

    /// A connection of its own, for checks the repositories do not offer.
    func connect() throws -> PostgresConnection { try PostgresConnection(url: url) }

    /// Polls (at most 20 s) until a backend of this database waits for a lock (held by backend
    /// `pid`, when given), or `done` holds first: how a race test sees one side waiting on the other.
    func waitsForALock(blockedBy pid: Int? = nil, unless done: () -> Bool) throws -> Bool {
        let observer = try connect()
        let by: SQL = pid.map { " AND \($0) = ANY (pg_blocking_pids(pid))" } ?? ""
        for _ in 0..<400 {
            if try observer.query("""
                SELECT count(*)::int AS n FROM pg_stat_activity
                WHERE datname = current_database() AND wait_event_type = 'Lock'\(fragment: by)
                """)[0].int("n") > 0 { return true }
            if done() { return false }
            usleep(50_000)
        }
        return false
    }

    /// The number of rows `sql` (a `SELECT count(*) AS n …`) counts.
    func count(_ sql: SQL) throws -> Int { try connect().query(sql)[0].int("n") }

    deinit {
        database.shutdown()
        if let admin = try? PostgresConnection(url: serverURL) {
            _ = try? admin.execute(SQL(unsafeRaw: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"))
        }
    }
}
