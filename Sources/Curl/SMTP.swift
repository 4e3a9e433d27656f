internal import CCurl

/// Where and how mail goes out (SPEC "Mail": `LATCHKEY_SMTP_URL`, `_USER`, `_PASSWORD`).
public struct SMTPSettings: Sendable {
    /// `smtp://host[:port]` (STARTTLS whenever the server offers it) or `smtps://host[:port]` (TLS from the start).
    public var url: String
    public var user: String?
    public var password: String?
    /// The whole transaction (connect included) must finish within this.
    public var timeoutSeconds: Int = 20
    /// A PEM bundle of the CAs to trust instead of the system's (a relay with a private CA).
    public var caFile: String? = nil

    public init(url: String, user: String? = nil, password: String? = nil) {
        self.url = url
        self.user = user
        self.password = password
    }

    /// True for `smtp://` and `smtps://` URLs.
    public static func isValid(_ url: String) -> Bool {
        let lower = url.lowercased()
        return (lower.hasPrefix("smtp://") || lower.hasPrefix("smtps://")) && !url.contains(where: { $0 == "\r" || $0 == "\n" || $0 == " " })
    }
}

extension Curl {
    /// Sends one RFC 5322 message over SMTP with libcurl's SMTP support (the same libcurl and
    /// OpenSSL as the webhook POSTs: no other C library). `smtp://` asks for STARTTLS and uses it
    /// when the server offers it (CURLUSESSL_TRY); `smtps://` is TLS from the first byte. Peers
    /// and host names are verified. Returns the server's last reply code (250 when accepted).
    @discardableResult
    public static func sendMail(_ settings: SMTPSettings, from: String, to recipients: [String], message: [UInt8]) throws(CurlError) -> Int {
        guard SMTPSettings.isValid(settings.url) else { throw CurlError(.invalidURL, "the SMTP URL must be smtp:// or smtps://") }
        for address in [from] + recipients where address.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "<" || $0 == ">" }) {
            throw CurlError(.other, "an address is not a single line")
        }
        guard initialized, let handle = curl_easy_init() else { throw CurlError(.other, "libcurl could not start") }
        defer { curl_easy_cleanup(handle) }
        var list: UnsafeMutablePointer<curl_slist>? = nil
        for r in recipients { list = curl_slist_append(list, "<\(r)>") }
        defer { curl_slist_free_all(list) }
        let source = Source(message)
        let context = Unmanaged.passUnretained(source).toOpaque()
        var code = CURLE_OK
        func set(_ result: CURLcode) { if code == CURLE_OK { code = result } }
        set(latchkey_curl_setopt_string(handle, CURLOPT_URL, settings.url))
        set(latchkey_curl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "smtp,smtps"))
        set(latchkey_curl_setopt_long(handle, CURLOPT_USE_SSL, Int(CURLUSESSL_TRY.rawValue)))
        // Always verified: a relay with a private CA is trusted through `caFile`, never by switching checks off.
        set(latchkey_curl_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 1))
        set(latchkey_curl_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 2))
        if let ca = settings.caFile { set(latchkey_curl_setopt_string(handle, CURLOPT_CAINFO, ca)) }
        set(latchkey_curl_setopt_long(handle, CURLOPT_TIMEOUT, settings.timeoutSeconds))
        set(latchkey_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT, settings.timeoutSeconds))
        set(latchkey_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1))
        if let user = settings.user, !user.isEmpty {
            set(latchkey_curl_setopt_string(handle, CURLOPT_USERNAME, user))
            set(latchkey_curl_setopt_string(handle, CURLOPT_PASSWORD, settings.password ?? ""))
        }
        set(latchkey_curl_setopt_string(handle, CURLOPT_MAIL_FROM, "<\(from)>"))
        set(latchkey_curl_setopt_slist(handle, CURLOPT_MAIL_RCPT, list))
        set(latchkey_curl_setopt_long(handle, CURLOPT_UPLOAD, 1))
        set(latchkey_curl_setopt_offset_t(handle, CURLOPT_INFILESIZE_LARGE, curl_off_t(message.count)))
        set(latchkey_curl_setopt_read(handle, readMessage))
        set(latchkey_curl_setopt_pointer(handle, CURLOPT_READDATA, context))
        var transferCode = CURLE_OK
        withExtendedLifetime(source) {
            guard code == CURLE_OK else { return }
            transferCode = curl_easy_perform(handle)
        }
        var reply = 0
        _ = latchkey_curl_smtp_reply(handle, &reply)
        if code != CURLE_OK { throw error(code) }
        if transferCode != CURLE_OK {
            let e = error(transferCode)
            throw CurlError(e.code, reply > 0 ? "\(e.reason) (SMTP \(reply))" : e.reason)
        }
        return reply
    }
}

/// The message being uploaded; only touched by the transfer's own thread.
private final class Source: @unchecked Sendable {
    let bytes: [UInt8]
    var offset = 0
    init(_ bytes: [UInt8]) { self.bytes = bytes }
}

private let readMessage: latchkey_curl_read_fn = { buffer, size, count, context in
    guard let buffer, let context else { return 0 }
    let source = Unmanaged<Source>.fromOpaque(context).takeUnretainedValue()
    let n = min(size * count, source.bytes.count - source.offset)
    guard n > 0 else { return 0 }
    source.bytes.withUnsafeBufferPointer { b in
        UnsafeMutableRawPointer(buffer).copyMemory(from: b.baseAddress! + source.offset, byteCount: n)
    }
    source.offset += n
    return n
}
