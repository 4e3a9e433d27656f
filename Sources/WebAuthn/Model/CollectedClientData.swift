import Crypto
import JSON

/// The parsed `clientDataJSON` (WebAuthn L3 §5.8.1). Members the spec does not define are ignored,
/// as §5.8.1.2 requires of relying parties.
public struct CollectedClientData: Sendable {
    public enum CeremonyType: String, Sendable { case create = "webauthn.create", get = "webauthn.get" }

    public let type: String
    public let challenge: [UInt8]
    public let origin: String
    public let crossOrigin: Bool
    public let topOrigin: String?
    /// `tokenBinding.status` when present: "present" or "supported".
    public let tokenBindingStatus: String?
    /// The exact bytes the client sent; their SHA-256 is what the authenticator signed over.
    public let raw: [UInt8]
    public let hash: [UInt8]

    public init(raw: [UInt8]) throws(WebAuthnError) {
        guard raw.count <= 16_384 else { throw .invalid("clientDataJSON is too large") }
        let json: JSONValue
        do { json = try JSONParser.parse(raw, maxDepth: 8) } catch { throw .invalid("clientDataJSON: \(error.reason)") }
        guard case .object = json else { throw .invalid("clientDataJSON is not an object") }
        guard let type = json["type"]?.stringValue else { throw .invalid("clientDataJSON.type is missing") }
        guard let challengeText = json["challenge"]?.stringValue else { throw .invalid("clientDataJSON.challenge is missing") }
        guard let challenge = Base64URL.decode(challengeText) else { throw .invalid("clientDataJSON.challenge is not base64url") }
        guard let origin = json["origin"]?.stringValue else { throw .invalid("clientDataJSON.origin is missing") }
        var crossOrigin = false
        if let value = json["crossOrigin"], !value.isNull {
            guard let b = value.boolValue else { throw .invalid("clientDataJSON.crossOrigin is not a boolean") }
            crossOrigin = b
        }
        var topOrigin: String? = nil
        if let value = json["topOrigin"], !value.isNull {
            guard let s = value.stringValue else { throw .invalid("clientDataJSON.topOrigin is not a string") }
            topOrigin = s
        }
        var tokenBindingStatus: String? = nil
        if let tb = json["tokenBinding"], !tb.isNull, tb.stringValue != "unused" {
            // Token binding (L2 §5.8.1): an object whose status is one of the defined values (SPEC
            // "Metadata rules in detail"). The one exception is the bare string "unused" that old
            // Edge and Chrome sent, meaning none (a real-device vector carries it); any other
            // non-object is refused (FIDO conformance item Resp-2 F-15).
            guard case .object = tb else { throw .invalid("clientDataJSON.tokenBinding is not an object") }
            guard let status = tb["status"]?.stringValue, ["present", "supported"].contains(status) else {
                throw .invalid("clientDataJSON.tokenBinding.status is not a TokenBindingStatus")
            }
            tokenBindingStatus = status
        }
        self.type = type
        self.challenge = challenge
        self.origin = origin
        self.crossOrigin = crossOrigin
        self.topOrigin = topOrigin
        self.tokenBindingStatus = tokenBindingStatus
        self.raw = raw
        self.hash = Digest.sha256(raw)
    }
}
