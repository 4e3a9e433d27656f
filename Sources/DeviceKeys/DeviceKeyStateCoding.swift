import Crypto
import JSON

/// The one storage encoding of a device-key ceremony state: the RFC 8785 canonical JSON of an
/// object naming the ceremony (`"ceremony"`) and the layout version (`"v"`), binary as base64url.
/// A state decodes only from exactly the bytes it encodes to; anything else is
/// `challenge_invalid`, never a default. (WebAuthn's `CeremonyStateCoding` is the same layout;
/// each module keeps its own so that each throws its own error type.)
struct DeviceKeyStateCoding {
    static let version = 1
    static let maxLength = 16_384
    static let unreadable = DeviceKeyError(.challengeInvalid, "the stored ceremony state is unreadable")

    static func encode(_ ceremony: String, _ members: [(key: String, value: JSONValue)]) -> [UInt8] {
        JSONValue.object([("ceremony", .string(ceremony)), ("v", .number(Double(version)))] + members).canonicalized()
    }

    let json: JSONValue

    init(_ bytes: [UInt8], ceremony: String) throws(DeviceKeyError) {
        guard !bytes.isEmpty, bytes.count <= Self.maxLength else { throw Self.unreadable }
        do { json = try JSONParser.parse(bytes, maxDepth: 1) } catch { throw Self.unreadable }
        guard json["ceremony"]?.stringValue == ceremony, json["v"]?.intValue == Self.version else { throw Self.unreadable }
    }

    func string(_ key: String) throws(DeviceKeyError) -> String {
        guard let s = json[key]?.stringValue else { throw Self.unreadable }
        return s
    }

    /// Present, and either null or a string.
    func optionalString(_ key: String) throws(DeviceKeyError) -> String? {
        guard let value = json[key] else { throw Self.unreadable }
        if value.isNull { return nil }
        guard let s = value.stringValue else { throw Self.unreadable }
        return s
    }

    func bytes(_ key: String) throws(DeviceKeyError) -> [UInt8] {
        guard let bytes = Base64URL.decode(try string(key)) else { throw Self.unreadable }
        return bytes
    }

    /// A decoded state must hold together (its challenge made for its user, key and action) and
    /// re-encode to the very bytes it came from.
    static func require(_ condition: Bool) throws(DeviceKeyError) {
        guard condition else { throw unreadable }
    }
}
