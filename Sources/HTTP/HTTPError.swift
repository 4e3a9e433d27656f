/// The one error type of the HTTP module: a stable `code` plus a `reason` safe to log.
public struct HTTPError: Error, Hashable, CustomStringConvertible, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: String, Hashable, Sendable {
            case invalidAddress = "invalid_address"
            case startFailed = "start_failed"
            case connectionFailed = "connection_failed"
            case connectionClosed = "connection_closed"
            case malformedResponse = "malformed_response"
            case timedOut = "timed_out"
            case socketError = "socket_error"
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// A host that is not a numeric IPv4/IPv6 address (server) or cannot be resolved (client).
        public static let invalidAddress = Code(.invalidAddress)
        /// libmicrohttpd refused to start (port in use, no permission, bad option).
        public static let startFailed = Code(.startFailed)
        /// The client could not connect.
        public static let connectionFailed = Code(.connectionFailed)
        /// The peer closed the connection before a complete response arrived.
        public static let connectionClosed = Code(.connectionClosed)
        /// The bytes received are not an HTTP/1.1 response.
        public static let malformedResponse = Code(.malformedResponse)
        /// A socket read or write exceeded the client's timeout.
        public static let timedOut = Code(.timedOut)
        /// Any other socket failure.
        public static let socketError = Code(.socketError)

        public var description: String { value.rawValue }
    }

    public let code: Code
    public let reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public static func == (lhs: HTTPError, rhs: HTTPError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
    public var description: String { "\(code): \(reason)" }
}
