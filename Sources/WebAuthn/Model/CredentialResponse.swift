import Crypto
import JSON

/// `RegistrationResponseJSON` (WebAuthn L3 §5.1.8), parsed but not yet verified.
public struct RegistrationResponse: Sendable {
    public let id: String
    public let rawId: [UInt8]
    public let clientDataJSON: [UInt8]
    public let attestationObject: [UInt8]
    public let transports: [String]
    public let authenticatorAttachment: String?
    public let clientExtensionResults: JSONValue

    public init(json: JSONValue) throws(WebAuthnError) {
        let common = try CredentialEnvelope(json)
        id = common.id
        rawId = common.rawId
        authenticatorAttachment = common.authenticatorAttachment
        clientExtensionResults = common.clientExtensionResults
        clientDataJSON = try common.bytes("clientDataJSON")
        attestationObject = try common.bytes("attestationObject")
        var transports: [String] = []
        if let t = common.response["transports"], !t.isNull {
            guard let list = t.arrayValue else { throw .invalid("response.transports is not an array") }
            for item in list.prefix(16) {
                guard let s = item.stringValue, s.utf8.count <= 32 else { throw .invalid("response.transports holds a non-string") }
                if !transports.contains(s) { transports.append(s) }
            }
        }
        self.transports = transports
    }

    public init(bytes: [UInt8]) throws(WebAuthnError) { try self.init(json: try CredentialEnvelope.parse(bytes)) }
}

/// `AuthenticationResponseJSON` (WebAuthn L3 §5.1.9), parsed but not yet verified.
public struct AuthenticationResponse: Sendable {
    public let id: String
    public let rawId: [UInt8]
    public let clientDataJSON: [UInt8]
    public let authenticatorData: [UInt8]
    public let signature: [UInt8]
    public let userHandle: [UInt8]?
    public let authenticatorAttachment: String?
    public let clientExtensionResults: JSONValue

    public init(json: JSONValue) throws(WebAuthnError) {
        let common = try CredentialEnvelope(json)
        id = common.id
        rawId = common.rawId
        authenticatorAttachment = common.authenticatorAttachment
        clientExtensionResults = common.clientExtensionResults
        clientDataJSON = try common.bytes("clientDataJSON")
        authenticatorData = try common.bytes("authenticatorData")
        signature = try common.bytes("signature")
        if let handle = common.response["userHandle"], !handle.isNull {
            guard let text = handle.stringValue, let bytes = Base64URL.decode(text) else {
                throw .invalid("response.userHandle is not base64url")
            }
            // An empty user handle is how some clients say "none" (e.g. U2F credentials).
            userHandle = bytes.isEmpty ? nil : bytes
        } else {
            userHandle = nil
        }
    }

    public init(bytes: [UInt8]) throws(WebAuthnError) { try self.init(json: try CredentialEnvelope.parse(bytes)) }
}

/// The members both response shapes share.
struct CredentialEnvelope {
    let id: String
    let rawId: [UInt8]
    let response: JSONValue
    let authenticatorAttachment: String?
    let clientExtensionResults: JSONValue

    static func parse(_ bytes: [UInt8]) throws(WebAuthnError) -> JSONValue {
        do { return try JSONParser.parse(bytes) } catch { throw .invalid("credential JSON: \(error.reason)") }
    }

    init(_ json: JSONValue) throws(WebAuthnError) {
        guard case .object = json else { throw .invalid("credential is not a JSON object") }
        guard let type = json["type"]?.stringValue else { throw .invalid("type is missing") }
        guard type == "public-key" else { throw .invalid("type is not \"public-key\"") }
        guard let id = json["id"]?.stringValue, !id.isEmpty else { throw .invalid("id is missing") }
        guard let rawIdText = json["rawId"]?.stringValue else { throw .invalid("rawId is missing") }
        guard let rawId = Base64URL.decode(rawIdText), !rawId.isEmpty else { throw .invalid("rawId is not base64url") }
        // id is base64url(rawId) (§5.1.8); compare bytes so padding differences do not matter.
        guard id == rawIdText || Base64URL.decode(id) == rawId else { throw .invalid("id does not match rawId") }
        guard let response = json["response"], case .object = response else { throw .invalid("response is missing") }
        self.id = id
        self.rawId = rawId
        self.response = response
        if let attachment = json["authenticatorAttachment"], !attachment.isNull {
            guard let s = attachment.stringValue else { throw .invalid("authenticatorAttachment is not a string") }
            authenticatorAttachment = s
        } else {
            authenticatorAttachment = nil
        }
        clientExtensionResults = json["clientExtensionResults"] ?? .object([])
    }

    func bytes(_ member: String) throws(WebAuthnError) -> [UInt8] {
        guard let value = response[member], !value.isNull else { throw .invalid("response.\(member) is missing") }
        guard let text = value.stringValue, let bytes = Base64URL.decode(text) else {
            throw .invalid("response.\(member) is not base64url")
        }
        return bytes
    }
}
