import Crypto
import Foundation
import HTTP
import JSON
import LatchkeyServer
import PostgreSQLTesting
import Synchronization
import Testing
import WebAuthn
import WebAuthnTesting

/// SPEC "Rules that must hold": challenges, keys and revocations live in PostgreSQL, so any number
/// of `latchkey serve` processes share the work. Two real processes of the built binary, one database.
@Suite("Two serve processes on one database")
struct TwoProcessTests {
    @Test("options from one, verify on the other; a revocation through one is refused by the other at once")
    func twoProcesses() throws {
        guard let binary = ServeProcess.findBinary() else {
            Issue.record("""
                the latchkey executable was not found next to the test bundle (\(CommandLine.arguments.first ?? "?")); \
                build it with `swift build --build-tests` (or set LATCHKEY_BINARY)
                """)
            return
        }
        let rpId = "twoproc-\(uniqueSuffix()).latchkey.test"
        let origin = "https://\(rpId)"
        let environment = [
            "DATABASE_URL": try TestDatabase.url(), "LATCHKEY_LISTEN": "127.0.0.1:0", "LATCHKEY_RP_ID": rpId,
            "LATCHKEY_ORIGINS": origin, "LATCHKEY_ADMIN_KEY": "admin-\(uniqueSuffix())-\(uniqueSuffix())-\(uniqueSuffix())", "LATCHKEY_THREADS": "2",
            "LATCHKEY_DEV": "0", "LATCHKEY_WORKERS": "1", "LATCHKEY_KEY_ENCRYPTION_KEY": TestDatabase.keyEncryptionKeyText,
        ]
        let a = try ServeProcess(binary: binary, environment: environment)
        defer { a.stop() }
        let b = try ServeProcess(binary: binary, environment: environment)
        defer { b.stop() }
        let portA = try a.waitUntilServing(), portB = try b.waitUntilServing()
        #expect(portA != portB)
        let onA = Client(Endpoint(port: portA, rpId: rpId, origin: origin, adminKey: nil))
        let onB = Client(Endpoint(port: portB, rpId: rpId, origin: origin, adminKey: nil))
        #expect(try onA.get("/readyz").status == 200)
        #expect(try onB.get("/readyz").status == 200)

        // Registration: options from A, verify on B.
        let authenticator = SoftAuthenticator(algorithm: .es256)
        let username = "two-\(uniqueSuffix())"
        let creation = try #require(try onA.registrationOptions(username: username).json)
        let registration = authenticator.registration(challenge: try challengeBytes(creation), rpId: rpId, origin: origin)
        authenticator.userHandle = userHandle(creation)
        let registered = try onB.send("POST", "/v1/passkeys/registration/verify", body: registration.bytes())
        #expect(registered.status == 201, "\(registered)")
        let userId = try #require(registered.json?["user"]?["id"]?.stringValue)
        // A username taken through B is taken on A.
        #expect(try onA.registrationOptions(username: username).status == 409)

        // Authentication both ways (the second leaves the credential key cached in B).
        let requestA = try #require(try onA.authenticationOptions(username: username).json)
        let loginB = try onB.send("POST", "/v1/passkeys/authentication/verify", body: onB.assertion(authenticator, options: requestA).bytes())
        #expect(loginB.status == 200, "\(loginB)")
        #expect(loginB.json?["user"]?["id"]?.stringValue == userId)
        let requestB = try #require(try onB.authenticationOptions().json)
        let loginA = try onA.send("POST", "/v1/passkeys/authentication/verify", body: onA.assertion(authenticator, options: requestB).bytes())
        #expect(loginA.status == 200, "\(loginA)")
        let session = Session(reply: try #require(loginA.json))

        // A challenge consumed on one is gone on the other.
        let requestC = try #require(try onA.authenticationOptions().json)
        let body = try onA.assertion(authenticator, options: requestC).bytes()
        #expect(try onA.send("POST", "/v1/passkeys/authentication/verify", body: body).status == 200)
        let replayed = try onB.send("POST", "/v1/passkeys/authentication/verify", body: body)
        #expect(replayed.code == "challenge_invalid")

        // Tokens from A work on B; refresh rotated on B, reuse detected on A.
        #expect(try onB.get("/v1/passkeys", authorization: session.bearer).status == 200)
        let rotated = try onB.post("/v1/token", .object([("grant_type", "refresh_token"), ("refresh_token", .string(session.refreshToken))]))
        #expect(rotated.status == 200, "\(rotated)")
        let reuse = try onA.post("/v1/token", .object([("grant_type", "refresh_token"), ("refresh_token", .string(session.refreshToken))]))
        #expect(reuse.code == "invalid_grant")
        // The reuse revoked the whole family: its access token is refused on both, at once on A.
        #expect(try onA.get("/v1/passkeys", authorization: session.bearer).code == "unauthorized")
        let current = Session(reply: try #require(try onA.login(authenticator).reply.json))

        // Revoked through A → refused by B at once (a recovery code keeps the account a way in: SPEC "Assurance").
        try LastWayInTests.giveRecoveryCode(userId)
        let revoked = try onA.revokePasskey(authenticator.credentialId, authorization: current.bearer, approver: authenticator)
        #expect(revoked.status == 200)
        let afterB = try #require(try onB.authenticationOptions().json)
        let refused = try onB.send("POST", "/v1/passkeys/authentication/verify", body: onB.assertion(authenticator, options: afterB).bytes())
        #expect(refused.status == 400)
        #expect(refused.code == "credential_unknown")
        let afterA = try #require(try onB.authenticationOptions().json)
        let refusedA = try onA.send("POST", "/v1/passkeys/authentication/verify", body: onA.assertion(authenticator, options: afterA).bytes())
        #expect(refusedA.code == "credential_unknown")
        #expect(a.isRunning && b.isRunning)
    }
}

/// One `latchkey serve` child process; its port is read from the line it prints once listening.
final class ServeProcess: Sendable {
    private let process: Process
    private let stderr = OutputBuffer()

    /// `LATCHKEY_BINARY`, else `latchkey` in the directory of the test bundle or one of its parents.
    static func findBinary() -> String? {
        let fm = FileManager.default
        if let explicit = ProcessInfo.processInfo.environment["LATCHKEY_BINARY"], fm.isExecutableFile(atPath: explicit) { return explicit }
        let starts = [CommandLine.arguments.first, Bundle.main.executablePath].compactMap { $0 }
        for start in starts {
            var dir = URL(fileURLWithPath: start).standardizedFileURL.deletingLastPathComponent()
            for _ in 0..<6 {
                let candidate = dir.appendingPathComponent("latchkey").path
                var isDir: ObjCBool = false
                if fm.fileExists(atPath: candidate, isDirectory: &isDir), !isDir.boolValue, fm.isExecutableFile(atPath: candidate) {
                    return candidate
                }
                dir = dir.deletingLastPathComponent()
            }
        }
        return nil
    }

    init(binary: String, environment: [String: String], directory: URL? = nil) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["serve"]
        if let directory { process.currentDirectoryURL = directory }
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("LATCHKEY_") }
        for (k, v) in environment { env[k] = v }
        process.environment = env
        process.standardOutput = FileHandle.nullDevice  // one JSON line per request
        let pipe = Pipe()
        process.standardError = pipe
        let buffer = stderr
        try process.run()
        // A thread of its own doing blocking reads until EOF, not `readabilityHandler`: that one is a
        // libdispatch read source, and under the whole suite's load (many children exiting while
        // their pipes close) libdispatch's event loop once crashed on it (bad pointer in
        // _dispatch_event_loop_drain). A plain read cannot race the close.
        let handle = pipe.fileHandleForReading
        let reader = Thread {
            while true {
                let data = handle.availableData
                if data.isEmpty { return }
                buffer.append(String(decoding: data, as: UTF8.self))
            }
        }
        reader.name = "serve-stderr"
        reader.start()
    }

    var isRunning: Bool { process.isRunning }
    /// The exit status, once it has exited.
    var exitStatus: Int32 { process.terminationStatus }

    /// SIGKILL: no shutdown of any kind (the test of what survives a crash).
    func kill9() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// For signals other than stop()'s (FaultTests: SIGKILL mid-request).
    var processIdentifier: Int32 { process.processIdentifier }
    var output: String { stderr.text }

    /// Bounded polling until the process says where it listens (or exits).
    func waitUntilServing(timeoutSeconds: Double = 60) throws -> Int {
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        while Date() < deadline {
            let text = output
            if let range = text.range(of: "on http://127.0.0.1:") {
                let digits = text[range.upperBound...].prefix { $0.isNumber }
                if let port = Int(digits), port > 0 { return port }
            }
            if !process.isRunning { throw TestSetupError("latchkey serve exited (\(process.terminationStatus)): \(text)") }
            usleep(50_000)
        }
        throw TestSetupError("latchkey serve did not report its port in \(Int(timeoutSeconds)) s: \(output)")
    }

    /// `kill -9`: no shutdown of any kind (what it held comes back by lease expiry, nothing else).
    func killHard() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// SIGTERM, then SIGKILL if it has not exited after a bounded wait.
    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        for _ in 0..<200 where process.isRunning { usleep(50_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

/// Text a child process writes, collected from its pipe's handler thread.
final class OutputBuffer: Sendable {
    private let storage = Mutex("")
    func append(_ s: String) { storage.withLock { $0 += s } }
    var text: String { storage.withLock { $0 } }
}
