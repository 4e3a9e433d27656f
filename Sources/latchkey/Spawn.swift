#if canImport(Glibc)
import Glibc
#endif

/// A child process started by `spawn`, and the read end of the pipe carrying its output when
/// the output was captured.
struct SpawnedProcess {
    enum Capture { case none, standardOutput, standardOutputAndError }

    let pid: pid_t
    let output: Int32?
    /// The write end of a pipe that is the child's standard input (`spawn(…, input: true)`);
    /// close it to send end-of-file.
    var input: Int32? = nil

    /// Reads the captured output to its end (nil when not captured), then waits for the child.
    @discardableResult
    func finish() -> [UInt8]? {
        // No limit: a child blocked on a full pipe would never exit.
        let bytes = output.flatMap { readAll(fd: $0, limit: .max) }
        if let output { close(output) }
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        return bytes
    }
}

/// posix_spawn of `argv` (`argv[0]` is the program's path) with this process's environment plus
/// `extraEnvironment` (`NAME=value`), its output captured into a pipe as `capture` says. Returns
/// once the child started; nil when it could not be.
func spawn(_ argv: [String], extraEnvironment: [String] = [], capture: SpawnedProcess.Capture = .none,
           input: Bool = false) -> SpawnedProcess? {
    var fds: [Int32] = [-1, -1]
    var inFds: [Int32] = [-1, -1]
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    if input {
        guard pipe(&inFds) == 0 else { return nil }
        posix_spawn_file_actions_adddup2(&actions, inFds[0], 0)
        posix_spawn_file_actions_addclose(&actions, inFds[1])
    }
    if capture != .none {
        guard pipe(&fds) == 0 else { return nil }
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        if capture == .standardOutputAndError { posix_spawn_file_actions_adddup2(&actions, fds[1], 2) }
        posix_spawn_file_actions_addclose(&actions, fds[0])
    }
    var cargs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
    let extra = extraEnvironment.map { strdup($0) }
    var envp: [UnsafeMutablePointer<CChar>?] = []
    var p = environ
    while let e = p.pointee { envp.append(e); p += 1 }
    envp += extra + [nil]
    defer { for c in cargs { free(c) }; for e in extra { free(e) } }
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, argv[0], &actions, nil, &cargs, &envp)
    if capture != .none { close(fds[1]) }
    if input { close(inFds[0]) }
    guard rc == 0 else {
        if capture != .none { close(fds[0]) }
        if input { close(inFds[1]) }
        return nil
    }
    return SpawnedProcess(pid: pid, output: capture == .none ? nil : fds[0], input: input ? inFds[1] : nil)
}
