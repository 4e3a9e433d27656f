/// `AttestationConveyancePreference` (WebAuthn L3 §5.4.7): what the creation options ask for.
public enum AttestationConveyance: String, Sendable {
    case none, indirect, direct, enterprise
}
