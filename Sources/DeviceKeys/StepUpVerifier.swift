import Crypto

/// Signature checks for device keys: parse first (`DevicePublicKey`, `DERSignature`), verify
/// second. No I/O: the caller found the key and the challenge bytes it stored.
public enum DeviceKeyVerifier {
    /// Proof of possession at enrolment, and step-up approval: DER ECDSA-SHA256 over the exact
    /// challenge bytes the server issued.
    public static func verify(_ signature: DERSignature, by key: DevicePublicKey,
                              over challenge: [UInt8]) throws(DeviceKeyError) {
        guard key.isValidSignature(signature, over: challenge) else {
            throw DeviceKeyError(.signatureInvalid, "signature does not verify with this device key over the challenge")
        }
    }
}
