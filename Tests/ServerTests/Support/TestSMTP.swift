import Foundation
import PostgreSQLTesting
import Synchronization

/// The real SMTP server the suites send mail to (aiosmtpd, started by `scripts/smtp.sh`, which
/// scripts/test.sh runs; started here when the tests run on their own). Mail it accepted is a file
/// per message under `<mail>/<recipient>/`; a test reads the codes from there.
enum TestSMTP {
    struct Server: Sendable {
        let host: String
        let port: Int
        let mailDirectory: String
        /// The CA the servers' certificate chains to (STARTTLS and SMTPS).
        let caFile: String
        /// `host:port` of the SMTPS listener.
        let smtps: String
        /// STARTTLS is offered here, and libcurl takes it (each stored message says `X-Test-TLS: yes`).
        var url: String { "smtp://\(host):\(port)" }
        var smtpsURL: String { "smtps://\(smtps)" }
    }

    static func server() throws -> Server { try resolved.get() }

    private static let resolved: Result<Server, TestSetupError> = {
        let env = ProcessInfo.processInfo.environment
        if let address = env["LATCHKEY_TEST_SMTP"], let dir = env["LATCHKEY_TEST_SMTP_DIR"], let ca = env["LATCHKEY_TEST_SMTP_CA"],
           let smtps = env["LATCHKEY_TEST_SMTPS"], let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]) {
            return .success(Server(host: String(address[..<colon]), port: port, mailDirectory: dir, caFile: ca, smtps: smtps))
        }
        let script = TestDatabase.repositoryRoot.appendingPathComponent("scripts/smtp.sh").path
        func run(_ args: [String]) -> String? {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/bin/bash")
            p.arguments = [script] + args
            let out = Pipe()
            p.standardOutput = out
            p.standardError = FileHandle.standardError
            guard (try? p.run()) != nil else { return nil }
            let data = out.fileHandleForReading.readDataToEndOfFile()
            p.waitUntilExit()
            guard p.terminationStatus == 0 else { return nil }
            return String(decoding: data, as: UTF8.self).split(separator: "\n").last.map(String.init)
        }
        guard let address = run([]), let dir = run(["--dir"]), let ca = run(["--ca"]), let smtps = run(["--smtps"]),
              let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]) else {
            return .failure(TestSetupError("scripts/smtp.sh could not start the SMTP server"))
        }
        return .success(Server(host: String(address[..<colon]), port: port, mailDirectory: dir, caFile: ca, smtps: smtps))
    }()

    /// A fresh address of this run (so each test reads only its own mail). Mixed case and spaces:
    /// the server stores it normalised.
    static func address(_ prefix: String = "user") -> String { "\(prefix)-\(uniqueSuffix())@Mail.Latchkey.TEST" }

    static func normalised(_ address: String) -> String {
        let parts = address.split(separator: "@")
        return parts[0] + "@" + parts[1].lowercased()
    }

    /// The messages the server accepted for `address`, oldest first (decoded text).
    static func messages(to address: String) throws -> [String] {
        let folder = try server().mailDirectory + "/" + normalised(address).lowercased()
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return [] }
        return names.filter { $0.hasSuffix(".eml") && !$0.hasPrefix(".") }.sorted().compactMap { name in
            FileManager.default.contents(atPath: folder + "/" + name).map { decodeQuotedPrintable(String(decoding: $0, as: UTF8.self)) }
        }
    }

    /// Waits (bounded) until at least `count` messages reached `address`.
    static func waitForMessages(to address: String, count: Int = 1, timeoutSeconds: Double = 30) throws -> [String] {
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        while true {
            let found = try messages(to: address)
            if found.count >= count || Date() > deadline { return found }
            usleep(50_000)
        }
    }

    /// Waits (bounded) for a message to `address` containing `text`.
    static func waitForMessage(to address: String, containing text: String, timeoutSeconds: Double = 30) throws -> String? {
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        while true {
            if let found = try messages(to: address).last(where: { $0.contains(text) }) { return found }
            if Date() > deadline { return nil }
            usleep(50_000)
        }
    }

    /// The code in the newest message to `address` containing `marker` (waits for it).
    static func code(to address: String, after earlier: Int = 0, timeoutSeconds: Double = 30) throws -> String {
        let found = try waitForMessages(to: address, count: earlier + 1, timeoutSeconds: timeoutSeconds)
        guard found.count > earlier, let code = extractCode(found[found.count - 1]) else {
            throw TestSetupError("no code mailed to \(address) (\(found.count) messages)")
        }
        return code
    }

    /// The digits after "code is: " in a message's body.
    static func extractCode(_ message: String) -> String? {
        guard let r = message.range(of: "code is: ") else { return nil }
        let digits = message[r.upperBound...].prefix { $0.isNumber }
        return digits.isEmpty ? nil : String(digits)
    }

    /// The next `count` deliveries to `address` are answered 451 by the server.
    static func refuse(_ address: String, times count: Int) throws {
        let path = try server().mailDirectory + "/refuse/" + normalised(address).lowercased()
        try String(count).write(toFile: path, atomically: true, encoding: .utf8)
    }

    static func decodeQuotedPrintable(_ s: String) -> String {
        var out: [UInt8] = []
        let bytes = Array(s.replacingOccurrences(of: "=\r\n", with: "").utf8)
        var i = 0
        func hex(_ b: UInt8) -> UInt8? {
            switch b { case 48...57: b - 48; case 65...70: b - 55; case 97...102: b - 87; default: nil }
        }
        while i < bytes.count {
            if bytes[i] == 61, i + 2 < bytes.count, let h = hex(bytes[i + 1]), let l = hex(bytes[i + 2]) {
                out.append(h << 4 | l); i += 3
            } else { out.append(bytes[i]); i += 1 }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
