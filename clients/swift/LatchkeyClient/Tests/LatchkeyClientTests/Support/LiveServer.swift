#if canImport(WebAuthnTesting)
import Foundation
import Synchronization
import Testing

/// A real `latchkey serve` (the binary the server package built) on a free loopback port, against a
/// database of its own on the test PostgreSQL (created here, dropped by `stop()`), with its own rpId
/// and the origin an iOS app reports, `https://<rpId>`.
///
/// Reads `DATABASE_URL` (the server tests' database; only its server part is used) and
/// `LATCHKEY_BINARY` (else `.build/debug/latchkey` of the repository root).
final class LiveServer: Sendable {
    let rpId: String
    let origin: String
    let adminKey: String
    let port: Int
    let databaseURL: String
    let baseURL: URL
    private let process: Process
    private let log = Output()
    private let adminDatabaseURL: String
    private let databaseName: String
    private let scratch: URL

    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static let keyEncryptionKey = "bGF0Y2hrZXktdGVzdC1rZWstMzItYnl0ZXMtLS0tLS0="

    static func binary() throws -> String {
        let env = ProcessInfo.processInfo.environment
        let candidates = [env["LATCHKEY_BINARY"], repositoryRoot.appendingPathComponent(".build/debug/latchkey").path].compactMap { $0 }
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw SetupError("no latchkey binary (looked at \(candidates)); run `swift build --product latchkey` at the repository root or set LATCHKEY_BINARY")
        }
        return found
    }

    /// `prepare` runs `latchkey` subcommands (e.g. `apps add`) on the migrated database before serving.
    init(name: String, environment extra: [String: String] = [:], prepare: [[String]] = []) throws {
        guard let server = ProcessInfo.processInfo.environment["DATABASE_URL"], let slash = server.lastIndex(of: "/") else {
            throw SetupError("DATABASE_URL is not set (the test PostgreSQL: see scripts/test.sh)")
        }
        let suffix = String(UInt64.random(in: 0...UInt64.max), radix: 36)
        databaseName = "lk_client_\(suffix)"
        let base = String(server[...slash])
        adminDatabaseURL = base + "postgres"
        databaseURL = base + databaseName
        rpId = "\(name)-\(suffix).latchkey.test"
        origin = "https://\(rpId)"
        adminKey = "admin-\(suffix)-\(UInt64.random(in: 0...UInt64.max))-0123456789abcdef"  // outside dev mode: at least 32 characters
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent(databaseName)
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        try Self.run("psql", ["-q", "-v", "ON_ERROR_STOP=1", adminDatabaseURL, "-c", "CREATE DATABASE \(databaseName)"])

        let binary = try Self.binary()
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("LATCHKEY_") }
        env["DATABASE_URL"] = databaseURL
        env["LATCHKEY_LISTEN"] = "127.0.0.1:0"
        env["LATCHKEY_RP_ID"] = rpId
        env["LATCHKEY_ORIGINS"] = origin
        env["LATCHKEY_ADMIN_KEY"] = adminKey
        env["LATCHKEY_DEV"] = "0"
        env["LATCHKEY_RATE_LIMIT"] = "0"
        env["LATCHKEY_THREADS"] = "2"
        // It runs in a scratch folder: serve refuses to start without its web folder.
        env["LATCHKEY_WEB_DIR"] = Self.repositoryRoot.appendingPathComponent("web").path
        env["LATCHKEY_KEY_ENCRYPTION_KEY"] = Self.keyEncryptionKey
        for (k, v) in extra { env[k] = v }
        if !prepare.isEmpty {
            try Self.run(binary, ["migrate"], environment: env)
            for arguments in prepare { try Self.run(binary, arguments, environment: env) }
        }

        process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["serve"]
        process.environment = env
        process.currentDirectoryURL = scratch
        process.standardOutput = FileHandle.nullDevice
        let pipe = Pipe()
        process.standardError = pipe
        try process.run()
        let handle = pipe.fileHandleForReading
        let log = self.log
        let reader = Thread {
            while true {
                let data = handle.availableData
                if data.isEmpty { return }
                log.append(String(decoding: data, as: UTF8.self))
            }
        }
        reader.start()

        // Bounded wait for the line that names the port.
        var found: Int?
        for _ in 0..<1200 {
            let text = log.text
            if let range = text.range(of: "on http://127.0.0.1:"), let p = Int(text[range.upperBound...].prefix { $0.isNumber }), p > 0 {
                found = p
                break
            }
            if !process.isRunning { break }
            usleep(50_000)
        }
        guard let found else {
            let text = log.text
            Self.terminate(process)
            _ = try? Self.run("psql", ["-q", adminDatabaseURL, "-c", "DROP DATABASE IF EXISTS \(databaseName) WITH (FORCE)"])
            throw SetupError("latchkey serve did not come up: \(text)")
        }
        port = found
        baseURL = URL(string: "http://127.0.0.1:\(found)")!
    }

    var output: String { log.text }

    /// SIGTERM (SIGKILL after a bounded wait), then the database goes.
    func stop() {
        Self.terminate(process)
        _ = try? Self.run("psql", ["-q", adminDatabaseURL, "-c", "DROP DATABASE IF EXISTS \(databaseName) WITH (FORCE)"])
        try? FileManager.default.removeItem(at: scratch)
    }

    private static func terminate(_ process: Process) {
        guard process.isRunning else { return }
        process.terminate()
        for _ in 0..<200 where process.isRunning { usleep(50_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    /// Runs a tool to completion (PATH lookup through /usr/bin/env); throws with its output on failure.
    @discardableResult
    static func run(_ tool: String, _ arguments: [String], environment: [String: String]? = nil) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = [tool] + arguments
        if let environment { p.environment = environment }
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard p.terminationStatus == 0 else { throw SetupError("\(tool) \(arguments.first ?? "") failed (\(p.terminationStatus)): \(text)") }
        return text
    }
}

/// Starts a server for `body` and stops it afterwards, also when `body` throws.
func withLiveServer<T>(_ name: String, environment: [String: String] = [:], prepare: [[String]] = [],
                       _ body: (LiveServer) async throws -> T) async throws -> T {
    let server = try LiveServer(name: name, environment: environment, prepare: prepare)
    do {
        let result = try await body(server)
        server.stop()
        return result
    } catch {
        Issue.record("server log:\n\(server.output.suffix(4000))")
        server.stop()
        throw error
    }
}

struct SetupError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

final class Output: Sendable {
    private let storage = Mutex("")
    func append(_ s: String) { storage.withLock { $0 += s } }
    var text: String { storage.withLock { $0 } }
}
#endif
