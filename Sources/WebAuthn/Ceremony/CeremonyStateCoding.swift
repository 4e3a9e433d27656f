import Crypto
import JSON

/// The one storage encoding of every ceremony state: the RFC 8785 canonical JSON of an object
/// naming the ceremony (`"ceremony"`) and the layout version (`"v"`), binary as base64url.
/// A state decodes only from exactly the bytes it encodes to, so there is one encoding, not a
/// family of accepted spellings; anything else is `challenge_invalid`, never a default.
struct CeremonyStateCoding {
    static let version = 1
    /// A state is a few hundred bytes; anything near this is not one.
    static let maxLength = 65_536
    static let unreadable = WebAuthnError(.challengeInvalid, "the stored ceremony state is unreadable")

    static func encode(_ ceremony: String, _ members: [(key: String, value: JSONValue)]) -> [UInt8] {
        JSONValue.object([("ceremony", .string(ceremony)), ("v", .number(Double(version)))] + members).canonicalized()
    }

    let json: JSONValue

    /// The top-level object of a `ceremony` state of this version.
    init(_ bytes: [UInt8], ceremony: String) throws(WebAuthnError) {
        guard !bytes.isEmpty, bytes.count <= Self.maxLength else { throw Self.unreadable }
        do { json = try JSONParser.parse(bytes, maxDepth: 2) } catch { throw Self.unreadable }
        guard json["ceremony"]?.stringValue == ceremony, json["v"]?.intValue == Self.version else { throw Self.unreadable }
    }

    private init(json: JSONValue) { self.json = json }

    func member(_ key: String) throws(WebAuthnError) -> JSONValue {
        guard let value = json[key] else { throw Self.unreadable }
        return value
    }

    func object(_ key: String) throws(WebAuthnError) -> CeremonyStateCoding {
        let value = try member(key)
        guard value.objectValue != nil else { throw Self.unreadable }
        return CeremonyStateCoding(json: value)
    }

    func string(_ key: String) throws(WebAuthnError) -> String {
        guard let s = try member(key).stringValue else { throw Self.unreadable }
        return s
    }

    /// Present, and either null or a string.
    func optionalString(_ key: String) throws(WebAuthnError) -> String? {
        let value = try member(key)
        if value.isNull { return nil }
        guard let s = value.stringValue else { throw Self.unreadable }
        return s
    }

    /// Absent (a member written only when it says something), or a bool / a string.
    func absentOrBool(_ key: String) throws(WebAuthnError) -> Bool? {
        json[key] == nil ? nil : try bool(key)
    }

    func absentOrString(_ key: String) throws(WebAuthnError) -> String? {
        json[key] == nil ? nil : try string(key)
    }

    func bool(_ key: String) throws(WebAuthnError) -> Bool {
        guard let b = try member(key).boolValue else { throw Self.unreadable }
        return b
    }

    func bytes(_ key: String) throws(WebAuthnError) -> [UInt8] {
        try Self.bytes(member(key))
    }

    /// A challenge: at least 16 bytes (WebAuthn L3 §13.4.3), so no state can expect an empty one.
    func challenge(_ key: String) throws(WebAuthnError) -> [UInt8] {
        let challenge = try bytes(key)
        guard challenge.count >= 16 else { throw Self.unreadable }
        return challenge
    }

    static func bytes(_ value: JSONValue) throws(WebAuthnError) -> [UInt8] {
        guard let text = value.stringValue, let bytes = Base64URL.decode(text) else { throw unreadable }
        return bytes
    }

    /// Present, and either null or an array.
    func optionalArray(_ key: String) throws(WebAuthnError) -> [JSONValue]? {
        let value = try member(key)
        if value.isNull { return nil }
        guard let a = value.arrayValue else { throw Self.unreadable }
        return a
    }

    func array(_ key: String) throws(WebAuthnError) -> [JSONValue] {
        guard let a = try optionalArray(key) else { throw Self.unreadable }
        return a
    }

    func userVerification(_ key: String) throws(WebAuthnError) -> VerificationPolicy.UserVerification {
        guard let uv = VerificationPolicy.UserVerification(rawValue: try string(key)) else { throw Self.unreadable }
        return uv
    }

    /// The last step of every decode: the bytes must be the ones this value encodes to (no
    /// unknown members, no other spelling of a value).
    static func requireCanonical(_ bytes: [UInt8], _ encoded: [UInt8]) throws(WebAuthnError) {
        guard bytes == encoded else { throw unreadable }
    }
}
