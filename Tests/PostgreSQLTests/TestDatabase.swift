import Foundation
import Glibc
import Synchronization
@testable import PostgreSQL

/// The database the integration tests use: `DATABASE_URL` when set, otherwise the dev cluster
/// started by `scripts/dev-postgres.sh` (its `latchkey_test` database).
enum TestDatabase {
    static func url() throws -> String { try resolved.get() }

    static let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts/dev-postgres.sh").path

    private static let resolved: Result<String, TestSetupError> = {
        if let url = ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty {
            return .success(url)
        }
        // posix_spawn + waitpid rather than Foundation.Process, whose waitUntilExit can miss the
        // child's exit when the script leaves a daemon (the postmaster) running.
        let (status, stdout) = runCapturingStdout(["/bin/bash", script])
        guard status == 0, let last = stdout.split(separator: "\n").last else {
            return .failure(TestSetupError(message: "\(script) failed (status \(status))"))
        }
        var url = String(last)
        if url.hasSuffix("/latchkey") { url += "_test" }
        return .success(url)
    }()

    static func connect() throws -> PostgresConnection { try PostgresConnection(url: url()) }

    /// A fresh lower-case identifier for tables created by one test (tests run in parallel).
    static func uniqueName(_ prefix: String) -> String {
        "\(prefix)_\(String(UInt64.random(in: 0...UInt64.max), radix: 36))"
    }

    /// `url` with an extra query parameter (e.g. `application_name`).
    static func url(adding parameter: String) throws -> String {
        let base = try url()
        return base + (base.contains("?") ? "&" : "?") + parameter
    }
}

struct TestSetupError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// Runs `body(i)` on `count` real threads at once and waits for all of them; returns the errors.
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) throws -> Void) -> [any Error] {
    let errors = Mutex<[any Error]>([])
    let group = DispatchGroup()
    for i in 0..<count {
        group.enter()
        let thread = Thread {
            do { try body(i) } catch { errors.withLock { $0.append(error) } }
            group.leave()
        }
        thread.start()
    }
    group.wait()
    return errors.withLock { $0 }
}

/// Runs `arguments` (stderr inherited) and returns its exit status and stdout.
func runCapturingStdout(_ arguments: [String]) -> (status: Int32, stdout: String) {
    var fds: [Int32] = [0, 0]
    guard pipe(&fds) == 0 else { return (-1, "") }
    // Close-on-exec so the script's daemon (the postmaster) cannot inherit either end.
    _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
    _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
    defer { posix_spawn_file_actions_destroy(&actions) }
    let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, arguments[0], &actions, nil, argv, environ)
    close(fds[1])
    guard spawned == 0 else { close(fds[0]); return (-1, "") }
    var output: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = read(fds[0], &buffer, buffer.count)
        if n > 0 { output += buffer[0..<n] } else if n < 0, errno == EINTR { continue } else { break }
    }
    close(fds[0])
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0, errno == EINTR {}
    let exitCode = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : -1
    return (exitCode, String(decoding: output, as: UTF8.self))
}
