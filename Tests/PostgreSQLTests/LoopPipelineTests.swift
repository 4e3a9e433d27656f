import EventLoop
import Glibc
import Synchronization
import Testing
@testable import PostgreSQL

/// `pipeline(_:on:)` and `LoopConnections` against the real server: the same answers, errors,
/// deadlines and round-trip counts as the blocking pipeline, with the waits on an event loop.
@Suite("PostgreSQL pipelines on an event loop")
struct LoopPipelineTests {
    /// Runs `body` as a task on a fresh loop with `connections` connections to the test database.
    private func onLoop<T: Sendable>(connections: Int = 2, queryTimeout: Duration = .seconds(5),
                                     _ body: @escaping @Sendable (LoopConnections) async throws -> T) async throws -> T {
        let loop = EventLoop()
        loop.start()
        defer { loop.stop() }
        let pool = LoopConnections(loop: loop, url: try TestDatabase.url(), maxConnections: connections, queryTimeout: queryTimeout)
        return try await Task(executorPreference: loop) { try await body(pool) }.value
    }

    @Test("a transaction over two round trips reads, writes and commits; the round trips are counted")
    func transaction() async throws {
        let table = TestDatabase.uniqueName("loop_tx")
        try TestDatabase.connect().execute("CREATE TABLE \(unsafeRaw: table) (id int PRIMARY KEY, note text)")
        let (value, budget) = try await onLoop { pool in
            // The connection opened first, so that its session settings are not counted below.
            _ = try await pool.withConnection { c in try await c.pipeline(["SELECT 1"], on: pool.loop) }
            return await PostgresDeadline.within(seconds: 5) { () async -> Result<String, PostgresError> in
                do {
                    return .success(try await pool.withConnection { c in
                        let read = try await c.pipeline(["BEGIN", "SELECT count(*)::int8 AS n FROM \(unsafeRaw: table)"], on: pool.loop)
                        let n = try read[1][0].int64("n")
                        try await c.pipeline(["INSERT INTO \(unsafeRaw: table) VALUES (\(n + 1), \("a 'quoted' note"))", "COMMIT"], on: pool.loop)
                        return try await c.pipeline(["SELECT note FROM \(unsafeRaw: table) WHERE id = \(Int64(1))"], on: pool.loop)[0][0].string("note")
                    })
                } catch {
                    return .failure(error as? PostgresError ?? PostgresError(.connection, "\(error)"))
                }
            }
        }
        #expect(try value.get() == "a 'quoted' note")
        #expect(budget.roundTrips == 3)
    }

    @Test("a failing statement throws its error, skips the rest, and the connection is lent again afterwards")
    func failure() async throws {
        let outcome = try await onLoop(connections: 1) { pool in
            var code: String? = nil
            do {
                _ = try await pool.withConnection { c in try await c.pipeline(["SELECT 1/0", "SELECT 2"], on: pool.loop) }
            } catch let error as PostgresError {
                code = error.sqlState
            }
            let after = try await pool.withConnection { c in try await c.pipeline(["SELECT 41 + \(Int64(1)) AS n"], on: pool.loop)[0][0].int64("n") }
            return (code, after, pool.counts.open)
        }
        #expect(outcome.0 == "22012")
        #expect(outcome.1 == 42)
        #expect(outcome.2 == 1)
    }

    @Test("a statement past its deadline is cancelled: .timeout, and the broken connection is not lent again")
    func deadline() async throws {
        let outcome = try await onLoop(connections: 1, queryTimeout: .milliseconds(200)) { pool in
            var code: PostgresError.Code? = nil
            do {
                _ = try await pool.withConnection { c in try await c.pipeline(["SELECT pg_sleep(5)"], on: pool.loop) }
            } catch let error as PostgresError {
                code = error.code
            }
            let openAfterTimeout = pool.counts.open
            let after = try await pool.withConnection { c in try await c.pipeline(["SELECT 1 AS n"], on: pool.loop)[0][0].int64("n") }
            return (code, openAfterTimeout, after)
        }
        #expect(outcome.0 == .timeout)
        #expect(outcome.1 == 0)
        #expect(outcome.2 == 1)
    }

    @Test("more tasks than connections: each waits its turn on the loop, and every one is answered")
    func moreTasksThanConnections() async throws {
        let answers = try await onLoop(connections: 2) { pool in
            try await withThrowingTaskGroup(of: Int64.self) { group in
                for n in 0..<20 {
                    group.addTask(executorPreference: pool.loop) {
                        try await pool.withConnection { c in
                            try await c.pipeline(["SELECT pg_sleep(0.01), \(Int64(n)) AS n"], on: pool.loop)[0][0].int64("n")
                        }
                    }
                }
                var all: [Int64] = []
                for try await n in group { all.append(n) }
                return (all.sorted(), pool.counts.open)
            }
        }
        #expect(answers.0 == Array(0..<20))
        #expect(answers.1 == 2)
    }

    @Test("a task that finds every connection lent until its deadline fails .poolTimeout; the next is lent the connection")
    func acquireTimeout() async throws {
        let loop = EventLoop()
        loop.start()
        defer { loop.stop() }
        let pool = LoopConnections(loop: loop, url: try TestDatabase.url(), maxConnections: 1, acquireTimeout: .milliseconds(100))
        let outcome = try await Task(executorPreference: loop) { () async throws -> (holder: Int64, waiter: PostgresError.Code?, next: Int64) in
            // One loop thread runs its tasks in order: the holder takes the only connection and
            // suspends in its statement before the waiter asks for one.
            try await withThrowingTaskGroup(of: (Int64?, PostgresError.Code?).self) { group in
                group.addTask(executorPreference: loop) {
                    (try await pool.withConnection { c in try await c.pipeline(["SELECT pg_sleep(1), 7 AS n"], on: loop)[0][0].int64("n") }, nil)
                }
                group.addTask(executorPreference: loop) {
                    do {
                        _ = try await pool.withConnection { c in try await c.pipeline(["SELECT 1"], on: loop) }
                        return (nil, nil)
                    } catch let error as PostgresError {
                        return (nil, error.code)
                    }
                }
                var holder: Int64 = 0
                var waiter: PostgresError.Code? = nil
                for try await (value, code) in group {
                    if let value { holder = value }
                    if let code { waiter = code }
                }
                let next = try await pool.withConnection { c in try await c.pipeline(["SELECT 8 AS n"], on: loop)[0][0].int64("n") }
                return (holder, waiter, next)
            }
        }.value
        #expect(outcome.holder == 7)
        #expect(outcome.waiter == .poolTimeout)
        #expect(outcome.next == 8)
    }

    @Test("a connection being opened does not stop the loop: its other tasks run meanwhile, and a connect that fails throws")
    func connectOffTheLoop() async throws {
        // A server that completes the TCP handshake (the kernel's backlog) and never answers the
        // startup packet: libpq waits there until connect_timeout.
        let silent = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { Glibc.close(silent) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(silent, $0, length) == 0 && listen(silent, 4) == 0 && getsockname(silent, $0, &length) == 0 }
        }
        try #require(bound)
        let loop = EventLoop()
        loop.start()
        defer { loop.stop() }
        let pool = LoopConnections(loop: loop, url: "postgresql://nobody@127.0.0.1:\(UInt16(bigEndian: address.sin_port))/none?connect_timeout=1",
                                   maxConnections: 1)
        let outcome = await Task(executorPreference: loop) { () async -> (failed: PostgresError.Code?, otherRanFirst: Bool) in
            let other = RanFlag()
            return await withTaskGroup(of: PostgresError.Code?.self) { group in
                // The connecting task runs first; on one loop thread the other runs only once the
                // first has let go of the thread.
                group.addTask(executorPreference: loop) {
                    do {
                        _ = try await pool.withConnection { c in try await c.pipeline(["SELECT 1"], on: loop) }
                        return nil
                    } catch let error as PostgresError {
                        return other.ran.load(ordering: .relaxed) ? error.code : nil
                    } catch {
                        return nil
                    }
                }
                group.addTask(executorPreference: loop) {
                    other.ran.store(true, ordering: .relaxed)
                    return nil
                }
                var failed: PostgresError.Code? = nil
                for await code in group where code != nil { failed = code }
                return (failed, other.ran.load(ordering: .relaxed))
            }
        }.value
        #expect(outcome.failed == .connection, "the connect failed after the loop's other task had run")
        #expect(outcome.otherRanFirst)
    }

    @Test("close: the idle connections are closed on the loop, and none is lent again")
    func close() async throws {
        let loop = EventLoop()
        loop.start()
        defer { loop.stop() }
        let pool = LoopConnections(loop: loop, url: try TestDatabase.url(), maxConnections: 2)
        let opened = try await Task(executorPreference: loop) { () async throws -> Int in
            _ = try await pool.withConnection { c in try await c.pipeline(["SELECT 1"], on: loop) }
            return pool.counts.open
        }.value
        pool.close()
        let after = await Task(executorPreference: loop) { pool.counts.open }.value
        #expect(opened == 1)
        #expect(after == 0)
    }
}

/// Whether a task has run (shared by the tasks of one test).
private final class RanFlag: Sendable {
    let ran = Atomic<Bool>(false)
}
