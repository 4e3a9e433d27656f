import DeviceKeys
import HTTP
import JSON
import Storage
import WebAuthn

/// A refusal with one of SPEC's stable codes ("HTTP contract", Errors). The code is a closed,
/// typed set and each code's HTTP status is written once, in `Code.status`.
public struct ServiceError: Error, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable, CaseIterable {
        case invalidRequest = "invalid_request"
        case challengeInvalid = "challenge_invalid"
        case originNotAllowed = "origin_not_allowed"
        case rpIdMismatch = "rp_id_mismatch"
        case userPresenceRequired = "user_presence_required"
        case userVerificationRequired = "user_verification_required"
        case signatureInvalid = "signature_invalid"
        case attestationInvalid = "attestation_invalid"
        case algorithmUnsupported = "algorithm_unsupported"
        case credentialUnknown = "credential_unknown"
        case credentialExists = "credential_exists"
        case signCountRegression = "sign_count_regression"
        case actionMismatch = "action_mismatch"
        case keyRevoked = "key_revoked"
        case unauthorized
        case forbidden
        case notFound = "not_found"
        case conflict
        case payloadTooLarge = "payload_too_large"
        case unsupportedMediaType = "unsupported_media_type"
        case rateLimited = "rate_limited"
        case invalidGrant = "invalid_grant"
        case stepUpRequired = "step_up_required"
        case codeInvalid = "code_invalid"
        case recoveryPending = "recovery_pending"
        /// Revoking the account's last way in (SPEC "Assurance"): 409.
        case lastPasskey = "last_passkey"
        /// An admin change under `LATCHKEY_ADMIN_QUORUM` > 1 without an approved `Latchkey-Approval`
        /// for its exact action (SPEC "Quorum approvals"): 403.
        case approvalRequired = "approval_required"
        /// The database (or another dependency) failed: the only 5xx, never caused by input.
        case internalError = "internal_error"

        /// SPEC "Shapes and decisions": the HTTP status of each code, in one place.
        public var status: Int {
            switch self {
            case .unauthorized: 401
            case .forbidden, .stepUpRequired, .recoveryPending, .approvalRequired: 403
            case .notFound: 404
            case .conflict, .credentialExists, .lastPasskey: 409
            case .payloadTooLarge: 413
            case .unsupportedMediaType: 415
            case .rateLimited: 429
            case .internalError: 503
            case .invalidRequest, .challengeInvalid, .originNotAllowed, .rpIdMismatch, .userPresenceRequired,
                 .userVerificationRequired, .signatureInvalid, .attestationInvalid, .algorithmUnsupported, .credentialUnknown,
                 .signCountRegression, .actionMismatch, .keyRevoked, .invalidGrant, .codeInvalid: 400
            }
        }
    }

    public let code: Code
    public let detail: String
    public var headers: [(String, String)] = []
    /// Members a route adds to the problem document after SPEC's five.
    public var members: [(key: String, value: JSONValue)] = []
    /// What a service adds to the problem document, as a value the error edge renders
    /// (`ProblemAttachment.members`, beside the renderers).
    var attachment: ProblemAttachment? = nil
    /// A refusal at an OAuth endpoint, answered in OAuth's format instead of a problem document
    /// (`OAuthRefusal.response`); `code` is the nearest of SPEC's, for the status.
    var oauth: OAuthRefusal? = nil

    public init(_ code: Code, _ detail: String, headers: [(String, String)] = []) {
        self.code = code
        self.detail = detail
        self.headers = headers
    }

    init(oauth refusal: OAuthRefusal) {
        self.init(refusal.code, refusal.error.description)
        oauth = refusal
    }

    public var description: String { "\(code.rawValue): \(detail)" }
    public var status: Int { code.status }
    /// The problem document's `code`: SPEC's, where a 415 is `invalid_request` as the router answers it.
    var problemCode: String { code == .unsupportedMediaType ? Code.invalidRequest.rawValue : code.rawValue }

    public var response: Response {
        if let oauth { return oauth.response }
        let extra = (attachment?.members ?? []) + members
        guard !extra.isEmpty else { return Response.problem(status: status, code: problemCode, detail: detail, headers: headers) }
        let body = JSONValue.object([
            ("type", .string(Problem.typeBase + problemCode)), ("title", .string(Response.reasonPhrase(for: status))),
            ("status", .number(Double(status))), ("detail", .string(detail)), ("code", .string(problemCode)),
        ] + extra)
        return Response(status: status, headers: [("Content-Type", Problem.mediaType)] + headers, body: body.serialized())
    }

    static func invalid(_ detail: String) -> ServiceError { ServiceError(.invalidRequest, detail) }
    /// Its challenge (`WWW-Authenticate`) is added by the pipeline's `AuthChallenge` stage, which sees whether a token was sent.
    static let unauthorized = ServiceError(.unauthorized, "missing or invalid credentials")
    static func notFound(_ what: String) -> ServiceError { ServiceError(.notFound, "\(what) not found") }
    static let storageUnavailable = ServiceError(.internalError, "storage unavailable")
}

extension ServiceError.Code {
    /// Every code of the protocol core, written out: the core's codes are SPEC codes of the same
    /// name, so a code added to `CoreError` without a line here fails to compile.
    init(_ core: CoreError.Code) {
        self = switch core.kind {
        case .invalidRequest: .invalidRequest
        case .challengeInvalid: .challengeInvalid
        case .originNotAllowed: .originNotAllowed
        case .rpIdMismatch: .rpIdMismatch
        case .userPresenceRequired: .userPresenceRequired
        case .userVerificationRequired: .userVerificationRequired
        case .signatureInvalid: .signatureInvalid
        case .attestationInvalid: .attestationInvalid
        case .algorithmUnsupported: .algorithmUnsupported
        case .credentialUnknown: .credentialUnknown
        case .credentialExists: .credentialExists
        case .signCountRegression: .signCountRegression
        case .actionMismatch: .actionMismatch
        // Not a SPEC code of the HTTP contract (`latchkey mds check` reports it): a metadata
        // failure that reached a request would be a refusal of its input, as it always was.
        case .metadataInvalid: .invalidRequest
        }
    }
}

extension ServiceError {
    /// A refusal of the protocol core (`WebAuthnError`, `DeviceKeyError`: one type, `CoreError`).
    public init(_ error: CoreError) { self.init(Code(error.code), error.reason) }

    /// Storage failures: conflicts are the caller's to name (see `storage(_:conflict:)`); anything
    /// else is the database being unavailable (503), never a crash.
    init(_ error: StorageError) {
        switch error {
        case .conflict(.signCountRegression):
            self = ServiceError(.signCountRegression, "the sign count is not above the stored one: another use with it came first")
        case .conflict(.stepUpUsed):
            self = ServiceError(.stepUpRequired, "the step-up was already used, or the key that made it was revoked since: approve this change again")
        case .conflict(.lastWayIn): self = ServiceError(.lastPasskey, PasskeyService.lastWayInDetail)
        case .conflict: self = ServiceError(.conflict, "the change conflicts with stored data")
        case .notFound: self = ServiceError.notFound("record")
        case .unstorableInput: self = .invalid("a value contains a character that cannot be stored (NUL)")
        case .undecodable(let column): self = ServiceError(.internalError, "stored data could not be read (column \(column))")
        case .unavailable: self = .storageUnavailable
        }
    }
}

/// Runs a storage call; a database failure is a 503 `internal_error`, never a crash.
func storage<T>(_ body: () throws(StorageError) -> T) throws(ServiceError) -> T {
    do { return try body() } catch { throw ServiceError(error) }
}
