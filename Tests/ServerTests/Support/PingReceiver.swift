import Foundation
import HTTP
import JSON
import Synchronization

/// A CIBA ping client's notification endpoint on loopback (CIBA Core §10.2): a real HTTP server
/// (HTTPServer, port 0) that records each POST's `Authorization`, `Content-Type` and body, and
/// answers what `answer` says (204 by default; a 401, a 200 with a body, a redirect).
final class PingReceiver: Responder, Sendable {
    struct Ping: Sendable {
        let authorization: String?
        let contentType: String?
        let body: [UInt8]
        let receivedAt: Date
        var authReqId: String? { (try? JSONParser.parse(body))?["auth_req_id"]?.stringValue }
    }

    private let pings = Mutex<[Ping]>([])
    private let server = Mutex<HTTPServer?>(nil)
    let answer: @Sendable () -> Response

    init(answer: @escaping @Sendable () -> Response = { .empty(status: 204) }) throws {
        self.answer = answer
        let http = try HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threadPoolSize: 2, maxBodyBytes: 1 << 16), responder: self)
        server.withLock { $0 = http }
    }

    var url: String { "http://127.0.0.1:\(server.withLock { $0?.port ?? 0 })/ciba-callback" }

    func stop() { server.withLock { $0?.stop(); $0 = nil } }

    func respond(to request: Request) -> Response {
        pings.withLock {
            $0.append(Ping(authorization: request.header("Authorization"), contentType: request.header("Content-Type"), body: request.body,
                           receivedAt: Date()))
        }
        return answer()
    }

    var received: [Ping] { pings.withLock { $0 } }

    /// The pings for `authReqId` so far, waiting up to `seconds` for at least `count` of them.
    @discardableResult
    func wait(for authReqId: String, count: Int = 1, seconds: Double = 20) -> [Ping] {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            let mine = received.filter { $0.authReqId == authReqId }
            if mine.count >= count || Date() >= deadline { return mine }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }
}
