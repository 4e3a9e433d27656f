import HTTP
import JSON
import LatchkeyServer
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `latchkey webhooks listen --port P --secret S`: what an app developer runs locally to see what
/// Latchkey sends. Verifies each delivery's Standard Webhooks signature (and timestamp), answers 204,
/// and prints the event as one JSON line on stdout; a bad signature is answered 400 and reported on stderr.
enum WebhooksCommand: Command {
    static let name = "webhooks"
    static let summary = "webhooks listen: a local receiver that verifies signatures and prints each event"
    static let help = """
        usage: latchkey webhooks listen --port P --secret whsec_… [--host 127.0.0.1] [--status 204]

        Listens on http://<host>:<port>/ (any path), checks webhook-id, webhook-timestamp (within 5 minutes)
        and webhook-signature (v1, HMAC-SHA256 with the secret's key), and prints each verified event as
        {"id","type","timestamp","data"} on one line. --status answers verified deliveries with another
        status (e.g. 500 to watch retries: the same webhook-id comes back with a new timestamp).
        Subscribe it in development mode: POST /admin/v1/webhooks {"url":"http://127.0.0.1:<port>/","events":[…]}.
        """

    static func run(_ arguments: [String]) -> Int32 {
        guard arguments.first == "listen" else { printError(help); return arguments.contains("--help") || arguments.contains("-h") ? 0 : ExitCode.usage }
        let parsed: ParsedArguments
        do { parsed = try ParsedArguments(Array(arguments.dropFirst()), valued: ["port", "secret", "host", "status"], flags: ["help"]) } catch {
            printError("latchkey webhooks listen: \(error.message)\n\n\(help)"); return ExitCode.usage
        }
        if parsed.has("help") { print(help); return ExitCode.success }
        guard let port = parsed.value("port").flatMap(Int.init), (0...65535).contains(port),
              let secret = parsed.value("secret"), let key = WebhookSignature.key(fromSecret: secret) else {
            printError("latchkey webhooks listen: --port and --secret whsec_… are required\n\n\(help)"); return ExitCode.usage
        }
        let status = parsed.value("status").flatMap(Int.init) ?? 204
        guard (200...599).contains(status) else { printError("latchkey webhooks listen: --status must be 200…599"); return ExitCode.usage }
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        let server: HTTPServer
        do {
            server = try HTTPServer(configuration: .init(host: parsed.value("host") ?? "127.0.0.1", port: port, threadPoolSize: 2,
                                                         maxBodyBytes: 1 << 20),
                                    responder: WebhookReceiver(key: key, status: status))
        } catch {
            printError("latchkey webhooks listen: \(error)"); return ExitCode.failure
        }
        printError("latchkey webhooks: listening on http://\(parsed.value("host") ?? "127.0.0.1"):\(server.port)/")
        var received: Int32 = 0
        sigwait(&signals, &received)
        server.stop()
        return ExitCode.success
    }
}

/// Verifies, prints, answers.
final class WebhookReceiver: Responder {
    let key: [UInt8]
    let status: Int
    /// false: count only (bench login --webhook local).
    let printing: Bool
    /// One event line at a time on each stream; verified and refused deliveries.
    private let output = Mutex((verified: 0, refused: 0))

    init(key: [UInt8], status: Int, printing: Bool = true) {
        self.key = key
        self.status = status
        self.printing = printing
    }

    var counts: (verified: Int, refused: Int) { output.withLock { $0 } }

    func respond(to request: Request) -> Response {
        guard request.method == "POST" else { return .text(status: 405, "POST only\n") }
        let now = Int64(time(nil))
        do {
            try WebhookSignature.verify(id: request.header("webhook-id"), timestamp: request.header("webhook-timestamp"),
                                        signature: request.header("webhook-signature"), body: request.body, key: key, now: now)
        } catch {
            output.withLock { $0.refused += 1 }
            write(2, "refused: \(error.description) (webhook-id \(request.header("webhook-id") ?? "-"))\n")
            return .text(status: 400, "\(error.description)\n")
        }
        guard let event = try? JSONParser.parse(request.body) else {
            write(2, "refused: the body is not JSON\n")
            return .text(status: 400, "not JSON\n")
        }
        output.withLock { $0.verified += 1 }
        guard printing else { return .empty(status: status) }
        let line = JSONValue.object([("id", .string(request.header("webhook-id") ?? "")), ("type", event["type"] ?? .null),
                                     ("timestamp", event["timestamp"] ?? .null), ("data", event["data"] ?? .null)]).text
        write(1, line + "\n")
        return .empty(status: status)
    }

    private func write(_ fd: Int32, _ text: String) {
        output.withLock { _ in
            guard printing || fd == 2 else { return }
            let bytes = Array(text.utf8)
            _ = bytes.withUnsafeBufferPointer { Glibc.write(fd, $0.baseAddress, $0.count) }
        }
    }
}
