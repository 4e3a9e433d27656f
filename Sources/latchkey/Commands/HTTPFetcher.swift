import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// A blocking HTTP(S) GET/POST/DELETE that never follows redirects (a redirect is itself what
/// `wellknown check` must report), for the CLI only. TLS and certificate checks are libcurl's
/// (FoundationNetworking), so a live deployment is checked as a platform would fetch it.
struct HTTPFetcher {
    struct Answer {
        var url: String
        var status: Int
        var headers: [String: String]  // lower-cased names
        var body: [UInt8]
        func header(_ name: String) -> String? { headers[name.lowercased()] }
    }

    struct Failure: Error, CustomStringConvertible { let description: String }

    var timeout: Double = 15

    func send(_ method: String = "GET", _ url: String, headers: [String: String] = [:], body: [UInt8]? = nil) throws(Failure) -> Answer {
        guard let u = URL(string: url), let scheme = u.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw Failure(description: "not an http(s) URL: \(url)")
        }
        var request = URLRequest(url: u, cachePolicy: .reloadIgnoringLocalAndRemoteCacheData, timeoutInterval: timeout)
        request.httpMethod = method
        for (k, v) in headers { request.setValue(v, forHTTPHeaderField: k) }
        if let body { request.httpBody = Data(body) }
        let session = URLSession(configuration: .ephemeral, delegate: NoRedirects(), delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<Result<Answer, Failure>?>(nil)
        let task = session.dataTask(with: request) { data, response, error in
            if let http = response as? HTTPURLResponse {
                var h: [String: String] = [:]
                for (k, v) in http.allHeaderFields { h["\(k)".lowercased()] = "\(v)" }
                result.withLock { $0 = .success(Answer(url: url, status: http.statusCode, headers: h, body: data.map { [UInt8]($0) } ?? [])) }
            } else {
                result.withLock { $0 = .failure(Failure(description: "\(url): \(error.map { "\($0.localizedDescription)" } ?? "no HTTP response")")) }
            }
            done.signal()
        }
        task.resume()
        done.wait()
        switch result.withLock({ $0 }) {
        case .success(let a): return a
        case .failure(let f): throw f
        case nil: throw Failure(description: "\(url): no answer")
        }
    }
}

final class NoRedirects: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        completionHandler(nil)
    }
}
