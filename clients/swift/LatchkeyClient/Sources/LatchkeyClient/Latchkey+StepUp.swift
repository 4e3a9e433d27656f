import Foundation

/// Runs one passkey assertion for the given options (user verification required for step-up):
/// on iOS `PasskeyAuthorization.assert(_:)`, in tests a software authenticator.
public typealias PasskeyAssertionProvider = @Sendable (AuthenticationOptions) async throws -> AssertionCredential

/// Step-up (docs/step-up.md): a one-time challenge bound to the user, the approving
/// key and the action's hash; the key approves it; the answer is a short-lived token scoped to that
/// action. Every challenge the client receives is checked against the hash of the action it asked
/// for, so a server (or anything in between) that binds another action is caught on the device.
extension Latchkey {
    /// A challenge for a device key (`keyId` from enrolment).
    public func stepUpChallenge(action: StepUpAction, keyId: String, accessToken: String) async throws(LatchkeyError) -> StepUpChallenge {
        try await challenge(["keyId": .string(keyId), "action": action.json], action: action, accessToken: accessToken)
    }

    /// A challenge for one of the account's passkeys: `passkeyOptions` holds the request options.
    public func passkeyStepUpChallenge(action: StepUpAction, accessToken: String) async throws(LatchkeyError) -> StepUpChallenge {
        let c = try await challenge(["method": "passkey", "action": action.json], action: action, accessToken: accessToken)
        guard c.passkeyOptions != nil else { throw .unexpected("a passkey step-up challenge without publicKey options") }
        return c
    }

    /// `{"challengeId","signature"|"assertion","action"}` → the step-up token.
    public func verifyStepUp(_ challenge: StepUpChallenge, approval: DeviceKeyApproval, action: StepUpAction,
                             accessToken: String) async throws(LatchkeyError) -> StepUpToken {
        let body: LatchkeyJSON = .object([("challengeId", .string(challenge.challengeId)), approval.member, ("action", action.json)])
        return try await verified(body, action: action, accessToken: accessToken)
    }

    /// `{"challengeId","credential","action"}` → the step-up token.
    public func verifyStepUp(_ challenge: StepUpChallenge, credential: AssertionCredential, action: StepUpAction,
                             accessToken: String) async throws(LatchkeyError) -> StepUpToken {
        let body: LatchkeyJSON = ["challengeId": .string(challenge.challengeId), "credential": credential.json, "action": action.json]
        return try await verified(body, action: action, accessToken: accessToken)
    }

    /// Challenge, approval by the device key, verification: the whole step-up with a device key.
    public func stepUp(action: StepUpAction, keyId: String, signer: some DeviceKeySigner,
                       accessToken: String) async throws(LatchkeyError) -> StepUpToken {
        let c = try await stepUpChallenge(action: action, keyId: keyId, accessToken: accessToken)
        let approval = try await signer.approve(challenge: c.challenge)
        return try await verifyStepUp(c, approval: approval, action: action, accessToken: accessToken)
    }

    /// Challenge, a user-verified passkey assertion (`assert`), verification: the step-up that
    /// Latchkey's own gated changes (device-key enrolment, passkey revocation, …) require.
    public func stepUpWithPasskey(action: StepUpAction, accessToken: String,
                                  assert: PasskeyAssertionProvider) async throws(LatchkeyError) -> StepUpToken {
        let c = try await passkeyStepUpChallenge(action: action, accessToken: accessToken)
        let credential: AssertionCredential
        do { credential = try await assert(c.passkeyOptions!) } catch let e as LatchkeyError { throw e } catch {
            throw LatchkeyError(.authenticator, "the passkey assertion failed: \(error)")
        }
        return try await verifyStepUp(c, credential: credential, action: action, accessToken: accessToken)
    }

    /// `POST /v1/step-up/consume` with the step-up token as Bearer (what your backend does before
    /// it performs the action; an app rarely calls it itself): 200 the first time, `action_mismatch`
    /// for another action, `conflict` once used.
    public func consumeStepUp(token: String, action: StepUpAction) async throws(LatchkeyError) -> LatchkeyJSON {
        try await call("POST", "/v1/step-up/consume", body: ["actionHash": .string(action.hashBase64URL)], authorization: .unbound(token))
    }

    // MARK: Parts

    private func challenge(_ body: LatchkeyJSON, action: StepUpAction, accessToken: String) async throws(LatchkeyError) -> StepUpChallenge {
        let c = try StepUpChallenge(try await call("POST", "/v1/step-up/challenges", body: body, authorization: .bearer(accessToken)))
        guard c.actionHash == action.hashBase64URL else {
            throw LatchkeyError(.actionMismatch, "the server bound another action (\(c.actionHash)) than this one (\(action.hashBase64URL))")
        }
        return c
    }

    private func verified(_ body: LatchkeyJSON, action: StepUpAction, accessToken: String) async throws(LatchkeyError) -> StepUpToken {
        let token = try StepUpToken(try await call("POST", "/v1/step-up/verify", body: body, authorization: .bearer(accessToken)))
        guard token.actionHash == action.hashBase64URL else {
            throw LatchkeyError(.actionMismatch, "the step-up token is for another action (\(token.actionHash))")
        }
        return token
    }
}
