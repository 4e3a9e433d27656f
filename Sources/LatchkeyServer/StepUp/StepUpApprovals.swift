import Crypto
import DeviceKeys
import JSON
import Storage
import Tokens

/// The one check behind every gated change (SPEC "Assurance"): a step-up token the route table's
/// `StepUpRule` asks for, made by the caller with a user-verified passkey for exactly that action,
/// whose session and approving key are still live. Checked here; redeemed by the change's own
/// transaction (`StepUpRedemption`).
extension StepUpService {
    static func stepUpRequired(_ detail: String) -> ServiceError { ServiceError(.stepUpRequired, detail) }

    /// A valid step-up token (no leeway) of `userId`, made with a user-verified passkey, for exactly `action`.
    /// Anything else is 403 `step_up_required`. Redeeming it is the change's own transaction's job.
    func checkedStepUp(_ token: String, userId: String, action: StepUpAction,
                       changes: String, deviceKeyAllowed: Bool = false, session: String? = nil)
        throws(ServiceError) -> (jti: String, receiptId: String, authentication: AuthenticationClaims) {
        guard let claims = try? signer.stepUpClaims(token) else {
            throw Self.stepUpRequired("the Latchkey-Step-Up token is invalid or expired")
        }
        guard claims.subject == userId else { throw Self.stepUpRequired("the step-up was made by another user") }
        if let session, claims.sessionId != session { throw Self.stepUpRequired("the step-up was made in another session") }
        guard constantTimeEquals(claims.actionHash, action.hash) else {
            throw Self.stepUpRequired("the step-up approved another action (this one is \(Self.text(action)))")
        }
        let deviceKey = [AuthenticationClaims.deviceKey.acr, AuthenticationClaims.deviceKeyAttested.acr].contains(claims.acr)
        guard claims.acr == AuthenticationClaims.passkeyVerified.acr || (deviceKeyAllowed && deviceKey) else {
            throw Self.stepUpRequired("\(changes) are approved with a user-verified passkey step-up")
        }
        guard try approvalIsLive(claims) else {
            throw Self.stepUpRequired("the step-up's session or the key that approved it was revoked")
        }
        return (claims.jwtId, claims.receiptId, AuthenticationClaims(acr: claims.acr, amr: claims.amr))
    }

    /// SPEC "Rules that must hold": revocation is immediate. A step-up token is only as alive as the
    /// session that asked for it (`sid`, checked like access tokens are) and the key that approved
    /// it (the receipt's device key or passkey, still live): a logout, a session ended, a recovery,
    /// or a revoked device key or passkey also ends the approvals they made, before they expire.
    func approvalIsLive(_ claims: StepUpClaims) throws(ServiceError) -> Bool {
        guard try !storage({ () throws(StorageError) in try revoked.refuses(claims.sessionId) }),
              let receipt = try storage({ () throws(StorageError) in try deviceKeys.receipt(id: claims.receiptId) }),
              receipt.userId == claims.subject else { return false }
        if receipt.method == .deviceKey {
            return try storage { () throws(StorageError) in try deviceKeys.key(id: receipt.keyId) }?.revokedAt == nil
        }
        guard let credentialId = Base64URL.decode(receipt.keyId),
              let (credential, _) = try storage({ () throws(StorageError) in try accounts.credentialForLogin(id: credentialId) }) else {
            return false
        }
        return credential.userId == receipt.userId
    }

    static func text(_ action: StepUpAction) -> String { String(decoding: action.canonical, as: UTF8.self) }
}
