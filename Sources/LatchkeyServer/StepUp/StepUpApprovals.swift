import Crypto
import DeviceKeys
import JSON
import Storage
import Tokens

/// The one check behind every gated change (SPEC "Assurance"): a step-up token the route table's
/// `StepUpRule` asks for, made by the caller with a user-verified passkey for exactly that action,
/// whose session is still live. Checked here; redeemed by the change's own statement
/// (`StepUpRedemption`), which also holds the approving key to being live.
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
        guard try sessionIsLive(claims) else {
            throw Self.stepUpRequired("the session that asked for the step-up has ended")
        }
        return (claims.jwtId, claims.receiptId, AuthenticationClaims(acr: claims.acr, amr: claims.amr))
    }

    /// SPEC "Rules that must hold": revocation is immediate. A step-up token is only as alive as the
    /// session that asked for it (`sid`, checked like access tokens are: from the revocation feed,
    /// a read only while the feed is stale) and the key that approved it. The key is checked by the
    /// statement that redeems the receipt (`StepUpRedemption.approverIsLive`), so a revoked device
    /// key or passkey ends the approvals it made before they expire, at no extra read.
    func sessionIsLive(_ claims: StepUpClaims) throws(ServiceError) -> Bool {
        try !storage({ () throws(StorageError) in try revoked.refuses(claims.sessionId) })
    }

    static func text(_ action: StepUpAction) -> String { String(decoding: action.canonical, as: UTF8.self) }
}
