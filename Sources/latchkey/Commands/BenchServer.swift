import HTTP
import LatchkeyServer
import PostgreSQL
#if canImport(Glibc)
import Glibc
#endif

/// A `latchkey serve` this bench starts on a free loopback port (LATCHKEY_DEV=1, no rate limit,
/// the default thread count), optionally under valgrind's callgrind with instrumentation off
/// until asked; its output goes to a log file.
final class BenchServer {
    let pid: pid_t
    let port: Int
    let logPath: String
    let callgrindDir: String?
    private var stopped = false
    var origin: String { "http://localhost:\(port)" }

    private init(pid: pid_t, port: Int, logPath: String, callgrindDir: String?) {
        self.pid = pid
        self.port = port
        self.logPath = logPath
        self.callgrindDir = callgrindDir
    }

    /// `extraEnvironment`: more `NAME=value` settings, after (so over) the bench's own.
    static func start(databaseURL: String, callgrind: Bool, binary me: String, extraEnvironment: [String] = []) -> BenchServer? {
        guard let port = freePort() else { printError("no free port"); return nil }
        // The server's log stays for a failure's message to point at.
        guard let logDirectory = privateTemporaryDirectory("latchkey-bench-server") else { return nil }
        let logPath = "\(logDirectory)/serve-\(port).log"
        var argv = [me, "serve"]
        var dir: String? = nil
        if callgrind {
            guard let valgrind = findValgrind() else { printError("valgrind not found"); return nil }
            let d = "\(logDirectory)/callgrind"
            mkdir(d, 0o700)
            dir = d
            argv = [valgrind, "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=\(d)/callgrind.out"] + argv
        }
        let environment = Configuration.processEnvironment()
        let kek = environment["LATCHKEY_KEY_ENCRYPTION_KEY"] ?? "bGF0Y2hrZXktYmVuY2gta2VrLTMyLWJ5dGVzLS0tLS0="
        let env = ["DATABASE_URL=\(databaseURL)", "LATCHKEY_DEV=1", "LATCHKEY_LISTEN=127.0.0.1:\(port)",
                   "LATCHKEY_ORIGINS=http://localhost:\(port)", "LATCHKEY_RATE_LIMIT=0", "LATCHKEY_KEY_ENCRYPTION_KEY=\(kek)",
                   "LATCHKEY_ADMIN_LISTEN=", "LATCHKEY_BENCH_LOG=\(logPath)"] + extraEnvironment
        // `exec` keeps the pid: /proc/<pid> is the server's (or valgrind's, which runs the server in-process).
        let shell = ["/bin/sh", "-c", "exec \"$@\" >\"$LATCHKEY_BENCH_LOG\" 2>&1", "sh"] + argv
        guard let child = spawn(shell, extraEnvironment: env) else { printError("cannot start \(me) serve"); return nil }
        let server = BenchServer(pid: child.pid, port: port, logPath: logPath, callgrindDir: dir)
        let client = HTTPClient(host: "127.0.0.1", port: port, timeoutSeconds: 5)
        defer { client.close() }
        let deadline = monotonicNow() + (callgrind ? 300 : 60)
        while monotonicNow() < deadline {
            if let r = try? client.send(method: "GET", path: "/readyz"), r.status == 200 { return server }
            var status: Int32 = 0
            if waitpid(child.pid, &status, WNOHANG) == child.pid {
                server.stopped = true
                printError("the bench's server exited; its log: \(logPath)"); return nil
            }
            usleep(200_000)
        }
        printError("the bench's server did not become ready; its log: \(logPath)")
        server.stop()
        return nil
    }

    func stop() {
        guard !stopped else { return }
        stopped = true
        kill(pid, SIGTERM)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }

    /// utime + stime of the server process, in seconds.
    func cpuSeconds() -> Double { processCPUSeconds(pid) ?? 0 }

    func peakRSSKiB() -> Int { LoginBenchmark.peakRSS(pid: pid) ?? 0 }

    /// `callgrind_control <arguments> <pid>`.
    func callgrind(_ arguments: String...) {
        let candidates: [String] = ["/usr/bin/callgrind_control", "/usr/local/bin/callgrind_control"]
        guard let control = candidates.first(where: { access($0, X_OK) == 0 }) else { return }
        _ = runProcess([control] + arguments + ["\(pid)"])
    }

    /// The instructions in every dump callgrind wrote (instrumentation was on only for the load).
    func callgrindTotal(keepDirectory: Bool = false) -> Double {
        guard let dir = callgrindDir, let d = opendir(dir) else { return 0 }
        defer { closedir(d) }
        var total = 0.0
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
            guard name.hasPrefix("callgrind.out") else { continue }
            let path = "\(dir)/\(name)"
            if let bytes = readFile(path, limit: 1 << 28) {
                for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") where line.hasPrefix("totals:") {
                    total += Double(line.split(separator: " ").dropFirst().first ?? "") ?? 0
                }
            }
            unlink(path)
        }
        if !keepDirectory { rmdir(dir) }
        return total
    }
}

/// utime + stime of `pid` from /proc/<pid>/stat, in seconds.
func processCPUSeconds(_ pid: pid_t) -> Double? {
    guard let bytes = readFile("/proc/\(pid)/stat") else { return nil }
    let text = String(decoding: bytes, as: UTF8.self)
    // Fields after the command name (which may hold spaces) start at state, field 3.
    guard let close = text.lastIndex(of: ")") else { return nil }
    let fields = text[text.index(after: close)...].split(separator: " ")
    guard fields.count > 12, let u = Double(fields[11]), let s = Double(fields[12]) else { return nil }
    return (u + s) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// This executable's path (valgrind needs it, /proc/self/exe would name valgrind).
func executablePath() -> String {
    var buffer = [CChar](repeating: 0, count: 4096)
    let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    return n > 0 ? String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : "/proc/self/exe"
}

func findValgrind() -> String? {
    let candidates: [String] = ["/usr/bin/valgrind", "/usr/local/bin/valgrind"]
    return candidates.first { access($0, X_OK) == 0 }
}

/// A new directory of this user's alone under /tmp (mkdtemp: a fresh name, mode 0700), for what a
/// bench writes: a fixed name there (the pid) could be made first by another user, and a file
/// opened in it would be written through their symlink.
func privateTemporaryDirectory(_ prefix: String) -> String? {
    var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { printError("mkdtemp /tmp/\(prefix)-…: \(String(cString: strerror(errno)))"); return nil }
    return String(cString: made)
}

/// A loopback port that was free a moment ago.
func freePort() -> Int? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    guard bound == 0 else { return nil }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let named = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
    guard named == 0 else { return nil }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// The cluster-wide counters a phase is measured by, read over one connection to `postgres`.
struct ClusterStats {
    let connection: PostgresConnection

    init(url: String) throws { connection = try PostgresConnection(url: url) }

    /// A bench's own database, empty: dropped (connections ended) and created again. `name` is
    /// made by the bench, never input.
    func recreate(_ name: String) throws {
        _ = try connection.executeScript("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        _ = try connection.executeScript("CREATE DATABASE \(name)")
    }

    /// Drops a bench's database at the end of its run; a failure leaves it for the next `recreate`.
    func drop(_ name: String) { _ = try? connection.executeScript("DROP DATABASE IF EXISTS \(name) WITH (FORCE)") }

    struct Snapshot { var walBytes: Int64, walFPI: Int64, commits: Int64 }

    func snapshot(_ database: String) throws -> Snapshot {
        let wal = try connection.query("SELECT wal_bytes::bigint AS b, wal_fpi::bigint AS f FROM pg_stat_wal")
        let db = try connection.query("SELECT xact_commit::bigint AS c FROM pg_stat_database WHERE datname = \(database)")
        return Snapshot(walBytes: try wal.first?.int64("b") ?? 0, walFPI: try wal.first?.int64("f") ?? 0,
                        commits: try db.first?.int64("c") ?? 0)
    }

    func databaseSize(_ database: String) throws -> Int64 {
        try connection.query("SELECT pg_database_size(\(database))::bigint AS s").first?.int64("s") ?? 0
    }

    /// CPU seconds of each client backend connected to `database` (PostgreSQL on this machine).
    func backendCPU(_ database: String) -> [Int32: Double] {
        guard let rows = try? connection.query(
            "SELECT pid FROM pg_stat_activity WHERE datname = \(database) AND backend_type = 'client backend'") else { return [:] }
        var out: [Int32: Double] = [:]
        for r in rows { if let pid = try? r.int("pid"), let s = processCPUSeconds(pid_t(pid)) { out[Int32(pid)] = s } }
        return out
    }
}
