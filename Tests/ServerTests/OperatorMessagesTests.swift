import Foundation
import JSON
import LatchkeyServer
import Testing
import WebAuthn
import WebAuthnTesting
import WellKnown

/// Issue 25, point 6: messages that say what to do, the version everywhere, and metrics that all
/// carry HELP and TYPE.
@Suite("Operator messages")
struct OperatorMessagesTests {
    static let fixture = Result { try TestServer(name: "messages") }
    var server: TestServer { get throws { try Self.fixture.get() } }

    @Test("a 415 says to send application/json")
    func unsupportedMediaTypeSaysWhatToSend() throws {
        let reply = try server.client().send("POST", "/v1/passkeys/authentication/options", body: Array("{}".utf8),
                                              contentType: "application/x-www-form-urlencoded")
        #expect(reply.status == 415 && reply.code == "invalid_request", "\(reply)")
        let detail = reply.json?["detail"]?.stringValue ?? ""
        #expect(detail.contains("send Content-Type: application/json") && detail.contains("-H 'Content-Type: application/json'"), "\(detail)")
        // No Content-Type at all (curl -d without -H): the same advice.
        let bare = try server.client().send("POST", "/v1/passkeys/authentication/options", body: Array("{}".utf8), contentType: nil)
        #expect(bare.status == 415 && bare.json?["detail"]?.stringValue?.contains("(none)") == true, "\(bare)")
    }

    @Test("/healthz and /metrics carry the version; every metric has HELP and TYPE; the outbox gauges name every channel")
    func versionAndMetrics() throws {
        let client = try server.client()
        let health = try client.get("/healthz")
        #expect(health.status == 200 && health.json?["version"]?.stringValue == LatchkeyBuild.version, "\(health)")
        _ = try client.authenticationOptions()
        let text = try client.get("/metrics").text
        #expect(text.contains("latchkey_build_info{version=\"\(LatchkeyBuild.version)\"} 1"), "\(text)")
        var help = Set<String>(), type = Set<String>()
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ")
            if line.hasPrefix("# HELP ") { help.insert(String(parts[2])); continue }
            if line.hasPrefix("# TYPE ") { type.insert(String(parts[2])); continue }
            var name = String(line.prefix { $0 != "{" && $0 != " " })
            for suffix in ["_bucket", "_sum", "_count"] where !type.contains(name) && name.hasSuffix(suffix) { name.removeLast(suffix.count) }
            #expect(help.contains(name) && type.contains(name), "\(name) is sampled before (or without) its HELP and TYPE")
        }
        #expect(type.contains("latchkey_db_pool_waiting"))
        for channel in ["webhook", "mail"] {
            #expect(text.contains("latchkey_outbox_depth{channel=\"\(channel)\"}"), "no outbox depth for \(channel)")
            #expect(text.contains("latchkey_outbox_oldest_pending_seconds{channel=\"\(channel)\"}"), "no outbox age for \(channel)")
        }
        #expect(Set(Metrics.Family.all.map(\.name)).count == Metrics.Family.all.count)
    }

    @Test("inspect names the origin received and those allowed; a server's answer names only the one received")
    func originNotAllowedNamesTheOrigins() throws {
        let authenticator = SoftAuthenticator()
        let challenge = Array(repeating: UInt8(7), count: 32)
        let credential = authenticator.registration(challenge: challenge, rpId: "example.com", origin: "https://evil.example").bytes()
        let options = Inspection.Options(ceremony: .registration, rpId: "example.com",
                                         origins: ["https://example.com", "https://www.example.com"], challenge: challenge)
        let report = Inspection.run(credential, options: options)
        let reason = report.error?.reason ?? ""
        #expect(report.error?.code == .originNotAllowed)
        #expect(reason.contains("\"https://evil.example\"") && reason.contains("allowed: https://example.com, https://www.example.com"), "\(reason)")

        let (_, reply) = try server.client().register(SoftAuthenticator(), username: server.username()) { $0.clientData.origin = "https://evil.example" }
        let detail = reply.json?["detail"]?.stringValue ?? ""
        #expect(reply.status == 403 || reply.status == 400, "\(reply)")
        let allowed = try server.origin
        #expect(reply.code == "origin_not_allowed" && detail.contains("https://evil.example") && !detail.contains(allowed), "\(reply)")
    }

    @Test("apk-key-hash and the fingerprint parser take the line keytool or the Play Console prints")
    func fingerprintLines() throws {
        let hex = "14:6D:E9:83:C5:73:06:50:D8:EE:B9:95:2F:34:FC:64:16:A0:83:42:E6:1D:BE:A8:8A:04:96:B2:3F:CF:44:E5"
        let expected = try SigningCertificateFingerprint(parsing: hex)
        for line in ["SHA256: \(hex)", "  SHA256: \(hex)\n", "SHA-256 certificate fingerprint: \(hex)", "sha256:\(hex)"] {
            #expect(try SigningCertificateFingerprint(parsing: line) == expected, "\(line)" as Comment)
        }
        #expect(throws: WellKnownError.self) { try SigningCertificateFingerprint(parsing: "SHA1: 14:6D:E9") }
        let cli = try LatchkeyCLI.run(["apk-key-hash", "SHA256:", hex], environment: [:])
        #expect(cli.status == 0 && cli.stdout == expected.origin + "\n", "\(cli)")
    }

    @Test("--version, and healthcheck against a live instance and a closed port")
    func versionAndHealthcheck() throws {
        let version = try LatchkeyCLI.run(["--version"], environment: [:])
        #expect(version.status == 0 && version.stdout == "latchkey \(LatchkeyBuild.version)\n", "\(version)")
        let port = try server.port
        let healthy = try LatchkeyCLI.run(["healthcheck"], environment: ["LATCHKEY_LISTEN": "0.0.0.0:\(port)"])
        #expect(healthy.status == 0 && healthy.stdout.contains("\"version\""), "\(healthy)")
        let down = try LatchkeyCLI.run(["healthcheck", "--url", "http://127.0.0.1:1/healthz"], environment: [:])
        #expect(down.status == 1 && down.stderr.contains("latchkey healthcheck:"), "\(down)")
    }

    @Test("config check and config --markdown through the binary")
    func configCommand() throws {
        let markdown = try LatchkeyCLI.run(["config", "--markdown"], environment: [:])
        #expect(markdown.status == 0 && markdown.stdout == ConfigurationCatalogue.markdown())
        let refused = try LatchkeyCLI.run(["config", "check"], environment: ["DATABASE_URL": "postgresql://u:pw@db/x"])
        #expect(refused.status == 1 && refused.stdout.contains("LATCHKEY_KEY_ENCRYPTION_KEY is not set") && !refused.stdout.contains(":pw@"), "\(refused)")
        let invalid = try LatchkeyCLI.run(["config", "check"], environment: ["LATCHKEY_LISTEN": "8080"])
        #expect(invalid.status == 1 && invalid.stdout.contains("LATCHKEY_LISTEN must be host:port"), "\(invalid)")
    }

    @Test("serve names the address a browser must open for rpId localhost (not 127.0.0.1)")
    func serveNamesTheBrowserAddress() throws {
        let binary = try #require(ServeProcess.findBinary(), "build the latchkey executable (swift build --build-tests)")
        let scratch = try TestDatabase.Scratch()  // dev mode seeds its default origin: not into the shared database
        let serve = try ServeProcess(binary: binary, environment: [
            "DATABASE_URL": scratch.url, "LATCHKEY_LISTEN": "127.0.0.1:0", "LATCHKEY_DEV": "1", "LATCHKEY_RP_ID": "localhost", "LATCHKEY_ORIGINS": "http://localhost:8080",
            "LATCHKEY_KEY_ENCRYPTION_KEY": TestDatabase.keyEncryptionKeyText, "LATCHKEY_THREADS": "2", "LATCHKEY_WORKERS": "1",
        ])
        defer { serve.stop() }
        let port = try serve.waitUntilServing()
        #expect(waitFor { serve.output.contains("open http://localhost:\(port)/ in a browser") }, "\(serve.output)")
    }

    @Test("dev mode: the key file is named by its absolute path")
    func developmentKeyFileIsAbsolute() throws {
        let check = try LatchkeyCLI.run(["config", "check"], environment: ["LATCHKEY_DEV": "1", "DATABASE_URL": "postgresql://x@db/x"])
        let line = try #require(check.lines.first { $0.hasPrefix("LATCHKEY_KEY_ENCRYPTION_KEY") }, "\(check)")
        #expect(line.contains("[development key file /") && line.hasSuffix("/data/dev-key-encryption-key]"), "\(line)")
    }

    @Test("admins add: the link's origin is where the console is, and says where it came from")
    func adminsAddOrigin() throws {
        var c = Configuration()
        c.rpId = "localhost"
        c.issuer = "https://localhost"
        // `latchkey admins add` beside the run command: no LATCHKEY_ORIGINS, the dev server's origin stored.
        #expect(c.consoleOrigin(explicit: nil, originsFromEnvironment: false, stored: ["android:apk-key-hash:x", "http://localhost:8080"]) == ("http://localhost:8080", "the allowlist in the database"))
        c.adminListen = ListenAddress(host: "127.0.0.1", port: 9090)
        #expect(c.consoleOrigin(explicit: nil, originsFromEnvironment: false, stored: []).0 == "http://localhost:9090")
        var prod = Configuration()
        prod.rpId = "example.com"
        prod.issuer = "https://example.com"
        #expect(prod.consoleOrigin(explicit: nil, originsFromEnvironment: false, stored: ["https://other.example", "https://example.com"]).0 == "https://example.com")
    }
}
