import Crypto
import DeviceKeys
import JSON
import WebAuthn

/// `POST /v1/device-keys`, parsed in full before anything is used up.
struct EnrolmentInput {
    let deviceId: String
    let platform: String
    let name: String
    let key: DevicePublicKey
    let signature: DERSignature
    let challengeId: [UInt8]
    /// Attestation certificates, leaf first (may be empty).
    let chain: [Certificate]

    init(_ body: JSONValue) throws(ServiceError) {
        deviceId = try RequestFields.string(body, "deviceId", max: 128)
        platform = try RequestFields.string(body, "platform", max: 16)
        guard platform == "ios" || platform == "android" else { throw ServiceError.invalid("platform must be \"ios\" or \"android\"") }
        var name = platform == "ios" ? "iOS device" : "Android device"
        if let n = body["name"], !n.isNull {
            guard let s = n.stringValue else { throw ServiceError.invalid("name must be a string") }
            try validateName(s, "name")
            name = s
        }
        self.name = name
        let keyBytes = try RequestFields.bytes(body, "publicKey")
        do { key = try DevicePublicKey(bytes: keyBytes) } catch { throw ServiceError(error) }
        let signatureBytes = try RequestFields.bytes(body, "signature")
        do { signature = try DERSignature(bytes: signatureBytes) } catch { throw ServiceError(error) }
        challengeId = try RequestFields.challengeId(body)
        var chain: [Certificate] = []
        if let a = body["attestation"], !a.isNull {
            guard let list = a.arrayValue, !list.isEmpty, list.count <= 8 else {
                throw ServiceError.invalid("attestation must be an array of 1 to 8 base64url DER certificates, leaf first")
            }
            for item in list {
                guard let text = item.stringValue, let der = Base64URL.decode(text), let cert = try? Certificate(der: der) else {
                    throw ServiceError.invalid("attestation holds something that is not a base64url DER certificate")
                }
                chain.append(cert)
            }
        }
        self.chain = chain
    }
}

/// `POST /v1/step-up/verify`, parsed in full before the challenge is used up.
struct VerifyInput {
    let challengeId: [UInt8]
    let signature: DERSignature?
    let assertion: ParsedAuthentication?
    /// The action the client believes it approved, when it says.
    let claimed: StepUpAction?

    init(_ body: JSONValue) throws(ServiceError) {
        challengeId = try RequestFields.challengeId(body)
        if let s = body["signature"], !s.isNull {
            let bytes = try RequestFields.bytes(body, "signature")
            do { signature = try DERSignature(bytes: bytes) } catch { throw ServiceError(error) }
            assertion = nil
        } else if let c = body["credential"], !c.isNull {
            do { assertion = try ParsedAuthentication(AuthenticationResponse(json: c)) } catch { throw ServiceError(error) }
            signature = nil
        } else {
            throw ServiceError.invalid("signature (device key) or credential (passkey) is required")
        }
        if let a = body["action"], !a.isNull {
            do { claimed = try StepUpAction(a) } catch { throw ServiceError(error) }
        } else {
            claimed = nil
        }
    }
}
