import Foundation
import Glibc
import Synchronization

/// The PostgreSQL every integration test target runs against: `DATABASE_URL` when set
/// (`scripts/test.sh` sets it), otherwise the throwaway test cluster that
/// `scripts/dev-postgres.sh --test` starts (fsync off), its `latchkey_test` database.
public enum TestCluster {
    public static func url() throws -> String { try resolved.get() }

    /// The repository's root, from this file's place in it.
    public static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    public static let script = repositoryRoot.appendingPathComponent("scripts/dev-postgres.sh").path

    private static let resolved: Result<String, TestSetupError> = {
        if let url = ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty { return .success(url) }
        // posix_spawn + waitpid rather than Foundation.Process, whose waitUntilExit can miss the
        // child's exit when the script leaves a daemon (the postmaster) running.
        let (status, stdout) = runCapturingStdout(["/bin/bash", script, "--test"])
        guard status == 0, let last = stdout.split(separator: "\n").last else {
            return .failure(TestSetupError("\(script) --test failed (status \(status))"))
        }
        var url = String(last)
        if url.hasSuffix("/latchkey") { url += "_test" }
        return .success(url)
    }()

    /// A fresh lower-case identifier (tests run in parallel).
    public static func uniqueName(_ prefix: String) -> String {
        "\(prefix)_\(String(UInt64.random(in: 0...UInt64.max), radix: 36))"
    }
}

public struct TestSetupError: Error, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public init(message: String) { self.message = message }
    public var description: String { message }
}

/// Runs `body(i)` on `count` real threads at once and waits for all of them; returns the errors.
public func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) throws -> Void) -> [any Error] {
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
public func runCapturingStdout(_ arguments: [String]) -> (status: Int32, stdout: String) {
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
