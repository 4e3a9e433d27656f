import Crypto
import JSON

/// `PublicKeyCredentialRequestOptionsJSON` (WebAuthn L3 §5.5), as `navigator.credentials.get`
/// takes it after `PublicKeyCredential.parseRequestOptionsFromJSON`. Always names the rpId.
public struct RequestOptions: Sendable, Equatable {
    public let challenge: [UInt8]
    public let timeoutMilliseconds: Int
    public let rpId: String
    /// Empty: discoverable credentials (the client lets the user pick a passkey).
    public let allowCredentials: [CredentialDescriptor]
    public let userVerification: VerificationPolicy.UserVerification
    public let hints: [String]
    /// Client extension inputs (§9); nil: none, and no `extensions` member.
    public let extensions: JSONValue?

    public init(challenge: [UInt8], timeoutMilliseconds: Int, rpId: String, allowCredentials: [CredentialDescriptor],
                userVerification: VerificationPolicy.UserVerification, hints: [String], extensions: JSONValue? = nil) {
        self.challenge = challenge
        self.timeoutMilliseconds = timeoutMilliseconds
        self.rpId = rpId
        self.allowCredentials = allowCredentials
        self.userVerification = userVerification
        self.hints = hints
        self.extensions = extensions
    }

    /// The bare options object, members in the order of §5.5.
    public var json: JSONValue {
        var members: [(key: String, value: JSONValue)] = [
            ("challenge", .string(Base64URL.encode(challenge))),
            ("timeout", .number(Double(timeoutMilliseconds))),
            ("rpId", .string(rpId)),
            ("allowCredentials", .array(allowCredentials.map(\.json))),
            ("userVerification", .string(userVerification.rawValue)),
            ("hints", .array(hints.map { .string($0) })),
        ]
        if let extensions { members.append(("extensions", extensions)) }
        return .object(members)
    }
}
