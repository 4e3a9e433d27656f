// PLACEHOLDER — replaced by the App Attest branch on merge (drop this file's commit, titled
// "placeholder: AppAttestVerifier (replaced by the App Attest branch on merge)").
// It exists only so `latchkey inspect device-key` compiles in the Android branch; both functions
// refuse, so nothing can be attested through it.

public enum AppAttestVerifier {
    public static func verifyAttestation(keyId: [UInt8], attestationObject: [UInt8], clientDataHash: [UInt8],
                                         policy: DeviceKeyAttestationPolicy, trace: AttestationTrace? = nil) throws(DeviceKeyError) -> AttestedDeviceKey {
        trace?.record("appattest", false, "App Attest is not built in this branch")
        throw DeviceKeyError(.attestationInvalid, "App Attest is not built in this branch")
    }

    public static func verifyAssertion(_ assertion: [UInt8], publicKey: DevicePublicKey, clientDataHash: [UInt8],
                                       appId: String, previousCounter: UInt32) throws(DeviceKeyError) -> UInt32 {
        throw DeviceKeyError(.attestationInvalid, "App Attest is not built in this branch")
    }
}
