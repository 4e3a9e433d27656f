import Crypto
import JSON

/// The answer to `POST /v1/device-keys/challenges`: the bytes a new device key signs as proof of
/// possession (an Android app also passes them to `setAttestationChallenge`).
public struct EnrolmentOptions: Sendable, Equatable {
    /// SHA-256 of `challenge`: how the client names the challenge when it enrols.
    public let challengeId: [UInt8]
    /// `EnrolmentChallenge` bytes.
    public let challenge: [UInt8]
    /// Seconds since 1970.
    public let expiresAt: Int64

    public init(challengeId: [UInt8], challenge: [UInt8], expiresAt: Int64) {
        self.challengeId = challengeId
        self.challenge = challenge
        self.expiresAt = expiresAt
    }

    /// `{"challengeId","challenge","expiresAt"}`, binary as base64url, time as RFC 3339 UTC.
    public var json: JSONValue {
        .object([("challengeId", .string(Base64URL.encode(challengeId))), ("challenge", .string(Base64URL.encode(challenge))),
                 ("expiresAt", .string(rfc3339(expiresAt)))])
    }
}
