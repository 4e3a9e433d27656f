import Crypto

/// Action-bound step-up, without state or I/O: `begin` issues a `StepUpChallenge` for one action
/// and the state to keep; `checkClaim` and `finish` check the answer against that state. The
/// passkey method's assertion is verified by WebAuthn's `AuthenticationCeremony` over
/// `state.challenge`, with user verification required and only the bound passkeys allowed.
public struct StepUpCeremony: Sendable {
    public let ttlSeconds: Int
    public let environment: DeviceKeyEnvironment

    public init(ttlSeconds: Int, environment: DeviceKeyEnvironment = .system) {
        self.ttlSeconds = ttlSeconds
        self.environment = environment
    }

    /// `keyBinding`: a device key's SPKI DER, or for passkeys the canonical JSON naming the
    /// credentials offered (see `StepUpChallenge`). `keyId`: the device key's id.
    /// `display`: what the person is shown, which makes the challenge version 2 and is sealed in the state.
    /// `breakGlass`: the action approves a break-glass approval, which its receipt will say.
    public func begin(method: StepUpChallenge.Method, userId: String, keyBinding: [UInt8], keyId: String?,
                      display: StepUpDisplay? = nil, breakGlass: Bool = false, action: StepUpAction) -> (options: StepUpOptions, state: StepUpState) {
        let challenge = StepUpChallenge(method: method, userId: userId, keyBinding: keyBinding, display: display, action: action,
                                        random: environment.random).bytes
        let options = StepUpOptions(challengeId: Digest.sha256(challenge), challenge: challenge,
                                    expiresAt: environment.now() + Int64(ttlSeconds), actionHash: action.hash)
        let state = StepUpState(method: method, challenge: challenge, userId: userId,
                                action: String(decoding: action.canonical, as: UTF8.self), actionHash: action.hash,
                                keyBinding: keyBinding, keyId: keyId, display: display, breakGlass: breakGlass)
        return (options, state)
    }

    /// `claimed`, the action the client says it approved, when it sends one, must be the bound
    /// action (same RFC 8785 hash); else `action_mismatch`.
    public func checkClaim(_ claimed: StepUpAction?, state: StepUpState) throws(DeviceKeyError) {
        guard let claimed else { return }
        guard constantTimeEquals(claimed.hash, state.actionHash) else {
            throw DeviceKeyError(.actionMismatch, "the challenge was issued for another action")
        }
    }

    /// The device-key method: a DER ECDSA-SHA256 signature by `key` over the state's exact
    /// challenge bytes. A passkey challenge, or a key other than the bound one, is
    /// `challenge_invalid`; a wrong signature `signature_invalid`.
    public func finish(signature: DERSignature, key: DevicePublicKey, state: StepUpState) throws(DeviceKeyError) {
        guard state.method == .deviceKey else {
            throw DeviceKeyError(.challengeInvalid, "this challenge is for a passkey, not a device key")
        }
        guard constantTimeEquals(key.spkiDER, state.keyBinding) else {
            throw DeviceKeyError(.challengeInvalid, "the challenge was issued for another device key")
        }
        try DeviceKeyVerifier.verify(signature, by: key, over: state.challenge)
    }
}
