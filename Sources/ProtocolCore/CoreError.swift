/// Why the protocol core (WebAuthn, DeviceKeys) refused an input: one shape for both modules, which
/// name it `WebAuthnError` and `DeviceKeyError`. `code` is one of the API's stable problem codes (docs/api.md);
/// `reason` is safe to show a client and never contains secrets, key material or raw input.
/// Equality compares `code` only.
public struct CoreError: Error, Hashable, CustomStringConvertible, Sendable {
    /// A library client sees a struct of named codes (a new code does not break its `switch`);
    /// inside the package `kind` is the closed set, so the server's mapping to HTTP is an
    /// exhaustive `switch` that a new code without a mapping fails to compile.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        package enum Kind: String, CaseIterable, Sendable {
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
            case metadataInvalid = "metadata_invalid"
        }

        package let kind: Kind
        package init(_ kind: Kind) { self.kind = kind }
        public var rawValue: String { kind.rawValue }
        public var description: String { rawValue }

        public static let invalidRequest = Code(.invalidRequest)
        public static let challengeInvalid = Code(.challengeInvalid)
        public static let originNotAllowed = Code(.originNotAllowed)
        public static let rpIdMismatch = Code(.rpIdMismatch)
        public static let userPresenceRequired = Code(.userPresenceRequired)
        public static let userVerificationRequired = Code(.userVerificationRequired)
        public static let signatureInvalid = Code(.signatureInvalid)
        public static let attestationInvalid = Code(.attestationInvalid)
        public static let algorithmUnsupported = Code(.algorithmUnsupported)
        public static let credentialUnknown = Code(.credentialUnknown)
        public static let credentialExists = Code(.credentialExists)
        public static let signCountRegression = Code(.signCountRegression)
        /// A step-up's claimed action is not the one its challenge binds (DeviceKeys).
        public static let actionMismatch = Code(.actionMismatch)
        /// A metadata BLOB (FIDO MDS3) that cannot be trusted: never a ceremony's answer (a
        /// registration the metadata refuses is `attestation_invalid`), but `latchkey mds check`'s.
        public static let metadataInvalid = Code(.metadataInvalid)
    }

    public let code: Code
    public let reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { "\(code.rawValue): \(reason)" }
    public static func == (l: CoreError, r: CoreError) -> Bool { l.code == r.code }
    public func hash(into h: inout Hasher) { h.combine(code) }

    package static func invalid(_ reason: String) -> CoreError { CoreError(.invalidRequest, reason) }
}
