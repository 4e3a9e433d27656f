import Crypto
import DeviceKeys
import Foundation
import JSON
import Receipts
import Storage
import WebAuthn

/// What a step-up shows and what its receipt says (SPEC "Evidence"): the display sealed into the
/// challenge, and the RFC 8785 receipt document written in the verify's one statement.
extension StepUpService {
    /// SPEC "Evidence" → "What the person was shown": for a `latchkey.*` action the display Latchkey
    /// renders in the request's language, whatever the request sent; for an app's own action the
    /// request's `display` (checked strictly, `invalid_request` otherwise), or none.
    static func display(for action: StepUpAction, requested: JSONValue?, acceptLanguage: String?) throws(ServiceError) -> StepUpDisplay? {
        if action.value["type"]?.stringValue?.hasPrefix("latchkey.") == true {
            return LatchkeyDisplay.render(action, lang: LatchkeyDisplay.language(acceptLanguage: acceptLanguage))
        }
        guard let requested, !requested.isNull else { return nil }
        do { return try StepUpDisplay(app: requested) } catch { throw ServiceError(error) }
    }

    /// The receipt's RFC 8785 document (SPEC "Evidence"), from the challenge's state and the verified
    /// answer: written with the step-up, in the same statement.
    func receiptDocument(id: String, state: StepUpState, approvedAt: Date, kind: ReceiptDocument.ApproverKind, approverId: String,
                         publicKey: [UInt8], attestation: ReceiptDocument.Attestation?,
                         evidence: ReceiptDocument.Evidence) throws(ServiceError) -> [UInt8] {
        let action: StepUpAction, challenge: StepUpChallenge
        do {
            action = try StepUpAction(canonical: Array(state.action.utf8))
            challenge = try StepUpChallenge(parsing: state.challenge)
        } catch { throw ServiceError(.challengeInvalid, "the stored ceremony state is unreadable") }
        return ReceiptDocument(id: id, issuer: relyingParty.issuer, subject: state.userId,
                               approvedAt: Int64(approvedAt.timeIntervalSince1970.rounded(.down)), action: action, display: state.display,
                               approverKind: kind, approverId: approverId, approverPublicKey: publicKey, attestation: attestation,
                               evidence: evidence, challenge: challenge, keyBinding: state.keyBinding, breakGlass: state.breakGlass).bytes
    }

    /// A device key's attestation summary: what it proved at enrolment (a verified chain), or none.
    static func attestation(_ key: DeviceKeyRecord) -> ReceiptDocument.Attestation? {
        guard key.attested, key.attestationFormat != .none else { return nil }
        return ReceiptDocument.Attestation(format: key.attestationFormat.rawValue, trust: .verifiedChain)
    }

    /// A passkey's attestation summary: its registration's format, and a verified chain only when
    /// the attestation was verified to a trust anchor (`hardwareBound`); self attestation is `self`.
    static func attestation(_ credential: CredentialRecord) -> ReceiptDocument.Attestation? {
        guard credential.attestationFormat != "none", credential.attestationType != AttestationType.none.rawValue else { return nil }
        let trust: ReceiptDocument.Trust = credential.hardwareBound ? .verifiedChain
            : credential.attestationType == AttestationType.`self`.rawValue ? .`self` : .none
        return ReceiptDocument.Attestation(format: credential.attestationFormat, trust: trust)
    }
}
