/// An HTTP response. `Content-Length` is computed by the transport; do not set it.
public struct Response: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]
    /// A body written while it is sent, in place of `body` (an export): see `BodyStream`.
    public var stream: BodyStream? = nil

    public init(status: Int, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first header field with this name, compared case-insensitively.
    public func header(_ name: String) -> String? {
        headers.first { asciiCaseInsensitiveEquals($0.0, name) }?.1
    }

    /// `application/json` with already-encoded bytes.
    public static func json(status: Int = 200, bytes: [UInt8], headers: [(String, String)] = []) -> Response {
        Response(status: status, headers: [("Content-Type", "application/json")] + headers, body: bytes)
    }

    /// A text body, e.g. Prometheus metrics (`text/plain; version=0.0.4`).
    public static func text(status: Int = 200, _ text: String, contentType: String = "text/plain; charset=utf-8",
                            headers: [(String, String)] = []) -> Response {
        Response(status: status, headers: [("Content-Type", contentType)] + headers, body: Array(text.utf8))
    }

    /// No body, e.g. 204 after a DELETE.
    public static func empty(status: Int = 204, headers: [(String, String)] = []) -> Response {
        Response(status: status, headers: headers)
    }

    /// An RFC 9457 problem document with Latchkey's stable `code` member:
    /// `{"type":"https://latchkey.dev/problems/<code>","title":…,"status":…,"detail":…,"code":…}`.
    /// `title` defaults to the status's reason phrase. Extra headers (e.g. `Retry-After`) may be added.
    public static func problem(status: Int, code: String, title: String? = nil, detail: String,
                               headers: [(String, String)] = []) -> Response {
        var json = "{\"type\":"
        json += jsonString(Problem.typeBase + code)
        json += ",\"title\":" + jsonString(title ?? reasonPhrase(for: status))
        json += ",\"status\":\(status)"
        json += ",\"detail\":" + jsonString(detail)
        json += ",\"code\":" + jsonString(code)
        json += "}"
        return Response(status: status, headers: [("Content-Type", Problem.mediaType)] + headers,
                        body: Array(json.utf8))
    }
}

/// Constants of Latchkey's problem documents.
public enum Problem {
    public static let mediaType = "application/problem+json"
    /// A problem's `type` is this prefix followed by its `code`.
    public static let typeBase = "https://latchkey.dev/problems/"
}

extension Response {
/// The standard reason phrase of a status code ("Not Found"), or "Error"/"OK" for unknown ones.
public static func reasonPhrase(for status: Int) -> String {
    switch status {
    case 200: "OK"
    case 201: "Created"
    case 202: "Accepted"
    case 204: "No Content"
    case 301: "Moved Permanently"
    case 302: "Found"
    case 304: "Not Modified"
    case 400: "Bad Request"
    case 401: "Unauthorized"
    case 403: "Forbidden"
    case 404: "Not Found"
    case 405: "Method Not Allowed"
    case 406: "Not Acceptable"
    case 408: "Request Timeout"
    case 409: "Conflict"
    case 410: "Gone"
    case 411: "Length Required"
    case 413: "Content Too Large"
    case 414: "URI Too Long"
    case 415: "Unsupported Media Type"
    case 422: "Unprocessable Content"
    case 429: "Too Many Requests"
    case 431: "Request Header Fields Too Large"
    case 500: "Internal Server Error"
    case 501: "Not Implemented"
    case 502: "Bad Gateway"
    case 503: "Service Unavailable"
    case 504: "Gateway Timeout"
    default: status < 400 ? "OK" : "Error"
    }
}
}

/// Encodes a string as a JSON string literal (RFC 8259 §7).
func jsonString(_ text: String) -> String {
    var out = "\""
    out.reserveCapacity(text.utf8.count + 2)
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case "\u{08}": out += "\\b"
        case "\u{0C}": out += "\\f"
        case let control where control.value < 0x20:
            let hex = String(control.value, radix: 16)
            out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        default:
            out.unicodeScalars.append(scalar)
        }
    }
    out += "\""
    return out
}

/// libmicrohttpd computes the framing headers itself; header text with CR, LF or NUL is refused
/// (response splitting).
func isSendable(name: String, value: String) -> Bool {
    if name.isEmpty || asciiCaseInsensitiveEquals(name, "Content-Length")
        || asciiCaseInsensitiveEquals(name, "Transfer-Encoding") {
        return false
    }
    return !contains(name, where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: " ") })
        && !contains(value, where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 })
}

/// Over the contiguous UTF-8 (a short string's `utf8` view is walked through its iterator, several
/// times slower; every response header passes here).
@inline(__always)
func contains(_ text: String, where predicate: (UInt8) -> Bool) -> Bool {
    var text = text
    return text.withUTF8 { $0.contains(where: predicate) }
}
