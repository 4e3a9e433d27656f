import Foundation
import HTTP
import JSON
import LatchkeyServer
import PostgreSQL
import Storage
import Testing
import WebAuthnTesting

/// SPEC "Assurance" ("Outside dev mode") over real HTTP: a production-mode instance (LATCHKEY_DEV
/// unset) refuses inside webhook URLs at creation, and at every delivery resolves the name, checks
/// every address and connects only to it. Every byte goes to 127.0.0.1: names resolve through the
/// test's own table (`HostResolver.table`, no DNS), and the receiver is a real HTTPS server on loopback
/// whose certificate names them. Each server has a database of its own, so its senders see only its
/// endpoints (and the shared suites' dev-mode endpoints never meet a production-mode sender).
@Suite("Webhook destinations outside dev mode", .serialized)
struct WebhookDestinationTests {
    static let loopback = IPAddress(bytes: [127, 0, 0, 1])!

    /// A production-mode sending instance on `database`, trusting `receiver`'s CA, resolving through `table`.
    static func server(_ name: String, database: TestDatabase.Scratch, receiver: TLSReceiver?, table: [String: [IPAddress]],
                       configure: (inout Configuration) -> Void = { _ in }) throws -> TestServer {
        var runtime = Runtime.system
        runtime.resolver = .table(table)
        return try TestServer(name: name, runtime: runtime) { c in
            c.databaseURL = database.url
            c.developmentMode = false
            c.webhookAllowPrivate = false
            c.outboxSenders = 2
            c.mailSenders = 0
            c.webhookRetryBase = 0.2
            c.outboxLease = 12
            c.webhookCAFile = receiver?.caFile
            configure(&c)
        }
    }

    static func shutdown(_ server: TestServer) {
        server.services.stop()
        server.http.stop()
        server.database.shutdown()
    }

    static func lastError(_ server: TestServer, _ hookId: String) throws -> String? {
        try server.database.pool.query("SELECT last_error FROM outbox_deliveries WHERE target = \(hookId)").first?.optionalString("last_error")
    }

    @Test("a name that resolves to 127.0.0.1 is never connected to: the attempt fails, is retried and recorded, the receiver sees nothing")
    func insideAddressIsNeverConnectedTo() throws {
        let scratch = try TestDatabase.Scratch()
        let name = "hooks-\(uniqueSuffix()).latchkey.test"
        let receiver = try TLSReceiver(names: [name])
        defer { receiver.stop() }
        let server = try Self.server("edge-refuse", database: scratch, receiver: receiver, table: [name: [Self.loopback]])
        defer { Self.shutdown(server) }
        #expect(!server.configuration.developmentMode && !server.configuration.webhookAllowPrivate)
        let client = server.client()

        // At creation a name is not resolved: the endpoint is accepted.
        let (hookId, _) = try client.subscribe("https://\(name):\(receiver.port)/hooks", ["user.created"])
        _ = try client.signUp(SoftAuthenticator(), username: server.username("refused"))

        // Refused attempts are retried like a refused connection: pending, no status, a next attempt.
        #expect(try waitFor { try client.deliveries(hookId).first.map { ($0["attempts"]?.intValue ?? 0) >= 2 } ?? false })
        let row = try #require(try client.deliveries(hookId).first)
        #expect(row["status"] == "pending" && row["lastStatusCode"] == .null && row["nextAttemptAt"]?.stringValue != nil, "\(row.text)")
        let error = try #require(try Self.lastError(server, hookId))
        #expect(error.contains("refused: \(name) resolves to 127.0.0.1") && error.contains("loopback"), "\(error)")
        // Not a request, not even a TCP connection.
        Thread.sleep(forTimeInterval: 0.5)
        #expect(receiver.connections == 0 && receiver.requests.isEmpty, "\(receiver.log.map(\.text))")
        withExtendedLifetime(scratch) {}
    }

    @Test("LATCHKEY_WEBHOOK_ALLOW_PRIVATE=1: the same name is delivered at the pinned address, TLS verified against the name, redirects not followed")
    func allowPrivateDeliversToThePinnedAddress() throws {
        let scratch = try TestDatabase.Scratch()
        let name = "hooks-\(uniqueSuffix()).latchkey.test"
        let stranger = "other-\(uniqueSuffix()).latchkey.test"  // resolves to the receiver too, but its certificate does not name it
        let receiver = try TLSReceiver(names: [name])
        defer { receiver.stop() }
        let server = try Self.server("edge-private", database: scratch, receiver: receiver, table: [name: [Self.loopback], stranger: [Self.loopback]]) {
            $0.webhookAllowPrivate = true
        }
        defer { Self.shutdown(server) }
        let client = server.client()
        let (hookId, _) = try client.subscribe("https://\(name):\(receiver.port)/hooks", ["user.created"])
        let (strangerId, _) = try client.subscribe("https://\(stranger):\(receiver.port)/hooks", ["user.created"])
        let (redirectId, _) = try client.subscribe("https://\(name):\(receiver.port)/redirect", ["user.created"])
        let user = try client.signUp(SoftAuthenticator(), username: server.username("pinned"))

        // Delivered: the name exists only in the test's table, so only the pinned address can have been used.
        #expect(try waitFor { try client.deliveries(hookId).first?["status"] == "delivered" })
        let delivered = receiver.requests.filter { $0["path"] == "/hooks" }
        #expect(delivered.count == 1, "\(receiver.log.map(\.text))")
        #expect(delivered.first?["host"]?.stringValue == "\(name):\(receiver.port)")
        let body = try delivered.first?["body"]?.stringValue.map { try JSONParser.parse(Array($0.utf8)) }
        #expect(body?["data"]?["userId"]?.stringValue == user.userId)

        // The certificate is checked against the URL's host name, not the address connected to.
        // Wait for the failed attempt's error, not its count: `attempts` moves when the delivery is
        // leased, before the handshake has failed (CI once read the error in between: nil).
        #expect(try waitFor { try Self.lastError(server, strangerId) != nil })
        #expect(try client.deliveries(strangerId).first.map { ($0["attempts"]?.intValue ?? 0) >= 1 } == true)
        #expect(try client.deliveries(strangerId).first?["status"] == "pending")
        let tls = try #require(try Self.lastError(server, strangerId))
        #expect(tls.lowercased().contains("ssl") || tls.lowercased().contains("certificate"), "\(tls)")

        // A redirect is an answer (retried), never followed.
        #expect(try waitFor { try client.deliveries(redirectId).first?["lastStatusCode"] == 307 })
        Thread.sleep(forTimeInterval: 0.5)
        #expect(receiver.requests.allSatisfy { $0["path"] != "/elsewhere" }, "\(receiver.requests.map(\.text))")
        #expect(try client.deliveries(redirectId).first?["status"] == "pending")
        withExtendedLifetime(scratch) {}
    }

    @Test("outside dev mode POST /admin/v1/webhooks refuses inside literals and localhost (400 invalid_request); public literals and names are created")
    func creationOutsideDevMode() throws {
        let scratch = try TestDatabase.Scratch()
        // No senders: nothing created here is ever sent anywhere.
        let server = try Self.server("edge-create", database: scratch, receiver: nil, table: [:]) { $0.outboxSenders = 0 }
        defer { Self.shutdown(server) }
        let client = server.client()
        let admin = "Bearer \(server.adminKey)"
        func create(_ url: String) throws -> Reply {
            try client.post("/admin/v1/webhooks", .object([("url", .string(url)), ("events", ["user.created"])]), authorization: admin)
        }
        for url in ["https://127.0.0.1/x", "https://2130706433/x", "https://0x7f000001/x", "https://0177.0.0.1/x", "https://127.1/x",
                    "https://10.1/x", "https://127.0.0.1./x", "https://169.254.169.254/latest/meta-data/", "https://100.64.0.1/",
                    "https://192.168.0.10/", "https://172.16.5.4/", "https://[::1]/", "https://[::ffff:127.0.0.1]/", "https://[::ffff:7f00:1]/",
                    "https://[64:ff9b::a00:1]/", "https://[fe80::1]/", "https://[fd00::1]/", "https://[ff02::1]/", "https://0.0.0.0/",
                    "https://255.255.255.255/", "https://localhost/x", "https://hooks.localhost/x", "http://127.0.0.1:9/x"] {
            let reply = try create(url)
            #expect(reply.status == 400 && reply.code == "invalid_request", "\(url): \(reply)")
        }
        for url in ["https://93.184.216.34/x", "https://[2606:4700::1]/x", "https://hooks.example.com/x", "https://10.example.com/x"] {
            let reply = try create(url)
            #expect(reply.status == 201, "\(url): \(reply)")
        }
        withExtendedLifetime(scratch) {}
    }
}
