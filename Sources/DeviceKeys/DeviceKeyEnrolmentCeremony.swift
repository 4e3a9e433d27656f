import Crypto

/// Enrolling a device key, without state or I/O: `begin` issues an `EnrolmentChallenge` and the
/// state to keep; `finish` checks the new key's proof of possession against that state.
public struct DeviceKeyEnrolmentCeremony: Sendable {
    public let ttlSeconds: Int
    public let environment: DeviceKeyEnvironment

    public init(ttlSeconds: Int, environment: DeviceKeyEnvironment = .system) {
        self.ttlSeconds = ttlSeconds
        self.environment = environment
    }

    public func begin(userId: String) -> (options: EnrolmentOptions, state: DeviceKeyEnrolmentState) {
        let challenge = EnrolmentChallenge(userId: userId, random: environment.random).bytes
        let options = EnrolmentOptions(challengeId: Digest.sha256(challenge), challenge: challenge,
                                       expiresAt: environment.now() + Int64(ttlSeconds))
        return (options, DeviceKeyEnrolmentState(challenge: challenge, userId: userId))
    }

    /// Proof of possession: a DER ECDSA-SHA256 signature by `key` over the state's exact challenge
    /// bytes (`DeviceKeyVerifier.verify`); anything else is `signature_invalid`.
    public func finish(signature: DERSignature, key: DevicePublicKey, state: DeviceKeyEnrolmentState) throws(DeviceKeyError) {
        try DeviceKeyVerifier.verify(signature, by: key, over: state.challenge)
    }
}
