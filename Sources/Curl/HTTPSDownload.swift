/// Why a download failed. `reason` is libcurl's message or the HTTP status.
public struct DownloadError: Error, CustomStringConvertible, Sendable {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// One HTTPS GET of a whole file (`latchkey mds fetch`), through `Curl.get`: certificate and host name
/// verified, redirects followed only to HTTPS, bounded in size and time. Nothing on a request path downloads.
public enum HTTPSDownload {
    public static func get(_ url: String, maxBytes: Int = 64 << 20, timeoutSeconds: Int = 120) throws(DownloadError) -> [UInt8] {
        guard url.hasPrefix("https://") else { throw DownloadError("only https:// URLs are fetched") }
        var options = CurlOptions()
        options.protocols = "https"
        options.timeoutSeconds = timeoutSeconds
        options.maxResponseBytes = maxBytes
        options.maxRedirects = 5
        options.userAgent = "latchkey-mds-fetch"
        let response: CurlResponse
        do { response = try Curl.get(url, options: options) } catch { throw DownloadError("\(url): \(error.reason)") }
        guard !response.truncated else { throw DownloadError("\(url): larger than \(maxBytes) bytes") }
        guard response.status == 200 else { throw DownloadError("\(url): HTTP status \(response.status)") }
        return response.body
    }
}
