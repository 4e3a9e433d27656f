import Foundation

/// Device keys (docs/step-up.md): enrolling one is itself a gated change, so it
/// carries either a step-up token for `{"type":"latchkey.device-key.enrol","deviceId":…}` made with
/// a user-verified passkey, or a device-key ticket an app backend obtained for this user.
extension Latchkey {
    /// What lets this enrolment through.
    public enum EnrolmentApproval: Sendable {
        /// `Latchkey-Step-Up`: a passkey step-up token for `StepUpAction.deviceKeyEnrolment(deviceId:)`.
        case stepUp(String)
        /// `Latchkey-Ticket`: from `POST /admin/v1/users/{externalId}/device-key-tickets`, via your backend.
        case ticket(String)

        var header: (String, String) {
            switch self {
            case .stepUp(let t): ("Latchkey-Step-Up", t)
            case .ticket(let t): ("Latchkey-Ticket", t)
            }
        }
    }

    /// `POST /v1/device-keys/challenges` → `{"challengeId","challenge"}`.
    public func deviceKeyChallenge(accessToken: String) async throws(LatchkeyError) -> DeviceKeyChallenge {
        try DeviceKeyChallenge(try await call("POST", "/v1/device-keys/challenges", body: [:], authorization: .bearer(accessToken)))
    }

    /// Challenge, proof of possession by `signer`, `POST /v1/device-keys` → 201. The same `deviceId`
    /// again replaces that device's key (and revokes the old one).
    public func enrolDeviceKey(deviceId: String, name: String? = nil, signer: some DeviceKeySigner, accessToken: String,
                               approval: EnrolmentApproval) async throws(LatchkeyError) -> EnrolledDeviceKey {
        let challenge = try await deviceKeyChallenge(accessToken: accessToken)
        let proof = try await signer.enrolmentProof(challenge: challenge.challenge)
        var body: [(key: String, value: LatchkeyJSON)] = [("deviceId", .string(deviceId)), ("platform", .string(signer.platform))]
        if let name { body.append(("name", .string(name))) }
        body.append(("challengeId", .string(challenge.challengeId)))
        body += proof.members
        let answer = try await call("POST", "/v1/device-keys", body: .object(body), authorization: .bearer(accessToken), headers: [approval.header])
        return try EnrolledDeviceKey(answer)
    }

    /// The passkey step-up for this enrolment (`assert` runs the user-verified assertion), then the enrolment.
    public func enrolDeviceKeyWithPasskey(deviceId: String, name: String? = nil, signer: some DeviceKeySigner, accessToken: String,
                                          assert: PasskeyAssertionProvider) async throws(LatchkeyError) -> EnrolledDeviceKey {
        let token = try await stepUpWithPasskey(action: try .deviceKeyEnrolment(deviceId: deviceId), accessToken: accessToken, assert: assert)
        return try await enrolDeviceKey(deviceId: deviceId, name: name, signer: signer, accessToken: accessToken, approval: .stepUp(token.token))
    }

    public func deviceKeys(accessToken: String) async throws(LatchkeyError) -> [EnrolledDeviceKey] {
        let list = try await call("GET", "/v1/device-keys", authorization: .bearer(accessToken))
        return try (list["deviceKeys"]?.arrayValue ?? []).map { k throws(LatchkeyError) in try EnrolledDeviceKey(k) }
    }

    /// 204; its open step-up challenges fail with `key_revoked` from now on.
    public func revokeDeviceKey(id: String, accessToken: String) async throws(LatchkeyError) {
        _ = try await call("DELETE", "/v1/device-keys/\(Self.pathSegment(id))", authorization: .bearer(accessToken))
    }
}
