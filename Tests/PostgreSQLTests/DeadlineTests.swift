import Foundation
@testable import PostgreSQL
import PostgreSQLTesting
import Testing

/// Issue 23: every call has a deadline. Against the real test cluster: `pg_sleep` for a server
/// that is slow, a SIGSTOPped backend for one that is hung (only that backend: the cluster and the
/// other suites carry on).
@Suite("Query deadlines against a real server")
struct DeadlineTests {
    @Test("a statement past queryTimeout throws .timeout, drops the connection, and is cancelled on the server")
    func slowStatement() throws {
        let connection = try PostgresConnection(url: try TestDatabase.url(), queryTimeout: .milliseconds(300))
        let pid = connection.backendPID
        #expect(throws: PostgresError(.timeout, "")) { try connection.query("SELECT pg_sleep(30) AS slept") }
        #expect(!connection.isConnected, "a timed-out connection is never used again")
        #expect(throws: PostgresError(.connection, "")) { try connection.query("SELECT 1 AS one") }
        // The cancel (sent from a detached thread) reaches the server: the backend stops sleeping.
        let observer = try TestDatabase.connect()
        let stopped = poll(seconds: 20) {
            (try? observer.query(SQL(unsafeRaw: "SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1 AND query LIKE '%pg_sleep(30)%' AND state = 'active'",
                                     binds: [.int(Int(pid))])).first?.int("n")) == 0
        }
        #expect(stopped, "the server still runs the statement the client gave up on")
    }

    @Test("a hung backend (SIGSTOP): the query times out instead of blocking; the pool replaces the connection")
    func hungBackend() throws {
        let pool = PostgresPool(url: try TestDatabase.url(), maxConnections: 1, queryTimeout: .milliseconds(400))
        let pid = try pool.query("SELECT pg_backend_pid() AS pid").first!.int("pid")
        #expect(kill(pid_t(pid), SIGSTOP) == 0, "could not stop backend \(pid) (the tests must run as its owner or root)")
        defer { kill(pid_t(pid), SIGCONT) }
        #expect(throws: PostgresError(.timeout, "")) { try pool.query("SELECT 1 AS one") }
        kill(pid_t(pid), SIGCONT)
        // A new connection, another backend.
        let next = try pool.query("SELECT pg_backend_pid() AS pid").first!.int("pid")
        #expect(next != pid)
        #expect(pool.stats.discarded >= 1)
    }

    @Test("a request budget bounds all calls together and records the failure's class")
    func budget() throws {
        let pool = PostgresPool(url: try TestDatabase.url(), maxConnections: 2, queryTimeout: .seconds(30))
        let (outcome, budget) = PostgresDeadline.within(seconds: 0.3) { () -> Result<[Row], any Error> in
            Result { try pool.query("SELECT pg_sleep(10) AS slept") }
        }
        guard case .failure(let error as PostgresError) = outcome else { Issue.record("expected a timeout, got \(outcome)"); return }
        #expect(error.code == .timeout)
        #expect(budget.lastFailure?.failureClass == "timeout")
        // Outside a budget the pool's own timeout applies (30 s here): a quick query is fine.
        #expect(try pool.query("SELECT 1 AS one").count == 1)
    }

    @Test("transactions carry the remaining budget as statement_timeout; migrations (unbounded) none")
    func statementTimeout() throws {
        let pool = PostgresPool(url: try TestDatabase.url(), maxConnections: 1, queryTimeout: .seconds(4))
        let bounded = try pool.transaction { try $0.query("SELECT current_setting('statement_timeout') AS t").first!.string("t") }
        let ms = Int(bounded.replacingOccurrences(of: "ms", with: "")) ?? (bounded.hasSuffix("s") ? (Int(bounded.dropLast()) ?? 0) * 1000 : -1)
        #expect(ms > 0 && ms <= 4000, "statement_timeout inside a transaction: \(bounded)")
        let unbounded = try PostgresDeadline.unbounded {
            try pool.transaction { try $0.query("SELECT current_setting('statement_timeout') AS t").first!.string("t") }
        }
        #expect(unbounded == "0")
        // SET LOCAL: nothing stays on the session afterwards.
        #expect(try pool.query("SELECT current_setting('statement_timeout') AS t").first!.string("t") == "0")
        // A lower statement_timeout of the session's own (a DBA's ALTER DATABASE / ROLE) is kept.
        let lower = try pool.withConnection { c -> String in
            try c.execute("SET statement_timeout = '1500ms'")
            defer { _ = try? c.execute("RESET statement_timeout") }
            return try c.transaction { try $0.query("SELECT current_setting('statement_timeout') AS t").first!.string("t") }
        }
        #expect(lower == "1500ms")
    }

    @Test("a LISTEN connection's ping notices a hung backend")
    func listenerPing() throws {
        let listener = try PostgresListener(url: try TestDatabase.url(), channels: ["lk_deadline_test"])
        try listener.ping(timeout: .seconds(5))
        let pid = listener.backendPID
        kill(pid_t(pid), SIGSTOP)
        defer { kill(pid_t(pid), SIGCONT) }
        #expect(throws: PostgresError(.timeout, "")) { try listener.ping(timeout: .milliseconds(300)) }
        #expect(!listener.isConnected)
    }

    @Test("connection URLs get a short connect_timeout, keepalives and tcp_user_timeout unless they set them")
    func connectionDefaults() {
        let added = ConnectionDefaults.missing(from: "postgresql://u@h/db").map(\.0)
        #expect(added == ["connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout"])
        let uri = ConnectionDefaults.missing(from: "postgresql://u@h1,h2/db?target_session_attrs=read-write&keepalives_idle=30&connect_timeout=9").map(\.0)
        #expect(!uri.contains("keepalives_idle") && !uri.contains("connect_timeout") && uri.contains("keepalives"))
        let conninfo = ConnectionDefaults.missing(from: "host=h dbname=db tcp_user_timeout=2000").map(\.0)
        #expect(!conninfo.contains("tcp_user_timeout") && conninfo.contains("connect_timeout"))
        // A keyword inside another value is not a setting.
        #expect(ConnectionDefaults.missing(from: "postgresql://u@h/db?application_name=xconnect_timeout=1").map(\.0).contains("connect_timeout"))
    }
}

extension DeadlineTests {
    @Test("a multi-host URL's host that broke or timed out is tried last from then on")
    func hostOrder() {
        let url = "postgresql://u:p@10.9.8.1:5432,10.9.8.2:5433,db3/latchkey?target_session_attrs=read-write"
        #expect(HostOrder.split(url)?.hosts == ["10.9.8.1:5432", "10.9.8.2:5433", "db3"])
        #expect(HostOrder.apply(url) == url)
        HostOrder.demote(url: url, host: "10.9.8.1:5432")
        #expect(HostOrder.apply(url) == "postgresql://u:p@10.9.8.2:5433,db3,10.9.8.1:5432/latchkey?target_session_attrs=read-write")
        // The other pools' URLs (extra options) share the order.
        #expect(HostOrder.apply(url + "&options=-c%20synchronous_commit%3Doff").hasPrefix("postgresql://u:p@10.9.8.2:5433,db3,10.9.8.1:5432/"))
        HostOrder.demote(url: url, host: "db3:5432")
        #expect(HostOrder.split(HostOrder.apply(url))?.hosts == ["10.9.8.2:5433", "10.9.8.1:5432", "db3"])
        // Single hosts and key=value strings are used as written.
        #expect(HostOrder.apply("postgresql://u@h/db") == "postgresql://u@h/db")
        #expect(HostOrder.apply("host=a,b dbname=x") == "host=a,b dbname=x")
    }
}

/// Polls `condition` every 50 ms for up to `seconds` (a bound against hanging, not a timing check).
private func poll(seconds: Double, _ condition: () -> Bool) -> Bool {
    let end = Date().addingTimeInterval(seconds)
    while Date() < end {
        if condition() { return true }
        Thread.sleep(forTimeInterval: 0.05)
    }
    return condition()
}
