import Foundation
import HTTP
import JSON
import LatchkeyServer
import PostgreSQLTesting
import Synchronization

/// A real HTTP receiver on loopback (HTTPServer, port 0) for webhook tests: records every request
/// and answers with what `answer(attemptNumberForThisId)` says, after `delay` seconds. Tracks how many
/// requests for one webhook-id are in flight at once.
final class TestReceiver: Responder, Sendable {
    struct Delivery: Sendable {
        let id: String
        let timestamp: String
        let signature: String
        let body: [UInt8]
        let receivedAt: Date
        var json: JSONValue? { try? JSONParser.parse(body) }
        var type: String? { json?["type"]?.stringValue }
        var data: JSONValue? { json?["data"] }
    }

    private struct State {
        var deliveries: [Delivery] = []
        var inFlight: [String: Int] = [:]
        var maxInFlightPerId = 0
        var attempts: [String: Int] = [:]
    }
    private let state = Mutex(State())
    let answer: @Sendable (_ attempt: Int) -> Int
    let delay: Double
    private let server = Mutex<HTTPServer?>(nil)

    init(port: Int = 0, delay: Double = 0, answer: @escaping @Sendable (Int) -> Int = { _ in 204 }) throws {
        self.answer = answer
        self.delay = delay
        try listen(port: port)
    }

    /// (Re)starts listening, e.g. on the port a stopped receiver had ("receiver down, then up").
    func listen(port: Int) throws {
        let http = try HTTPServer(configuration: .init(host: "127.0.0.1", port: port, threadPoolSize: 4, maxBodyBytes: 1 << 20),
                                  responder: self)
        server.withLock { $0 = http }
    }

    var boundPort: Int { server.withLock { $0?.port ?? 0 } }
    var url: String { "http://127.0.0.1:\(boundPort)/hooks" }

    func stop() { server.withLock { $0?.stop(); $0 = nil } }

    func respond(to request: Request) -> Response {
        let id = request.header("webhook-id") ?? ""
        let attempt = state.withLock { s -> Int in
            s.inFlight[id, default: 0] += 1
            s.maxInFlightPerId = max(s.maxInFlightPerId, s.inFlight[id]!)
            s.attempts[id, default: 0] += 1
            return s.attempts[id]!
        }
        if delay > 0 { Thread.sleep(forTimeInterval: delay) }
        let status = answer(attempt)
        state.withLock { s in
            s.inFlight[id, default: 1] -= 1
            s.deliveries.append(Delivery(id: id, timestamp: request.header("webhook-timestamp") ?? "",
                                         signature: request.header("webhook-signature") ?? "", body: request.body, receivedAt: Date()))
        }
        return .empty(status: status)
    }

    var deliveries: [Delivery] { state.withLock { $0.deliveries } }
    /// Requests that reached the handler (answered or not yet).
    var started: Int { state.withLock { $0.attempts.values.reduce(0, +) } }
    var maxInFlightPerId: Int { state.withLock { $0.maxInFlightPerId } }

    /// Bounded polling until `condition` holds over the deliveries so far.
    @discardableResult
    func wait(seconds: Double = 20, for condition: ([Delivery]) -> Bool) -> [Delivery] {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            let d = deliveries
            if condition(d) { return d }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return deliveries
    }

    /// The deliveries of events about `userId`.
    func about(_ userId: String) -> [Delivery] { deliveries.filter { $0.data?["userId"]?.stringValue == userId } }
}

extension TestServer {
    /// A test server that sends webhooks (dev mode, so http:// to loopback is allowed), with fast retries.
    static func sending(name: String, configure: (inout Configuration) -> Void = { _ in }) throws -> TestServer {
        try TestServer(name: name) { c in
            c.developmentMode = true
            c.outboxSenders = 4
            // Every suite shares one database, so one outbox: a webhook suite's server must not claim
            // the recovery suite's mail (dev mode would "send" it as an .eml file in data/mail).
            c.mailSenders = 0
            c.webhookRetryBase = 0.2
            c.outboxLease = 12
            configure(&c)
        }
    }
}

extension Client {
    /// `POST /admin/v1/webhooks` → (id, secret).
    func subscribe(_ url: String, _ events: [String]) throws -> (id: String, secret: String) {
        let r = try post("/admin/v1/webhooks", .object([("url", .string(url)), ("events", .array(events.map { .string($0) }))]),
                         authorization: "Bearer \(endpoint.adminKey ?? "")")
        guard r.status == 201, let id = r.json?["id"]?.stringValue, let secret = r.json?["secret"]?.stringValue else {
            throw TestSetupError("subscribe failed: \(r)")
        }
        return (id, secret)
    }

    /// Deletes an endpoint (tests share one database: no endpoint outlives its test).
    func unsubscribe(_ webhookId: String) {
        _ = try? send("DELETE", "/admin/v1/webhooks/\(webhookId)", authorization: "Bearer \(endpoint.adminKey ?? "")")
    }

    func deliveries(_ webhookId: String) throws -> [JSONValue] {
        try get("/admin/v1/webhooks/\(webhookId)/deliveries?limit=1000", authorization: "Bearer \(endpoint.adminKey ?? "")")
            .json?["deliveries"]?.arrayValue ?? []
    }
}
