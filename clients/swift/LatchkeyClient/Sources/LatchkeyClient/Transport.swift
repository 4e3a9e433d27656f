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
/// redirects its API, so one means something is in the way.
public final class URLSessionTransport: NSObject, LatchkeyTransport, URLSessionTaskDelegate, @unchecked Sendable {
    private let configuration: URLSessionConfiguration
    private let timeout: TimeInterval
    // Created once, lazily, with this object as its delegate (for the redirect refusal); immutable after.
    private lazy var session: URLSession = URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
    private let lock = NSLock()

    public init(configuration: URLSessionConfiguration = .ephemeral, timeout: TimeInterval = 30) {
        self.configuration = configuration
        self.timeout = timeout
    }

    public func send(_ request: HTTPRequest, baseURL: URL) async throws -> HTTPResponse {
        guard let url = URL(string: request.path, relativeTo: baseURL)?.absoluteURL else {
            throw LatchkeyError(.invalidRequest, "not a path: \(request.path)")
        }
        var r = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        r.httpMethod = request.method
        for h in request.headers { r.addValue(h.value, forHTTPHeaderField: h.name) }
        r.httpBody = request.body
        let session = lock.withLock { self.session }
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

    public func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                           newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        completionHandler(nil)
    }
}
