import Crypto
import JSON

/// The answer to `POST /v1/step-up/challenges`: the bytes to sign for one action.
public struct StepUpOptions: Sendable, Equatable {
    /// SHA-256 of `challenge`: how the client names the challenge when it answers.
    public let challengeId: [UInt8]
    /// `StepUpChallenge` bytes.
    public let challenge: [UInt8]
    /// Seconds since 1970.
    public let expiresAt: Int64
    /// SHA-256 of the action's RFC 8785 form: what the client shows it approved.
    public let actionHash: [UInt8]

    public init(challengeId: [UInt8], challenge: [UInt8], expiresAt: Int64, actionHash: [UInt8]) {
        self.challengeId = challengeId
        self.challenge = challenge
        self.expiresAt = expiresAt
        self.actionHash = actionHash
    }

    /// `{"challengeId","challenge","expiresAt","actionHash"}`, then `publicKey` when given: for the
    /// passkey method, the `PublicKeyCredentialRequestOptionsJSON` over these challenge bytes
    /// (WebAuthn's `AuthenticationCeremony`, which this module does not depend on).
    public func json(publicKey: JSONValue? = nil) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = [
            ("challengeId", .string(Base64URL.encode(challengeId))), ("challenge", .string(Base64URL.encode(challenge))),
            ("expiresAt", .string(rfc3339(expiresAt))), ("actionHash", .string(Base64URL.encode(actionHash))),
        ]
        if let publicKey { members.append(("publicKey", publicKey)) }
        return .object(members)
    }
}
