import Crypto
import DeviceKeys
import JSON
import WebAuthn

/// `POST /v1/step-up/verify`, parsed in full before the challenge is used up.
struct VerifyInput {
    let challengeId: [UInt8]
    let signature: DERSignature?
    /// An App Attest key's approval: base64url CBOR `{signature, authenticatorData}`.
    let appAttestAssertion: [UInt8]?
    let assertion: ParsedAuthentication?
    /// The action the client believes it approved, when it says.
    let claimed: StepUpAction?

    init(_ body: JSONValue) throws(ServiceError) {
        challengeId = try RequestFields.challengeId(body)
        if let s = body["signature"], !s.isNull {
            let bytes = try RequestFields.bytes(body, "signature")
            do { signature = try DERSignature(bytes: bytes) } catch { throw ServiceError(error) }
            assertion = nil
            appAttestAssertion = nil
        } else if let a = body["assertion"], !a.isNull {
            let bytes = try RequestFields.bytes(body, "assertion")
            guard !bytes.isEmpty, bytes.count <= 1024 else { throw ServiceError.invalid("assertion is base64url CBOR of at most 1024 bytes") }
            appAttestAssertion = bytes
            signature = nil
            assertion = nil
        } else if let c = body["credential"], !c.isNull {
            do { assertion = try ParsedAuthentication(AuthenticationResponse(json: c)) } catch { throw ServiceError(error) }
            signature = nil
            appAttestAssertion = nil
        } else {
            throw ServiceError.invalid("signature (device key), assertion (App Attest key) or credential (passkey) is required")
        }
        if let a = body["action"], !a.isNull {
            do { claimed = try StepUpAction(a) } catch { throw ServiceError(error) }
        } else {
            claimed = nil
        }
    }
}
