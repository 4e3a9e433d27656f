internal import CCurl
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

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
    /// The response headers named in `CurlOptions.responseHeaders` that came back, by lower-case name
    /// (a header sent more than once: its values joined with ", ", as RFC 9110 §5.3 reads them).
    public let headers: [String: String]
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
    /// Where the connection may go. nil: libcurl resolves the URL's host itself (`latchkey mds fetch`).
    /// Otherwise to these addresses only (4 or 16 bytes each, network order), which the caller has
    /// checked: the URL's host and port are pinned to them (CURLOPT_RESOLVE: libcurl looks nothing up),
    /// a socket to any other address is refused (CURLOPT_OPENSOCKETFUNCTION), and no proxy is used (a
    /// proxy would look the name up again). TLS still verifies the certificate against the URL's host name.
    public var connectOnlyTo: [[UInt8]]? = nil
    /// A PEM file of the CAs the peer's certificate must chain to, instead of the system's store.
    public var caFile: String? = nil
    /// Response headers to keep in `CurlResponse.headers` (none by default: a webhook needs none).
    public var responseHeaders: [String] = []
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
        // Pinned: `host:port:addr,addr` with the host and port as libcurl itself reads the URL (so the
        // entry is the one its lookup would ask for), and a gate on every socket it opens.
        var pins: UnsafeMutablePointer<curl_slist>? = nil
        defer { curl_slist_free_all(pins) }
        var gate: SocketGate? = nil
        if let allowed = options.connectOnlyTo {
            let texts = allowed.compactMap(numericAddress)
            guard !allowed.isEmpty, texts.count == allowed.count else { throw CurlError(.connectionFailed, "no checked address to connect to") }
            let (host, port) = try hostAndPort(url)
            // An IP literal is not looked up (and a pin would redirect it): the gate alone checks it.
            var literal = in_addr()
            if !host.hasPrefix("["), inet_pton(AF_INET, host, &literal) != 1 {
                pins = curl_slist_append(nil, "\(host):\(port):\(texts.joined(separator: ","))")
            }
            gate = SocketGate(allowed: allowed)
            set(latchkey_curl_setopt_slist(handle, CURLOPT_RESOLVE, pins))
            set(latchkey_curl_setopt_string(handle, CURLOPT_PROXY, ""))
            set(latchkey_curl_setopt_opensocket(handle, openCheckedSocket))
            set(latchkey_curl_setopt_pointer(handle, CURLOPT_OPENSOCKETDATA, Unmanaged.passUnretained(gate!).toOpaque()))
        }
        if let ca = options.caFile { set(latchkey_curl_setopt_string(handle, CURLOPT_CAINFO, ca)) }
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
        withExtendedLifetime((sink, gate)) {
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
        if transferCode != CURLE_OK, let refused = gate?.refused, !refused.isEmpty {
            throw CurlError(.connectionFailed, "refused to connect to \(refused.joined(separator: ", ")): not an address checked for this host")
        }
        if transferCode != CURLE_OK { throw error(transferCode) }
        var status = 0
        guard latchkey_curl_response_code(handle, &status) == CURLE_OK, status > 0 else {
            throw CurlError(.other, "no HTTP status")
        }
        return CurlResponse(status: status, body: sink.bytes, truncated: sink.truncated,
                            headers: responseHeaders(handle, named: options.responseHeaders))
    }

    /// The named headers of the last response (curl_easy_header, libcurl ≥ 7.84: no header callback).
    static func responseHeaders(_ handle: UnsafeMutableRawPointer, named names: [String]) -> [String: String] {
        var found: [String: String] = [:]
        for name in names {
            var values: [String] = []
            var header: UnsafeMutablePointer<curl_header>? = nil
            var index = 0
            while curl_easy_header(handle, name, index, UInt32(CURLH_HEADER), -1, &header) == CURLHE_OK, let h = header {
                values.append(String(cString: h.pointee.value))
                index += 1
                if index >= h.pointee.amount { break }
            }
            if !values.isEmpty { found[name.lowercased()] = values.joined(separator: ", ") }
        }
        return found
    }

    /// The host (IPv6 in brackets) and port libcurl reads from `url` (its URL API: percent-escapes
    /// decoded, numeric IPv4 normalised, the scheme's default port filled in).
    static func hostAndPort(_ url: String) throws(CurlError) -> (host: String, port: String) {
        guard let parsed = curl_url() else { throw CurlError(.other, "libcurl could not start") }
        defer { curl_url_cleanup(parsed) }
        guard curl_url_set(parsed, CURLUPART_URL, url, 0) == CURLUE_OK else { throw CurlError(.invalidURL, "libcurl cannot parse the URL") }
        var host: UnsafeMutablePointer<CChar>? = nil
        var port: UnsafeMutablePointer<CChar>? = nil
        defer { curl_free(host); curl_free(port) }
        guard curl_url_get(parsed, CURLUPART_HOST, &host, 0) == CURLUE_OK,
              curl_url_get(parsed, CURLUPART_PORT, &port, UInt32(CURLU_DEFAULT_PORT)) == CURLUE_OK, let host, let port else {
            throw CurlError(.invalidURL, "the URL has no host")
        }
        return (String(cString: host), String(cString: port))
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

/// The addresses a pinned transfer may open sockets to, and those it was refused; only touched by
/// the transfer's own thread (libcurl calls the open-socket callback from `curl_easy_perform`).
private final class SocketGate: @unchecked Sendable {
    let allowed: [[UInt8]]
    var refused: [String] = []
    init(allowed: [[UInt8]]) { self.allowed = allowed }
}

/// `a.b.c.d` or `[v6]` for 4 or 16 bytes (CURLOPT_RESOLVE's address syntax); nil for any other length.
private func numericAddress(_ bytes: [UInt8]) -> String? {
    let family: Int32
    switch bytes.count {
    case 4: family = AF_INET
    case 16: family = AF_INET6
    default: return nil
    }
    var text = [CChar](repeating: 0, count: 64)
    guard bytes.withUnsafeBytes({ inet_ntop(family, $0.baseAddress, &text, socklen_t(text.count)) }) != nil else { return nil }
    let s = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return family == AF_INET6 ? "[\(s)]" : s
}

/// CURLOPT_OPENSOCKETFUNCTION: a socket only to an address of the gate's list, else CURL_SOCKET_BAD
/// (libcurl then reports it could not connect, and `perform` says which address was refused).
private let openCheckedSocket: curl_opensocket_callback = { context, _, address in
    guard let context, let address else { return CURL_SOCKET_BAD }
    let gate = Unmanaged<SocketGate>.fromOpaque(context).takeUnretainedValue()
    let family = address.pointee.family
    let length = Int(address.pointee.addrlen)
    guard let offset = MemoryLayout<curl_sockaddr>.offset(of: \curl_sockaddr.addr) else { return CURL_SOCKET_BAD }
    let sockaddr = UnsafeRawPointer(address) + offset
    var bytes: [UInt8] = []
    if family == AF_INET, length >= MemoryLayout<sockaddr_in>.size, let at = MemoryLayout<sockaddr_in>.offset(of: \sockaddr_in.sin_addr) {
        bytes = Array(UnsafeRawBufferPointer(start: sockaddr + at, count: 4))
    } else if family == AF_INET6, length >= MemoryLayout<sockaddr_in6>.size, let at = MemoryLayout<sockaddr_in6>.offset(of: \sockaddr_in6.sin6_addr) {
        bytes = Array(UnsafeRawBufferPointer(start: sockaddr + at, count: 16))
    }
    guard !bytes.isEmpty, gate.allowed.contains(bytes) else {
        gate.refused.append(numericAddress(bytes) ?? "an address of family \(family)")
        return CURL_SOCKET_BAD
    }
    return socket(family, address.pointee.socktype | Int32(SOCK_CLOEXEC.rawValue), address.pointee.protocol)
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
