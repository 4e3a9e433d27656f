import Foundation
import Synchronization
@testable import PostgreSQL

/// The database the integration tests use: `DATABASE_URL` when set, otherwise the dev cluster
/// started by `deploy/dev-postgres.sh` (its `latchkey_test` database).
enum TestDatabase {
    static func url() throws -> String { try resolved.get() }

    private static let resolved: Result<String, TestSetupError> = {
        if let url = ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty {
            return .success(url)
        }
        let script = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("deploy/dev-postgres.sh").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [script]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        do { try process.run() } catch {
            return .failure(TestSetupError(message: "could not run \(script): \(error)"))
        }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0,
              let last = String(decoding: data, as: UTF8.self).split(separator: "\n").last
        else {
            return .failure(TestSetupError(message: "\(script) failed (status \(process.terminationStatus))"))
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
