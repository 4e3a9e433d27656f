import Crypto
import DeviceKeys
import JSON
import Storage
import WebAuthn

/// `POST /v1/device-keys`, parsed in full before anything is used up.
struct EnrolmentInput {
    let deviceId: String
    let platform: DevicePlatform
    let name: String
    /// The key as sent; an App Attest enrolment may leave it out (the attestation carries it).
    let key: DevicePublicKey?
    /// Proof of possession over the enrolment challenge; App Attest keys cannot make plain
    /// signatures, so their attestation (its nonce binds the challenge) proves possession instead.
    let signature: DERSignature?
    let challengeId: [UInt8]
    /// Android Key Attestation certificates, leaf first (may be empty).
    let chain: [Certificate]
    /// Apple App Attest: `{"keyId","attestationObject"}`.
    let appAttest: (keyId: [UInt8], attestationObject: [UInt8])?

    init(_ body: JSONValue) throws(ServiceError) {
        deviceId = try RequestFields.string(body, "deviceId", max: 128)
        guard let platform = DevicePlatform(rawValue: try RequestFields.string(body, "platform", max: 16)) else {
            throw ServiceError.invalid("platform must be \"ios\" or \"android\"")
        }
        self.platform = platform
        var name = platform == .ios ? "iOS device" : "Android device"
        if let n = body["name"], !n.isNull {
            guard let s = n.stringValue else { throw ServiceError.invalid("name must be a string") }
            try validateName(s, "name")
            name = s
        }
        self.name = name
        if let a = body["appAttest"], !a.isNull {
            guard platform == .ios else { throw ServiceError.invalid("appAttest is for iOS keys (platform \"ios\")") }
            let keyId = try RequestFields.bytes(a, "keyId")
            let object = try RequestFields.bytes(a, "attestationObject")
            guard keyId.count == 32, !object.isEmpty, object.count <= 16384 else {
                throw ServiceError.invalid("appAttest is {\"keyId\": base64url of 32 bytes, \"attestationObject\": base64url CBOR}")
            }
            appAttest = (keyId, object)
        } else {
            appAttest = nil
        }
        if appAttest == nil || (body["publicKey"].map { !$0.isNull } ?? false) {
            let keyBytes = try RequestFields.bytes(body, "publicKey")
            do { key = try DevicePublicKey(bytes: keyBytes) } catch { throw ServiceError(error) }
        } else {
            key = nil
        }
        if appAttest == nil || (body["signature"].map { !$0.isNull } ?? false) {
            let signatureBytes = try RequestFields.bytes(body, "signature")
            do { signature = try DERSignature(bytes: signatureBytes) } catch { throw ServiceError(error) }
        } else {
            signature = nil
        }
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
            guard platform == .android else { throw ServiceError.invalid("attestation (a certificate chain) is for Android keys") }
            guard appAttest == nil else { throw ServiceError.invalid("send attestation or appAttest, not both") }
        }
        self.chain = chain
    }
}
