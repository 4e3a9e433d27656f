@_exported import ProtocolCore

/// Why a device key, signature or step-up input was refused: the core's one error shape
/// (`CoreError`, shared with WebAuthn). `code` is one of the API's stable problem codes (docs/api.md); `reason` is
/// safe to show a client and never echoes key material or signatures.
public typealias DeviceKeyError = CoreError

extension DeviceKeyError {
    static func wrongSignature(_ reason: String) -> DeviceKeyError { DeviceKeyError(.signatureInvalid, reason) }
}
