import HTTP
import JSON
import LatchkeyServer
import Storage

// The HTTP request path without a socket: the real `Application` (CORS, rate limiter, metrics,
// router, every route, every handler's parsing) over a `Database` whose URL names a socket that
// does not exist. Pools connect lazily, so a handler that reaches storage fails fast with a
// connection error (503 `unavailable`) instead of needing a server, and everything before that
// (the parse layers, input validation, auth checks) runs as in production. No stubs.
extension FuzzTargets {
    static let httpTargets: [FuzzTarget] = [
        FuzzTarget("http", "Application.respond over every route (no socket, storage unreachable); input is an HTTP/1.1 request") { bytes in
            let request = HTTPFuzz.request(from: bytes)
            let response = HTTPFuzz.application.respond(to: request)
            // SPEC: no input yields a 5xx; here storage is down, so 503 is the one 5xx allowed.
            FuzzCheck.require((100...599).contains(response.status) && (response.status < 500 || response.status == 503),
                              "\(request.method) \(request.rawPath) answered \(response.status)")
            for (name, value) in response.headers {
                FuzzCheck.require(!(name + value).utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0 },
                                  "response header \(name) holds CR, LF or NUL")
            }
            if response.header("Content-Type")?.hasPrefix("application/problem+json") == true {
                FuzzCheck.require((try? JSONParser.parse(response.body)) != nil, "problem body is not JSON")
            }
        },
    ]
}

enum HTTPFuzz {
    static let adminKey = "fuzz-admin-key-0123456789"

    static let application: Application = {
        var configuration = Configuration()
        configuration.developmentMode = true
        configuration.origins = ["http://localhost:8080"]
        configuration.adminKeyHash = AdminKey.hash(adminKey)
        configuration.trustProxy = true
        configuration.databaseURL = "postgresql:///latchkey?host=/nonexistent/latchkey-fuzz&connect_timeout=1"
        let database = Database(url: configuration.databaseURL, connections: 2)
        return Application(services: Services(configuration: configuration, database: database, log: RequestLog(enabled: false)))
    }()

    /// `METHOD SP target [SP version]` LF, header lines `Name: value` LF, an empty line, the body.
    /// Lenient (CR optional, a missing target is "/"): libmicrohttpd has framed the request by the
    /// time the responder sees it, so this only has to reach every field of `Request`.
    static func request(from bytes: [UInt8]) -> Request {
        var lines: [[UInt8]] = []
        var start = 0
        var bodyStart = bytes.count
        var index = 0
        while index < bytes.count {
            if bytes[index] == 0x0A {
                var line = Array(bytes[start..<index])
                if line.last == 0x0D { line.removeLast() }
                start = index + 1
                if line.isEmpty && !lines.isEmpty { bodyStart = start; break }
                lines.append(line)
            }
            index += 1
        }
        if index >= bytes.count, start < bytes.count { lines.append(Array(bytes[start...])) }
        let requestLine = lines.first.map { String(decoding: $0, as: UTF8.self) } ?? ""
        let parts = requestLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
        let method = parts.first.map(String.init) ?? "GET"
        let target = parts.count > 1 ? String(parts[1]) : "/"
        var headers: [(String, String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let name = String(decoding: line[..<colon], as: UTF8.self)
            let value = String(decoding: line[(colon + 1)...].drop { $0 == 0x20 || $0 == 0x09 }, as: UTF8.self)
            headers.append((name, value))
        }
        let body = bodyStart < bytes.count ? Array(bytes[bodyStart...]) : []
        return Request(method: method, target: target, headers: headers, body: body, remoteAddress: "203.0.113.7")
    }
}
