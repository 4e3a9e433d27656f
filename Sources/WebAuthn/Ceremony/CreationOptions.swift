import Crypto
import JSON

/// `PublicKeyCredentialCreationOptionsJSON` (WebAuthn L3 §5.4), as `navigator.credentials.create`
/// takes it after `PublicKeyCredential.parseCreationOptionsFromJSON`. Latchkey registers
/// discoverable credentials only (SPEC), so `residentKey` is always `required`.
public struct CreationOptions: Sendable, Equatable {
    public let rp: RelyingParty
    public let user: UserEntity
    public let challenge: [UInt8]
    /// `pubKeyCredParams`, in order of preference.
    public let algorithms: [COSEAlgorithm]
    public let timeoutMilliseconds: Int
    public let excludeCredentials: [CredentialDescriptor]
    public let userVerification: VerificationPolicy.UserVerification
    public let attestation: AttestationConveyance
    public let hints: [String]
    /// `authenticatorSelection.authenticatorAttachment`, when the request names one.
    public let authenticatorAttachment: String?
    /// Client extension inputs (§9): `credProps` always, plus whatever the caller adds.
    public let extensions: JSONValue

    public static let defaultExtensions: JSONValue = .object([("credProps", true)])

    public init(rp: RelyingParty, user: UserEntity, challenge: [UInt8], algorithms: [COSEAlgorithm], timeoutMilliseconds: Int,
                excludeCredentials: [CredentialDescriptor], userVerification: VerificationPolicy.UserVerification,
                attestation: AttestationConveyance, hints: [String], authenticatorAttachment: String? = nil,
                extensions: JSONValue = CreationOptions.defaultExtensions) {
        self.rp = rp
        self.user = user
        self.challenge = challenge
        self.algorithms = algorithms
        self.timeoutMilliseconds = timeoutMilliseconds
        self.excludeCredentials = excludeCredentials
        self.userVerification = userVerification
        self.attestation = attestation
        self.hints = hints
        self.authenticatorAttachment = authenticatorAttachment
        self.extensions = extensions
    }

    /// The bare options object, members in the order of §5.4.
    public var json: JSONValue {
        .object([
            ("rp", .object([("id", .string(rp.id)), ("name", .string(rp.name))])),
            ("user", .object([("id", .string(Base64URL.encode(user.id))), ("name", .string(user.name)),
                              ("displayName", .string(user.displayName))])),
            ("challenge", .string(Base64URL.encode(challenge))),
            ("pubKeyCredParams", .array(algorithms.map { .object([("type", "public-key"), ("alg", .number(Double($0.rawValue)))]) })),
            ("timeout", .number(Double(timeoutMilliseconds))),
            ("excludeCredentials", .array(excludeCredentials.map(\.json))),
            ("authenticatorSelection", .object((authenticatorAttachment.map { [("authenticatorAttachment", JSONValue.string($0))] } ?? [])
                + [("residentKey", "required"), ("requireResidentKey", true), ("userVerification", .string(userVerification.rawValue))])),
            ("attestation", .string(attestation.rawValue)),
            ("hints", .array(hints.map { .string($0) })),
            // credProps: the client reports whether the credential is discoverable (§10.1.3).
            ("extensions", extensions),
        ])
    }
}
