/// The device keys' settings, read once from the configuration (SPEC "Device keys").
struct DeviceKeyPolicy: Sendable {
    /// Seconds an enrolment challenge lives (`LATCHKEY_CHALLENGE_TTL`).
    var challengeTTL: Int
    /// `LATCHKEY_DEVICE_KEY_ATTESTATION`: whether an enrolment must prove its key hardware-bound.
    var attestation: DeviceKeyAttestationRequirement

    init(_ c: Configuration) {
        challengeTTL = c.challengeTTL
        attestation = c.deviceKeyAttestation
    }
}
