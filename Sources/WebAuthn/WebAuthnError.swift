@_exported import ProtocolCore

/// Why a ceremony was refused: the core's one error shape (`CoreError`, shared with DeviceKeys).
/// `code` is one of the API's stable problem codes (docs/api.md); `reason` is safe to show a client and never
/// contains secrets or raw input. Re-exported, so `import WebAuthn` is all a client needs.
public typealias WebAuthnError = CoreError

extension WebAuthnError {
    static func attestation(_ reason: String) -> WebAuthnError { WebAuthnError(.attestationInvalid, reason) }
    static func metadata(_ reason: String) -> WebAuthnError { WebAuthnError(.metadataInvalid, reason) }
}
