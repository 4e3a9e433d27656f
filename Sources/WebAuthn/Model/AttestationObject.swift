import CBOR

/// The attestation object (WebAuthn L3 §6.5): `{fmt, attStmt, authData}` in CBOR.
public struct AttestationObject: Sendable {
    public let format: String
    public let statement: CBORValue
    public let authenticatorData: AuthenticatorData

    public init(bytes: [UInt8]) throws(WebAuthnError) {
        guard !bytes.isEmpty else { throw .invalid("attestationObject is empty") }
        let value: CBORValue
        do { value = try CBORDecoder.decode(bytes, maxDepth: 6, maxBytes: 1 << 16) } catch {
            throw .invalid("attestationObject: \(error.reason)")
        }
        guard case .map = value else { throw .invalid("attestationObject is not a CBOR map") }
        guard let fmt = value[text: "fmt"]?.textValue else { throw .invalid("attestationObject.fmt is missing") }
        guard let statement = value[text: "attStmt"], case .map = statement else { throw .invalid("attestationObject.attStmt is missing") }
        guard let authData = value[text: "authData"]?.bytesValue else { throw .invalid("attestationObject.authData is missing") }
        format = fmt
        self.statement = statement
        authenticatorData = try AuthenticatorData(authData)
    }
}
