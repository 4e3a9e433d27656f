import CLibPQ
import Glibc

/// One statement's round trip with a deadline: sent with a `PQsend…` call, the socket polled until
/// the results are in or the deadline passes (libpq's own `PQexec` waits for ever).
enum Exchange {
    /// Sends with `send`, then reads every result. Returns the last successful result (the caller
    /// clears it); throws the first failed one's error (`PostgresConnection.failure`), `.connection`
    /// when the connection broke, and `.timeout` when `deadline` (monotonic nanoseconds) passed, in
    /// which case a cancel request has been sent from a detached thread and `fatal` is set: the
    /// connection is never used again (its protocol state is mid-statement).
    static func run(_ handle: OpaquePointer, _ fatal: UnsafeMutablePointer<Int32>, deadline: UInt64?,
                    send: (OpaquePointer) -> Int32) throws -> OpaquePointer {
        guard fatal.pointee == 0, PQstatus(handle) == CONNECTION_OK else {
            throw PostgresError(.connection, "the connection was dropped (the server closed it, or an earlier call timed out)")
        }
        guard send(handle) == 1 else { throw PostgresConnection.failure(handle, nil) }
        var kept: OpaquePointer? = nil
        var failed: OpaquePointer? = nil
        func clear() {
            if let kept { PQclear(kept) }
            if let failed { PQclear(failed) }
        }
        while true {
            while PQisBusy(handle) == 1 {
                var waitMilliseconds: Int32 = 60_000
                if let deadline {
                    let now = ConditionLock.monotonicNanoseconds()
                    guard now < deadline else {
                        clear()
                        _ = lk_cancel_in_background(handle)
                        fatal.pointee = 1
                        throw PostgresError(.timeout, "the server did not answer within the deadline; the statement was cancelled and the connection dropped")
                    }
                    waitMilliseconds = Int32(min((deadline - now) / 1_000_000 + 1, 60_000))
                }
                let ready = lk_wait_readable(handle, waitMilliseconds)
                if ready < 0 {
                    if errno == EINTR { continue }
                    clear()
                    throw PostgresError(.connection, "poll failed (errno \(errno))")
                }
                if ready > 0, PQconsumeInput(handle) == 0 {
                    clear()
                    throw PostgresConnection.failure(handle, nil)
                }
            }
            guard let result = PQgetResult(handle) else { break }
            switch PQresultStatus(result) {
            case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY, PGRES_SINGLE_TUPLE:
                if let kept { PQclear(kept) }
                kept = result
            default:
                if failed == nil { failed = result } else { PQclear(result) }
            }
        }
        if let failed {
            if let kept { PQclear(kept) }
            defer { PQclear(failed) }
            throw PostgresConnection.failure(handle, failed)
        }
        guard let kept else { throw PostgresConnection.failure(handle, nil) }
        return kept
    }
}

/// libpq keywords added to every connection URL that does not set them: a hung or unreachable
/// host is given up on in seconds, not in libpq's and the kernel's minutes.
///
/// - `connect_timeout=2` (libpq's minimum): per host, so a multi-host URL moves on from a hung
///   host quickly.
/// - `keepalives=1`, `keepalives_idle=5`, `keepalives_interval=2`, `keepalives_count=3`: an idle
///   connection to a vanished machine is noticed in about 11 s.
/// - `tcp_user_timeout=10000` (ms): data the peer does not acknowledge for 10 s breaks the connection.
///
/// An operator who sets any of these in `DATABASE_URL` keeps their value.
public enum ConnectionDefaults {
    public static let values: [(String, String)] = [
        ("connect_timeout", "2"), ("keepalives", "1"), ("keepalives_idle", "5"), ("keepalives_interval", "2"),
        ("keepalives_count", "3"), ("tcp_user_timeout", "10000"),
    ]

    /// The defaults `url` (a URI or a key=value string) does not mention.
    public static func missing(from url: String) -> [(String, String)] {
        values.filter { key, _ in !mentions(url, key) }
    }

    /// Whether `key` appears as a keyword (`key=` in a conninfo string or a URI's query).
    static func mentions(_ url: String, _ key: String) -> Bool {
        url.split(whereSeparator: { $0 == "?" || $0 == "&" || $0 == " " || $0 == "\t" })
            .contains { $0.hasPrefix(key + "=") }
    }
}

extension PostgresDeadline {
    /// The `statement_timeout` for a transaction starting now: the remaining budget in
    /// milliseconds (at least 1), or 0 (none) without a deadline.
    static func statementTimeoutMilliseconds(limit: Duration) -> UInt64 {
        guard let deadline = callDeadline(limit: limit) else { return 0 }
        let now = ConditionLock.monotonicNanoseconds()
        return deadline > now ? max(1, (deadline - now) / 1_000_000) : 1
    }
}

/// Calls `body` with a C array of NUL-terminated strings.
func withCStringArray<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    var pointers: [UnsafePointer<CChar>?] = strings.map { UnsafePointer(strdup($0)) }
    pointers.append(nil)
    defer { for p in pointers { free(UnsafeMutablePointer(mutating: p)) } }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}
