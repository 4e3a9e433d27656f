import Foundation
import LatchkeyServer
import Storage
#if canImport(Glibc)
import Glibc
#endif

/// `latchkey bench portability`: N accounts seeded with COPY into one fresh database, exported
/// by `latchkey accounts export` to a file, and imported into a second fresh database by
/// `latchkey accounts import`, each command its own process (this executable) so that its peak
/// RSS is its own: accounts per second each way and each command's peak RSS, which must not grow
/// with N (both commands stream). Every imported account must come out `created`.
enum PortabilityBenchmark {
    static let usage = "latchkey bench portability --database-url D [--accounts 100000] [--keep]"
    static let help = """
        portability
                 seeds N accounts (one passkey each, COPY) in a fresh database on D's cluster, exports them with
                 `latchkey accounts export --output F`, imports F into a second fresh database with `latchkey
                 accounts import` (its progress line on standard error), and prints accounts/s for each direction,
                 each command's peak RSS (getrusage of the child) and the outcomes; --keep leaves the databases
                 and the file.
        """
    static let rpId = "bench.example"

    struct Options {
        var databaseURL: String
        var accounts: Int
        var keep: Bool
    }

    static func parse(_ args: ParsedArguments) throws(UsageError) -> Options {
        guard let url = args.value("database-url") else { throw UsageError(message: "portability needs --database-url") }
        guard let n = Int(args.value("accounts") ?? "100000"), n > 0 else { throw UsageError(message: "--accounts must be a positive number") }
        return Options(databaseURL: url, accounts: n, keep: args.has("keep"))
    }

    /// What a child command took: wall seconds, peak RSS (KiB) and exit status.
    struct Run {
        var seconds: Double
        var peakRSSKiB: Int
        var status: Int32
    }

    static func run(_ o: Options) -> Int32 {
        let source = "latchkey_bench_port_src", target = "latchkey_bench_port_dst"
        let stats: ClusterStats
        do {
            stats = try ClusterStats(url: BenchDatabaseURL.database("postgres", of: o.databaseURL))
            try stats.recreate(source)
            try stats.recreate(target)
        } catch {
            printError("cannot create the bench's databases: \(error)"); return ExitCode.failure
        }
        let sourceURL = BenchDatabaseURL.database(source, of: o.databaseURL), targetURL = BenchDatabaseURL.database(target, of: o.databaseURL)
        guard let directory = privateTemporaryDirectory("latchkey-bench-portability") else {
            stats.drop(source); stats.drop(target); return ExitCode.failure
        }
        let file = directory + "/accounts.jsonl", outcomes = directory + "/outcomes.jsonl"
        defer {
            if !o.keep {
                unlink(file); unlink(outcomes); rmdir(directory)
                stats.drop(source); stats.drop(target)
            }
        }
        do {
            let database = Database(url: sourceURL, connections: 1)
            defer { database.shutdown() }
            _ = try database.migrate()
        } catch {
            printError("cannot migrate \(source): \(error)"); return ExitCode.failure
        }
        guard SeededAccounts(count: o.accounts).seed(databaseURL: sourceURL) else { return ExitCode.failure }
        print("latchkey bench portability: \(o.accounts) accounts, rpId \(rpId), files in \(directory)")
        fflush(nil)

        guard let export = child(["accounts", "export", "--output", file], databaseURL: sourceURL, stdout: nil), export.status == 0 else {
            printError("latchkey accounts export failed"); return ExitCode.failure
        }
        var info = stat()
        let size = stat(file, &info) == 0 ? Int(info.st_size) : 0
        print("export  \(o.accounts) accounts in \(formatDecimal(export.seconds, places: 1)) s  \(Int(Double(o.accounts) / export.seconds)) accounts/s  "
              + "file \(ScaleBenchmark.megabytes(Int64(size)))  peak RSS \(export.peakRSSKiB / 1024) MB")
        fflush(nil)
        guard let imported = child(["accounts", "import", file], databaseURL: targetURL, stdout: outcomes) else {
            printError("latchkey accounts import did not start"); return ExitCode.failure
        }
        let counts = outcomeCounts(outcomes)
        print("import  \(o.accounts) accounts in \(formatDecimal(imported.seconds, places: 1)) s  \(Int(Double(o.accounts) / imported.seconds)) accounts/s  "
              + "peak RSS \(imported.peakRSSKiB / 1024) MB  outcomes: "
              + ["created", "skipped", "conflict", "refused"].map { "\(counts[$0, default: 0]) \($0)" }.joined(separator: ", "))
        guard imported.status == 0, counts["created", default: 0] == o.accounts else {
            printError("the import did not create every account (exit \(imported.status); outcomes in \(outcomes))"); return ExitCode.failure
        }
        return ExitCode.success
    }

    /// Runs this executable with `arguments` (DATABASE_URL and LATCHKEY_RP_ID set, this process's
    /// other environment kept), its standard output to `stdout` (nil: this process's), its
    /// standard error passed through; waits for it with wait4 for its own peak RSS.
    static func child(_ arguments: [String], databaseURL: String, stdout: String?) -> Run? {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let stdout { posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o600) }
        var environment = ["DATABASE_URL=\(databaseURL)", "LATCHKEY_RP_ID=\(rpId)"]
        var p = environ
        while let e = p.pointee {
            let entry = String(cString: e)
            if !entry.hasPrefix("DATABASE_URL="), !entry.hasPrefix("LATCHKEY_RP_ID=") { environment.append(entry) }
            p += 1
        }
        let argv = [executablePath()] + arguments
        var cargs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        var envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
        defer { for c in cargs { free(c) }; for e in envp { free(e) } }
        let start = monotonicNow()
        var pid: pid_t = 0
        guard posix_spawn(&pid, argv[0], &actions, nil, &cargs, &envp) == 0 else { return nil }
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 { guard errno == EINTR else { return nil } }
        let exit = status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        return Run(seconds: monotonicNow() - start, peakRSSKiB: Int(usage.ru_maxrss), status: exit)
    }

    /// The import's outcome lines counted by outcome, read line by line.
    static func outcomeCounts(_ path: String) -> [String: Int] {
        var counts: [String: Int] = [:]
        guard let lines = LineReader(path: path) else { return counts }
        for line in lines {
            let text = String(decoding: line, as: UTF8.self)
            for kind in ["created", "skipped", "conflict", "refused"] where text.contains("\"outcome\":\"\(kind)\"") { counts[kind, default: 0] += 1 }
        }
        return counts
    }
}
