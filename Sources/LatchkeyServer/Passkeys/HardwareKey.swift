import JSON
import WebAuthn

enum HardwareKey {
    /// OpenID EAP `phrh` (SPEC "Which authentication the tokens describe"): the registration's
    /// attestation statement was verified to a trust anchor (an MDS statement's root, or the
    /// configured anchors) — never when the options asked for `none`, whatever the authenticator
    /// sent — and the metadata's `keyProtection` (hardware, secure element, TEE) or the format
    /// (`android-key`, `apple`: keys their platforms keep in hardware) proves a hardware key.
    static func proven(by verified: VerifiedRegistration, askedForAttestation: Bool, anchored: Bool) -> Bool {
        guard askedForAttestation, verified.attestationType != .none, verified.attestationType != AttestationType.`self`,
              verified.metadata?.anchor != nil || (anchored && !verified.trustPath.isEmpty) else { return false }
        let protection = Set((verified.metadata?.entry.statement?.json["keyProtection"]?.arrayValue ?? []).compactMap(\.stringValue))
        return !protection.isDisjoint(with: ["hardware", "secure_element", "tee"]) || ["android-key", "apple"].contains(verified.format)
    }
}
