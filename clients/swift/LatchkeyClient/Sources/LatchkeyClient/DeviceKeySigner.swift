import Foundation

/// A hardware-bound key on this device that approves step-ups: the Secure Enclave
/// (`SecureEnclaveDeviceKey`), App Attest (`AppAttestDeviceKey`), or, in tests, a software key.
/// It answers the two questions the server asks: prove you hold the key (enrolment), and approve
/// this challenge (step-up).
public protocol DeviceKeySigner: Sendable {
    /// `ios` or `android` (the two platforms the server knows; macOS apps use `ios`).
    var platform: String { get }
    /// Proof of possession over the enrolment challenge's bytes.
    func enrolmentProof(challenge: Data) async throws(LatchkeyError) -> DeviceKeyEnrolmentProof
    /// Approval of a step-up challenge's bytes.
    func approve(challenge: Data) async throws(LatchkeyError) -> DeviceKeyApproval
}

/// What `POST /v1/device-keys` carries besides `deviceId`, `platform`, `name` and `challengeId`.
public struct DeviceKeyEnrolmentProof: Sendable {
    /// SPKI DER or the 65-byte X9.63 point (`SecKeyCopyExternalRepresentation`); may be nil for App Attest.
    public var publicKey: Data?
    /// DER ECDSA-SHA256 over the challenge bytes; nil for App Attest (its attestation proves possession).
    public var signature: Data?
    /// Android Key Attestation certificates, leaf first.
    public var certificateChain: [Data]
    /// App Attest: the key id (32 bytes) and the attestation object.
    public var appAttest: (keyId: Data, attestationObject: Data)?

    public init(publicKey: Data?, signature: Data?, certificateChain: [Data] = [], appAttest: (keyId: Data, attestationObject: Data)? = nil) {
        self.publicKey = publicKey
        self.signature = signature
        self.certificateChain = certificateChain
        self.appAttest = appAttest
    }

    /// The members this proof adds to the enrolment body.
    var members: [(key: String, value: LatchkeyJSON)] {
        var out: [(key: String, value: LatchkeyJSON)] = []
        if let publicKey { out.append(("publicKey", .string(Base64URL.encode(publicKey)))) }
        if let signature { out.append(("signature", .string(Base64URL.encode(signature)))) }
        if !certificateChain.isEmpty { out.append(("attestation", .array(certificateChain.map { .string(Base64URL.encode($0)) }))) }
        if let appAttest {
            out.append(("appAttest", .object([("keyId", .string(Base64URL.encode(appAttest.keyId))),
                                              ("attestationObject", .string(Base64URL.encode(appAttest.attestationObject)))])))
        }
        return out
    }
}

/// A device key's answer to a step-up challenge.
public enum DeviceKeyApproval: Sendable {
    /// DER ECDSA-SHA256 over the challenge bytes (Secure Enclave, Android Keystore).
    case signature(Data)
    /// An App Attest assertion (CBOR `{signature, authenticatorData}`) over clientDataHash = SHA-256(challenge).
    case appAttestAssertion(Data)

    var member: (key: String, value: LatchkeyJSON) {
        switch self {
        case .signature(let s): ("signature", .string(Base64URL.encode(s)))
        case .appAttestAssertion(let a): ("assertion", .string(Base64URL.encode(a)))
        }
    }
}
