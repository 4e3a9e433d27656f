import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One HTTP exchange, as small as the client needs: an app with its own networking stack (pinning,
/// a proxy, metrics) implements `LatchkeyTransport` over it; `URLSessionTransport` is the default.
public struct HTTPRequest: Sendable {
    public var method: String
    /// Path and query, starting with `/` (e.g. `/v1/passkeys`).
    public var path: String
    public var headers: [(name: String, value: String)]
    public var body: Data?

    public init(method: String, path: String, headers: [(name: String, value: String)] = [], body: Data? = nil) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
    }
}

public struct HTTPResponse: Sendable {
    public var status: Int
    /// Header names in lower case.
    public var headers: [String: String]
    public var body: Data

    public init(status: Int, headers: [String: String], body: Data) {
        self.status = status
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { a, _ in a })
        self.body = body
    }

    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}

public protocol LatchkeyTransport: Sendable {
    /// Sends `request` to `baseURL` + `request.path`. Throws only when there is no answer; any HTTP
    /// status is an answer.
    func send(_ request: HTTPRequest, baseURL: URL) async throws -> HTTPResponse
}

/// `URLSession` (FoundationNetworking on Linux). Redirects are not followed: Latchkey never
/// redirects its API, so one means something is in the way. Create one per app (or pass your own
/// `URLSession`) and reuse it: each holds a session of its own, invalidated when it goes away.
public final class URLSessionTransport: LatchkeyTransport, Sendable {
    private let session: URLSession
    private let timeout: TimeInterval
    private let owned: Bool

    public init(configuration: URLSessionConfiguration = .ephemeral, timeout: TimeInterval = 30) {
        session = URLSession(configuration: configuration, delegate: RedirectRefusal(), delegateQueue: nil)
        self.timeout = timeout
        owned = true
    }

    /// Your own session (its delegate decides about redirects).
    public init(session: URLSession, timeout: TimeInterval = 30) {
        self.session = session
        self.timeout = timeout
        owned = false
    }

    deinit { if owned { session.finishTasksAndInvalidate() } }

    public func send(_ request: HTTPRequest, baseURL: URL) async throws -> HTTPResponse {
        guard let url = URL(string: request.path, relativeTo: baseURL)?.absoluteURL else {
            throw LatchkeyError(.invalidRequest, "not a path: \(request.path)")
        }
        var r = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        r.httpMethod = request.method
        for h in request.headers { r.addValue(h.value, forHTTPHeaderField: h.name) }
        r.httpBody = request.body
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTPResponse, any Error>) in
            let task = session.dataTask(with: r) { data, response, error in
                if let error {
                    continuation.resume(throwing: LatchkeyError(.transport, "\(request.method) \(request.path): \(error.localizedDescription)"))
                    return
                }
                guard let http = response as? HTTPURLResponse else {
                    continuation.resume(throwing: LatchkeyError(.transport, "\(request.method) \(request.path): no HTTP response"))
                    return
                }
                var headers: [String: String] = [:]
                for (k, v) in http.allHeaderFields { if let k = k as? String, let v = v as? String { headers[k] = v } }
                continuation.resume(returning: HTTPResponse(status: http.statusCode, headers: headers, body: data ?? Data()))
            }
            task.resume()
        }
    }
}

/// The session's delegate: answers a redirect with "don't follow" (the 3xx comes back as it is).
private final class RedirectRefusal: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        completionHandler(nil)
    }
}
