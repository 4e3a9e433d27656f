/// Why a device key, signature or step-up input was refused. `code` is one of SPEC.md's stable
/// error codes; `reason` is safe to show a client and never echoes key material or signatures.
public struct DeviceKeyError: Error, Hashable, CustomStringConvertible, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        private init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let invalidRequest = Code("invalid_request")
        public static let challengeInvalid = Code("challenge_invalid")
        public static let signatureInvalid = Code("signature_invalid")
        public static let actionMismatch = Code("action_mismatch")
        public static let attestationInvalid = Code("attestation_invalid")
    }

    public let code: Code
    public let reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { "\(code.rawValue): \(reason)" }
    public static func == (l: DeviceKeyError, r: DeviceKeyError) -> Bool { l.code == r.code }
    public func hash(into h: inout Hasher) { h.combine(code) }

    static func invalid(_ reason: String) -> DeviceKeyError { DeviceKeyError(.invalidRequest, reason) }
    static func wrongSignature(_ reason: String) -> DeviceKeyError { DeviceKeyError(.signatureInvalid, reason) }
}
