internal import CCurl
import Synchronization

/// Why a transfer failed before an HTTP status came back. `reason` is libcurl's text for the code
/// (never the request's headers or body).
public struct CurlError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable {
        case timeout, connectionFailed, tls, protocolNotAllowed, invalidURL, other
    }
    public let code: Code
    public let reason: String
    public init(_ code: Code, _ reason: String) { self.code = code; self.reason = reason }
    public var description: String { "\(code.rawValue): \(reason)" }
}

/// What came back: the status and at most `maxResponseBytes` of the body.
public struct CurlResponse: Sendable {
    public let status: Int
    public let body: [UInt8]
    /// The body was longer than `maxResponseBytes` (the rest was read and dropped).
    public let truncated: Bool
}

/// How one transfer may go. TLS peers and host names are always verified; redirects are followed only
/// when `maxRedirects` allows, and only to `protocols`.
public struct CurlOptions: Sendable {
    /// The whole transfer (connect included) must finish within this.
    public var timeoutSeconds: Int = 10
    /// Schemes the URL may have, for libcurl's CURLOPT_PROTOCOLS_STR (`https`; `http,https` in dev mode).
    public var protocols: String = "https"
    /// Bytes of the response body kept; the rest is read and dropped.
    public var maxResponseBytes: Int = 65536
    public var userAgent: String = "Latchkey"
    /// Redirects followed (0: none — a webhook delivery never follows one).
    public var maxRedirects: Int = 0
    public init() {}
}

/// The only Swift over libcurl (Debian's libcurl4-openssl-dev: OpenSSL for TLS, like the rest of
/// Latchkey): one blocking request on one easy handle, safe to call from many threads at once.
public enum Curl {
    /// `curl_global_init` before any handle, once, from whichever thread gets here first.
    static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    /// `POST url` with `headers` and `body`; the status whatever it is (redirects included, not followed),
    /// or why no status came back.
    public static func post(_ url: String, headers: [(String, String)], body: [UInt8],
                            options: CurlOptions = CurlOptions()) throws(CurlError) -> CurlResponse {
        try perform(method: "POST", url: url, headers: headers, body: body, options: options)
    }

    /// `GET url` (no body).
    public static func get(_ url: String, headers: [(String, String)] = [], options: CurlOptions = CurlOptions()) throws(CurlError) -> CurlResponse {
        try perform(method: "GET", url: url, headers: headers, body: nil, options: options)
    }

    static func perform(method: String, url: String, headers: [(String, String)], body: [UInt8]?,
                        options: CurlOptions) throws(CurlError) -> CurlResponse {
        guard initialized, let handle = curl_easy_init() else { throw CurlError(.other, "libcurl could not start") }
        defer { curl_easy_cleanup(handle) }
        var list: UnsafeMutablePointer<curl_slist>? = nil
        for (name, value) in headers {
            // Header injection: a CR or LF in a name or value would start another header.
            guard !name.contains(where: { $0 == "\r" || $0 == "\n" || $0 == ":" }), !value.contains(where: { $0 == "\r" || $0 == "\n" }) else {
                curl_slist_free_all(list)
                throw CurlError(.other, "header \(name) is not a single line")
            }
            list = curl_slist_append(list, "\(name): \(value)")
        }
        // An empty `Expect:` stops libcurl waiting for 100-continue on larger bodies.
        list = curl_slist_append(list, "Expect:")
        defer { curl_slist_free_all(list) }
        let sink = Sink(limit: options.maxResponseBytes)
        let context = Unmanaged.passUnretained(sink).toOpaque()
        var code = CURLE_OK
        func set(_ result: CURLcode) { if code == CURLE_OK { code = result } }
        set(latchkey_curl_setopt_string(handle, CURLOPT_URL, url))
        set(latchkey_curl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, options.protocols))
        set(latchkey_curl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, options.maxRedirects > 0 ? 1 : 0))
        if options.maxRedirects > 0 {
            set(latchkey_curl_setopt_long(handle, CURLOPT_MAXREDIRS, options.maxRedirects))
            set(latchkey_curl_setopt_string(handle, CURLOPT_REDIR_PROTOCOLS_STR, options.protocols))
        }
        set(latchkey_curl_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 1))
        set(latchkey_curl_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 2))
        set(latchkey_curl_setopt_long(handle, CURLOPT_TIMEOUT, options.timeoutSeconds))
        set(latchkey_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT, options.timeoutSeconds))
        // Threads: no signals for timeouts (libcurl's threaded resolver does the DNS part).
        set(latchkey_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1))
        set(latchkey_curl_setopt_string(handle, CURLOPT_USERAGENT, options.userAgent))
        set(latchkey_curl_setopt_slist(handle, CURLOPT_HTTPHEADER, list))
        set(latchkey_curl_setopt_write(handle, writeBody))
        set(latchkey_curl_setopt_pointer(handle, CURLOPT_WRITEDATA, context))
        var transferCode = CURLE_OK
        withExtendedLifetime(sink) {
            if let body {
                set(latchkey_curl_setopt_long(handle, CURLOPT_POST, 1))
                set(latchkey_curl_setopt_offset(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count)))
                body.withUnsafeBufferPointer { b in
                    // COPYPOSTFIELDS: libcurl keeps its own copy, so no pointer outlives this closure.
                    let raw = UnsafeMutableRawPointer(mutating: b.baseAddress ?? UnsafePointer(bitPattern: 1)!)
                    set(latchkey_curl_setopt_pointer(handle, CURLOPT_COPYPOSTFIELDS, raw))
                }
            } else if method != "GET" {
                set(latchkey_curl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, method))
            }
            guard code == CURLE_OK else { return }
            transferCode = curl_easy_perform(handle)
        }
        if code != CURLE_OK { throw error(code) }
        if transferCode != CURLE_OK { throw error(transferCode) }
        var status = 0
        guard latchkey_curl_response_code(handle, &status) == CURLE_OK, status > 0 else {
            throw CurlError(.other, "no HTTP status")
        }
        return CurlResponse(status: status, body: sink.bytes, truncated: sink.truncated)
    }

    static func error(_ code: CURLcode) -> CurlError {
        let reason = String(cString: curl_easy_strerror(code))
        switch code {
        case CURLE_OPERATION_TIMEDOUT: return CurlError(.timeout, reason)
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_SEND_ERROR, CURLE_RECV_ERROR,
             CURLE_GOT_NOTHING:
            return CurlError(.connectionFailed, reason)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CACERT_BADFILE:
            return CurlError(.tls, reason)
        case CURLE_UNSUPPORTED_PROTOCOL: return CurlError(.protocolNotAllowed, reason)
        case CURLE_URL_MALFORMAT: return CurlError(.invalidURL, reason)
        default: return CurlError(.other, reason)
        }
    }
}

/// The response body, kept up to a limit; only touched by the transfer's own thread.
private final class Sink: @unchecked Sendable {
    let limit: Int
    var bytes: [UInt8] = []
    var truncated = false
    init(limit: Int) { self.limit = limit }
}

private let writeBody: latchkey_curl_write_fn = { data, size, count, context in
    let n = size * count
    guard let context, let data else { return n }
    let sink = Unmanaged<Sink>.fromOpaque(context).takeUnretainedValue()
    let room = max(0, sink.limit - sink.bytes.count)
    if n > room { sink.truncated = true }
    if room > 0 {
        data.withMemoryRebound(to: UInt8.self, capacity: n) { p in
            sink.bytes.append(contentsOf: UnsafeBufferPointer(start: p, count: min(n, room)))
        }
    }
    return n
}
