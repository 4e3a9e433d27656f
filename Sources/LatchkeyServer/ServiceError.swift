import HTTP
import WebAuthn

/// A refusal with SPEC's stable code. The one table from codes to HTTP status lives here.
public struct ServiceError: Error, Sendable, CustomStringConvertible {
    public let code: String
    public let detail: String
    public var headers: [(String, String)] = []

    public init(_ code: String, _ detail: String, headers: [(String, String)] = []) {
        self.code = code
        self.detail = detail
        self.headers = headers
    }

    public init(_ error: WebAuthnError) { self.init(error.code.rawValue, error.reason) }

    public var description: String { "\(code): \(detail)" }

    /// SPEC "Shapes and decisions": status by code.
    public var status: Int {
        switch code {
        case "unauthorized": 401
        case "forbidden": 403
        case "not_found": 404
        case "conflict", "credential_exists": 409
        case "payload_too_large": 413
        case "unsupported_media_type": 415
        case "rate_limited": 429
        case "internal_error": 503
        default: 400
        }
    }

    public var response: Response { Response.problem(status: status, code: code, detail: detail, headers: headers) }

    static func invalid(_ detail: String) -> ServiceError { ServiceError("invalid_request", detail) }
    static let unauthorized = ServiceError("unauthorized", "missing or invalid credentials", headers: [("WWW-Authenticate", "Bearer")])
    static func notFound(_ what: String) -> ServiceError { ServiceError("not_found", "\(what) not found") }
}
