import Crypto
import JSON

/// What the server keeps between `DeviceKeyEnrolmentCeremony.begin` and `finish`.
public struct DeviceKeyEnrolmentState: Sendable, Equatable {
    /// The exact `EnrolmentChallenge` bytes issued: what the proof of possession signs.
    public let challenge: [UInt8]
    public let userId: String

    public init(challenge: [UInt8], userId: String) {
        self.challenge = challenge
        self.userId = userId
    }

    static let ceremony = "device-key-enrolment"

    /// The one storage encoding (canonical JSON, see `CeremonyStateCoding`).
    public func encoded() -> [UInt8] {
        CeremonyStateCoding.encode(Self.ceremony, [("challenge", .string(Base64URL.encode(challenge))), ("userId", .string(userId))])
    }

    /// Exactly the bytes `encoded()` wrote, holding an enrolment challenge made for `userId`;
    /// anything else is `challenge_invalid`.
    public init(decoding bytes: [UInt8]) throws(DeviceKeyError) {
        let state = try CeremonyStateCoding(deviceKeyState: bytes, ceremony: Self.ceremony)
        self.init(challenge: try state.bytes("challenge"), userId: try state.string("userId"))
        let prefix = EnrolmentChallenge.magic + [EnrolmentChallenge.version]
        try CeremonyStateCoding.require(
            challenge.count == EnrolmentChallenge.length && Array(challenge.prefix(prefix.count)) == prefix
                && Array(challenge.suffix(32)) == Digest.sha256(Array(userId.utf8)))
        try CeremonyStateCoding.requireCanonical(bytes, encoded())
    }
}
