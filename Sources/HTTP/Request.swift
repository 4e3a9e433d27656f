/// An HTTP request as handed to a `Responder`: fully read, body bounded by the server's limit.
public struct Request: Sendable {
    /// Uppercase method, e.g. "GET".
    public var method: String
    /// The path, percent-decoded, without the query.
    public var path: String
    /// The path exactly as sent (still percent-encoded); the router splits this one, so that an
    /// encoded "/" (`%2F`) stays inside its segment.
    public var rawPath: String
    /// Decoded query pairs in the order sent; a name without "=" has the value "".
    public var query: [(String, String)]
    /// Header fields in the order received, names as sent.
    public var headers: [(String, String)]
    public var body: [UInt8]
    /// The peer's numeric IP address, when known.
    public var remoteAddress: String?

    /// Builds a request from a request target such as `/v1/passkeys/abc?x=1` (as on the wire).
    public init(method: String, target: String, headers: [(String, String)] = [], body: [UInt8] = [],
                remoteAddress: String? = nil) {
        let rawPath: Substring
        let query: [(String, String)]
        if let mark = target.firstIndex(of: "?") {
            rawPath = target[..<mark]
            query = PercentDecoding.queryPairs(target[target.index(after: mark)...])
        } else {
            rawPath = target[...]
            query = []
        }
        self.init(method: method, rawPath: String(rawPath), query: query, headers: headers, body: body,
                  remoteAddress: remoteAddress)
    }

    init(method: String, rawPath: String, query: [(String, String)], headers: [(String, String)],
         body: [UInt8], remoteAddress: String?) {
        self.method = asciiUppercased(method)
        self.rawPath = rawPath
        self.path = PercentDecoding.decode(rawPath[...], plusAsSpace: false)
        self.query = query
        self.headers = headers
        self.body = body
        self.remoteAddress = remoteAddress
    }

    /// The first header field with this name, compared case-insensitively.
    public func header(_ name: String) -> String? {
        headers.first { asciiCaseInsensitiveEquals($0.0, name) }?.1
    }

    /// The first query value with this name (names compare exactly).
    public func queryValue(_ name: String) -> String? {
        query.first { $0.0 == name }?.1
    }

    /// The Content-Type's media type, lowercased and without parameters ("application/json").
    public var mediaType: String? {
        guard let contentType = header("Content-Type") else { return nil }
        // Bytes, not Characters: the field is ASCII by grammar (RFC 9110 §8.3), its whitespace is
        // SP/HTAB (OWS), and a Character walk cost ~6 k instructions per request.
        let utf8 = contentType.utf8
        var start = utf8.startIndex
        var end = utf8.firstIndex(of: UInt8(ascii: ";")) ?? utf8.endIndex
        func isOWS(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        while start < end, isOWS(utf8[start]) { utf8.formIndex(after: &start) }
        while end > start, isOWS(utf8[utf8.index(before: end)]) { utf8.formIndex(before: &end) }
        guard start < end else { return nil }
        return String(decoding: utf8[start..<end].map(asciiLower), as: UTF8.self)
    }
}

func asciiUppercased(_ text: String) -> String {
    guard text.utf8.contains(where: { $0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z") }) else { return text }
    return String(decoding: text.utf8.map { $0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z") ? $0 & ~0x20 : $0 },
                  as: UTF8.self)
}

/// How a request's body is delimited (RFC 9112 §6.3), from its header fields.
enum Framing {
    case none
    case length(UInt64)
    case ambiguous
}

func framing(of headers: [(String, String)]) -> Framing {
    var length: UInt64?
    var chunked = false
    for (name, value) in headers {
        if asciiCaseInsensitiveEquals(name, "Content-Length") {
            // libmicrohttpd has already rejected a malformed value; one that overflows is huge.
            let parsed = UInt64(trimmingWhitespace(value[...])) ?? UInt64.max
            if let length, length != parsed { return .ambiguous }
            length = parsed
        } else if asciiCaseInsensitiveEquals(name, "Transfer-Encoding") {
            chunked = true
        }
    }
    if chunked { return length == nil ? .none : .ambiguous }
    return length.map(Framing.length) ?? .none
}
