internal import CCurl

/// Why a download failed. `reason` is libcurl's message or the HTTP status.
public struct DownloadError: Error, CustomStringConvertible, Sendable {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// The only Swift over libcurl: one HTTPS GET, certificate and host name verified by libcurl's
/// OpenSSL against the system trust store, redirects followed only to HTTPS, bounded in size and
/// time. Used by `latchkey mds fetch`; nothing on a request path downloads.
public enum HTTPSDownload {
    public static func get(_ url: String, maxBytes: Int = 64 << 20, timeoutSeconds: Int = 120) throws(DownloadError) -> [UInt8] {
        guard url.hasPrefix("https://") else { throw DownloadError("only https:// URLs are fetched") }
        guard curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK, let handle = curl_easy_init() else {
            throw DownloadError("libcurl could not start")
        }
        defer { curl_easy_cleanup(handle) }
        let sink = Sink(limit: maxBytes)
        let unmanaged = Unmanaged.passRetained(sink)
        defer { unmanaged.release() }
        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        let code: CURLcode = errorBuffer.withUnsafeMutableBufferPointer { errors in
            _ = shim_curl_setopt_string(handle, CURLOPT_URL, url)
            _ = shim_curl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "https")
            _ = shim_curl_setopt_string(handle, CURLOPT_REDIR_PROTOCOLS_STR, "https")
            _ = shim_curl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 1)
            _ = shim_curl_setopt_long(handle, CURLOPT_MAXREDIRS, 5)
            _ = shim_curl_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 1)
            _ = shim_curl_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 2)
            _ = shim_curl_setopt_long(handle, CURLOPT_TIMEOUT, timeoutSeconds)
            _ = shim_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
            _ = shim_curl_setopt_string(handle, CURLOPT_USERAGENT, "latchkey-mds-fetch")
            _ = shim_curl_setopt_pointer(handle, CURLOPT_ERRORBUFFER, errors.baseAddress)
            _ = shim_curl_setopt_write(handle, { data, size, count, context in
                guard let data, let context else { return 0 }
                let sink = Unmanaged<Sink>.fromOpaque(context).takeUnretainedValue()
                let n = size * count
                guard sink.bytes.count + n <= sink.limit else { sink.overflow = true; return 0 }  // 0 aborts the transfer
                data.withMemoryRebound(to: UInt8.self, capacity: n) { sink.bytes.append(contentsOf: UnsafeBufferPointer(start: $0, count: n)) }
                return n
            })
            _ = shim_curl_setopt_pointer(handle, CURLOPT_WRITEDATA, unmanaged.toOpaque())
            return curl_easy_perform(handle)
        }
        if sink.overflow { throw DownloadError("\(url): larger than \(maxBytes) bytes") }
        guard code == CURLE_OK else {
            let detail = String(decoding: errorBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw DownloadError("\(url): \(detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail)")
        }
        let status = shim_curl_response_code(handle)
        guard status == 200 else { throw DownloadError("\(url): HTTP status \(status)") }
        return sink.bytes
    }

    /// Collects the body for the write callback (used on the calling thread only).
    private final class Sink {
        var bytes: [UInt8] = []
        var overflow = false
        let limit: Int
        init(limit: Int) { self.limit = limit }
    }
}
