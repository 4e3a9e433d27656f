import Foundation

/// Every failure the client reports. A refusal by the server carries the problem document's stable
/// `code` (docs/api.md: `challenge_invalid`, `step_up_required`, `rate_limited`, …) and its HTTP
/// status; failures that happen on the device have codes of their own (`transport`,
/// `unexpected_response`, `invalid_json`, `authenticator`, `unsupported`).
///
/// Equality compares `code` only, and `error == .stepUpRequired` compares with a code. `description` never holds tokens or key material.
public struct LatchkeyError: Error, Hashable, Sendable, CustomStringConvertible {
    public let code: Code
    /// Safe to show in logs: the server's `detail`, or what went wrong here.
    public let reason: String
    /// The HTTP status when the server answered; nil for local failures.
    public let status: Int?
    /// `Retry-After` seconds on `rate_limited`.
    public let retryAfter: Int?
    /// The whole problem document, when there was one.
    public let problem: LatchkeyJSON?

    public init(_ code: Code, _ reason: String, status: Int? = nil, retryAfter: Int? = nil, problem: LatchkeyJSON? = nil) {
        self.code = code
        self.reason = reason
        self.status = status
        self.retryAfter = retryAfter
        self.problem = problem
    }

    public static func == (a: LatchkeyError, b: LatchkeyError) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// Lets `error == .stepUpRequired` compare with a code.
    public static func == (a: LatchkeyError, b: Code) -> Bool { a.code == b }

    public var description: String {
        let where_ = status.map { " (HTTP \($0))" } ?? ""
        return "\(code.rawValue)\(where_): \(reason)"
    }

    /// A stable string code. New server codes arrive as values this client may not name yet; they
    /// compare and print like the named ones.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(stringLiteral value: String) { rawValue = value }
        public var description: String { rawValue }

        // The server's codes (docs/api.md).
        public static let invalidRequest: Code = "invalid_request"
        public static let challengeInvalid: Code = "challenge_invalid"
        public static let originNotAllowed: Code = "origin_not_allowed"
        public static let rpIdMismatch: Code = "rp_id_mismatch"
        public static let userPresenceRequired: Code = "user_presence_required"
        public static let userVerificationRequired: Code = "user_verification_required"
        public static let signatureInvalid: Code = "signature_invalid"
        public static let attestationInvalid: Code = "attestation_invalid"
        public static let algorithmUnsupported: Code = "algorithm_unsupported"
        public static let credentialUnknown: Code = "credential_unknown"
        public static let credentialExists: Code = "credential_exists"
        public static let signCountRegression: Code = "sign_count_regression"
        public static let actionMismatch: Code = "action_mismatch"
        public static let keyRevoked: Code = "key_revoked"
        public static let unauthorized: Code = "unauthorized"
        public static let forbidden: Code = "forbidden"
        public static let notFound: Code = "not_found"
        public static let conflict: Code = "conflict"
        public static let payloadTooLarge: Code = "payload_too_large"
        public static let rateLimited: Code = "rate_limited"
        public static let invalidGrant: Code = "invalid_grant"
        public static let stepUpRequired: Code = "step_up_required"
        public static let codeInvalid: Code = "code_invalid"
        public static let recoveryPending: Code = "recovery_pending"

        // Failures on this side.
        /// The request did not get an answer (no network, TLS, timeout).
        public static let transport: Code = "transport"
        /// The server answered something that is not what docs/api.md promises (no problem `code`, a
        /// missing member): a proxy in the way, or a server of another version.
        public static let unexpectedResponse: Code = "unexpected_response"
        /// Text that is not JSON, or JSON the server would refuse to hash (an action that is not a
        /// non-empty object, or too long).
        public static let invalidJSON: Code = "invalid_json"
        /// The platform authenticator, Secure Enclave or App Attest failed or was cancelled.
        public static let authenticator: Code = "authenticator"
        /// Not available on this device or OS (no Secure Enclave, App Attest unsupported).
        public static let unsupported: Code = "unsupported"
    }
}

extension LatchkeyError {
    /// The error an `application/problem+json` answer (or any non-2xx) stands for.
    static func fromResponse(_ response: HTTPResponse) -> LatchkeyError {
        let problem = try? LatchkeyJSON(parsing: response.body)
        let retry = response.header("retry-after").flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        if let problem, let code = problem["code"]?.stringValue {
            let detail = problem["detail"]?.stringValue ?? problem["title"]?.stringValue ?? code
            return LatchkeyError(Code(rawValue: code), detail, status: response.status, retryAfter: retry, problem: problem)
        }
        return LatchkeyError(.unexpectedResponse, "HTTP \(response.status) without a problem code", status: response.status,
                             retryAfter: retry, problem: problem)
    }

    static func unexpected(_ what: String) -> LatchkeyError { LatchkeyError(.unexpectedResponse, what) }
}
