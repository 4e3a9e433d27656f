/// Why a ceremony was refused. `code` is one of SPEC.md's stable error codes; `reason` is safe to
/// show a client and never contains secrets or raw input.
public struct WebAuthnError: Error, Hashable, CustomStringConvertible, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        private init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let invalidRequest = Code("invalid_request")
        public static let challengeInvalid = Code("challenge_invalid")
        public static let originNotAllowed = Code("origin_not_allowed")
        public static let rpIdMismatch = Code("rp_id_mismatch")
        public static let userPresenceRequired = Code("user_presence_required")
        public static let userVerificationRequired = Code("user_verification_required")
        public static let signatureInvalid = Code("signature_invalid")
        public static let attestationInvalid = Code("attestation_invalid")
        public static let algorithmUnsupported = Code("algorithm_unsupported")
        public static let credentialUnknown = Code("credential_unknown")
        public static let credentialExists = Code("credential_exists")
        public static let signCountRegression = Code("sign_count_regression")
        /// A metadata BLOB (FIDO MDS3) that cannot be trusted: never a ceremony's answer (a
        /// registration the metadata refuses is `attestation_invalid`), but `latchkey mds check`'s.
        public static let metadataInvalid = Code("metadata_invalid")
    }

    public let code: Code
    public let reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { "\(code.rawValue): \(reason)" }
    public static func == (l: WebAuthnError, r: WebAuthnError) -> Bool { l.code == r.code }
    public func hash(into h: inout Hasher) { h.combine(code) }

    static func invalid(_ reason: String) -> WebAuthnError { WebAuthnError(.invalidRequest, reason) }
    static func attestation(_ reason: String) -> WebAuthnError { WebAuthnError(.attestationInvalid, reason) }
    static func metadata(_ reason: String) -> WebAuthnError { WebAuthnError(.metadataInvalid, reason) }
}
