import Glibc

/// A response read by `HTTPClient`.
public struct ClientResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]

    /// The first header field with this name, compared case-insensitively.
    public func header(_ name: String) -> String? {
        headers.first { asciiCaseInsensitiveEquals($0.0, name) }?.1
    }

    /// The body decoded as UTF-8.
    public var text: String { String(decoding: body, as: UTF8.self) }
}

/// A small blocking HTTP/1.1 client over one keep-alive TCP connection (plain POSIX sockets), for
/// tests and the load benchmark. Understands Content-Length and chunked responses. Not
/// thread-safe: use one client per thread.
public final class HTTPClient {
    public let host: String
    public let port: Int
    private let timeoutSeconds: Int
    private var socket: Int32 = -1
    private var buffer: [UInt8] = []
    private var chunk = [UInt8](repeating: 0, count: 65536)
    /// Connections opened so far (a reused connection does not count again).
    public private(set) var connectionsOpened = 0

    public init(host: String, port: Int, timeoutSeconds: Int = 30) {
        self.host = host
        self.port = port
        self.timeoutSeconds = timeoutSeconds
    }

    deinit { close() }

    /// Closes the connection; the next `send` opens a new one.
    public func close() {
        if socket >= 0 { _ = Glibc.close(socket) }
        socket = -1
        buffer = []
    }

    /// Sends one request and reads its response. `Host` and `Content-Length` are added. When a
    /// reused connection turns out to have been closed by the server before any response byte
    /// arrived, the request is sent once more on a new connection.
    public func send(method: String, path: String, headers: [(String, String)] = [],
                     body: [UInt8] = []) throws(HTTPError) -> ClientResponse {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if !body.isEmpty || ["POST", "PUT", "PATCH"].contains(method) {
            head += "Content-Length: \(body.count)\r\n"
        }
        head += "\r\n"
        let request = Array(head.utf8) + body

        let reused = socket >= 0
        if !reused { try connect() }
        do {
            return try exchange(request, isHead: method == "HEAD")
        } catch where reused && error.code == .connectionClosed && buffer.isEmpty {
            // A kept-alive connection the server had already closed: try once on a new one.
            close()
        } catch {
            close()
            throw error
        }
        do {
            try connect()
            return try exchange(request, isHead: method == "HEAD")
        } catch {
            close()
            throw error
        }
    }

    private func exchange(_ request: [UInt8], isHead: Bool) throws(HTTPError) -> ClientResponse {
        do {
            try writeAll(request)
        } catch where error.code == .connectionClosed {
            // The server may have answered early (e.g. 413 before reading the body) and closed:
            // the answer is still worth reading.
        }
        return try readResponse(isHead: isHead)
    }

    // MARK: - Socket

    private func connect() throws(HTTPError) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let list else {
            throw HTTPError(.invalidAddress, "cannot resolve \(host)")
        }
        defer { freeaddrinfo(list) }
        var cursor: UnsafeMutablePointer<addrinfo>? = list
        var lastError: Int32 = 0
        while let info = cursor {
            cursor = info.pointee.ai_next
            let fd = Glibc.socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
            if fd < 0 { lastError = errno; continue }
            if Glibc.connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) != 0 {
                lastError = errno
                _ = Glibc.close(fd)
                continue
            }
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
            _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            socket = fd
            buffer = []
            connectionsOpened += 1
            return
        }
        throw HTTPError(.connectionFailed, "connect to \(host):\(port): \(errorText(lastError))")
    }

    private func writeAll(_ bytes: [UInt8]) throws(HTTPError) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { raw in
                Glibc.send(socket, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if written < 0 {
                let code = errno
                if code == EINTR { continue }
                if code == EPIPE || code == ECONNRESET {
                    throw HTTPError(.connectionClosed, "write: \(errorText(code))")
                }
                if code == EAGAIN || code == EWOULDBLOCK { throw HTTPError(.timedOut, "write timed out") }
                throw HTTPError(.socketError, "write: \(errorText(code))")
            }
            offset += written
        }
    }

    /// Reads more bytes into `buffer`; returns false at end of stream.
    private func fill() throws(HTTPError) -> Bool {
        while true {
            // One receive buffer per client, reused: zeroing 64 KiB per read showed up in load tests.
            let count = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                buffer.append(contentsOf: chunk[..<count])
                return true
            }
            if count == 0 { return false }
            let code = errno
            if code == EINTR { continue }
            if code == ECONNRESET { return false }
            if code == EAGAIN || code == EWOULDBLOCK { throw HTTPError(.timedOut, "read timed out") }
            throw HTTPError(.socketError, "read: \(errorText(code))")
        }
    }

    // MARK: - Parsing

    private func readResponse(isHead: Bool) throws(HTTPError) -> ClientResponse {
        while true {
            let headEnd = try readHead()
            // The head is parsed as bytes (RFC 9112 §2.2: CRLF-delimited lines of ASCII); only the
            // header names and values become strings.
            let head = try Self.parseHead(buffer[..<headEnd])
            buffer.removeSubrange(..<(headEnd + 4))
            let (status, headers) = (head.status, head.headers)
            if (100...199).contains(status) { continue }  // interim response, e.g. 100 Continue

            let response = ClientResponse(status: status, headers: headers, body: [])
            var body: [UInt8] = []
            var mustClose = hasToken(response.header("Connection"), "close")
                || (head.isHTTP10 && !hasToken(response.header("Connection"), "keep-alive"))
            if isHead || status == 204 || status == 304 {
                // no body
            } else if hasToken(response.header("Transfer-Encoding"), "chunked") {
                body = try readChunked()
            } else if let lengthText = response.header("Content-Length") {
                guard let length = Int(lengthText), length >= 0 else {
                    throw HTTPError(.malformedResponse, "bad Content-Length")
                }
                while buffer.count < length {
                    if try !fill() { throw HTTPError(.connectionClosed, "body cut short") }
                }
                body = Array(buffer[..<length])
                buffer.removeSubrange(..<length)
            } else {
                while try fill() {}
                body = buffer
                buffer = []
                mustClose = true
            }
            if mustClose { close() }
            return ClientResponse(status: status, headers: headers, body: body)
        }
    }

    /// The status line and header fields of a response head (without its final CRLF CRLF).
    static func parseHead(_ head: ArraySlice<UInt8>) throws(HTTPError) -> (status: Int, isHTTP10: Bool, headers: [(String, String)]) {
        var lines: [Range<Int>] = []
        var start = head.startIndex, index = head.startIndex
        while index < head.endIndex {
            if head[index] == 13, index + 1 < head.endIndex, head[index + 1] == 10 {
                lines.append(start..<index)
                index += 2
                start = index
            } else {
                index += 1
            }
        }
        lines.append(start..<head.endIndex)
        // "HTTP/1.x SP 3DIGIT [SP reason]"
        let statusLine = head[lines[0]]
        let version = Array("HTTP/1.".utf8)
        guard statusLine.count >= 12, statusLine.prefix(7).elementsEqual(version), statusLine[statusLine.startIndex + 8] == 0x20 else {
            throw HTTPError(.malformedResponse, "bad status line")
        }
        let digits = statusLine[(statusLine.startIndex + 9)..<(statusLine.startIndex + 12)]
        guard digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), statusLine.count == 12 || statusLine[statusLine.startIndex + 12] == 0x20 else {
            throw HTTPError(.malformedResponse, "bad status line")
        }
        let status = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        guard (100...999).contains(status) else { throw HTTPError(.malformedResponse, "bad status line") }
        var headers: [(String, String)] = []
        headers.reserveCapacity(lines.count - 1)
        for range in lines.dropFirst() where !range.isEmpty {
            let line = head[range]
            guard let colon = line.firstIndex(of: 0x3A) else { throw HTTPError(.malformedResponse, "bad header line") }
            var valueStart = colon + 1, valueEnd = line.endIndex
            while valueStart < valueEnd, head[valueStart] == 0x20 || head[valueStart] == 0x09 { valueStart += 1 }
            while valueEnd > valueStart, head[valueEnd - 1] == 0x20 || head[valueEnd - 1] == 0x09 { valueEnd -= 1 }
            headers.append((String(decoding: line[..<colon], as: UTF8.self), String(decoding: head[valueStart..<valueEnd], as: UTF8.self)))
        }
        return (status, statusLine[statusLine.startIndex + 7] == 0x30, headers)
    }

    /// Index of the "\r\n\r\n" that ends the head, reading as needed.
    private func readHead() throws(HTTPError) -> Int {
        var searchFrom = 0
        while true {
            if buffer.count >= 4 {
                var index = searchFrom
                while index + 3 < buffer.count {
                    if buffer[index] == 13 && buffer[index + 1] == 10 && buffer[index + 2] == 13 && buffer[index + 3] == 10 {
                        return index
                    }
                    index += 1
                }
                searchFrom = max(0, buffer.count - 3)
            }
            if buffer.count > 1 << 20 { throw HTTPError(.malformedResponse, "response head too large") }
            if try !fill() {
                throw HTTPError(.connectionClosed, buffer.isEmpty ? "connection closed by server" : "head cut short")
            }
        }
    }

    private func readLine() throws(HTTPError) -> String {
        while true {
            if let index = buffer.indices.dropLast().first(where: { buffer[$0] == 13 && buffer[$0 + 1] == 10 }) {
                let line = String(decoding: buffer[..<index], as: UTF8.self)
                buffer.removeSubrange(..<(index + 2))
                return line
            }
            if buffer.count > 1 << 16 { throw HTTPError(.malformedResponse, "chunk line too long") }
            if try !fill() { throw HTTPError(.connectionClosed, "chunked body cut short") }
        }
    }

    private func readChunked() throws(HTTPError) -> [UInt8] {
        var body: [UInt8] = []
        while true {
            let sizeLine = try readLine()
            let sizeText = sizeLine.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            guard let size = Int(trimmingWhitespace(sizeText), radix: 16), size >= 0 else {
                throw HTTPError(.malformedResponse, "bad chunk size")
            }
            if size == 0 {
                while try !readLine().isEmpty {}  // trailers
                return body
            }
            while buffer.count < size + 2 {
                if try !fill() { throw HTTPError(.connectionClosed, "chunk cut short") }
            }
            body.append(contentsOf: buffer[..<size])
            guard buffer[size] == 13, buffer[size + 1] == 10 else {
                throw HTTPError(.malformedResponse, "chunk not followed by CRLF")
            }
            buffer.removeSubrange(..<(size + 2))
        }
    }
}

private func hasToken(_ header: String?, _ token: String) -> Bool {
    guard let header else { return false }
    return header.split(separator: ",").contains { asciiCaseInsensitiveEquals(String(trimmingWhitespace($0)), token) }
}

private func errorText(_ code: Int32) -> String {
    String(cString: strerror(code))
}
