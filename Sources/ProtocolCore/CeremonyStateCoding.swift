import Crypto
import JSON

/// The one storage encoding of every ceremony state, WebAuthn's and DeviceKeys': the RFC 8785
/// canonical JSON of an object naming the ceremony (`"ceremony"`) and the layout version (`"v"`),
/// binary as base64url. A state decodes only from exactly the bytes it encodes to, so there is one
/// encoding, not a family of accepted spellings; anything else is `challenge_invalid`, never a
/// default. Package-internal: a library client stores the bytes `encoded()` gives, opaque.
package struct CeremonyStateCoding {
    package static let version = 1
    /// A WebAuthn state is a few hundred bytes; anything near this is not one.
    package static let maxLength = 65_536
    package static let unreadable = CoreError(.challengeInvalid, "the stored ceremony state is unreadable")

    package static func encode(_ ceremony: String, _ members: [(key: String, value: JSONValue)]) -> [UInt8] {
        // The two fixed members go where RFC 8785 puts them: a state that lists its members in
        // that order (they do) is then written without a sort. Any order gives the same bytes.
        var all = members
        insertInOrder(("ceremony", .string(ceremony)), into: &all)
        insertInOrder(("v", .number(Double(version))), into: &all)
        return JSONValue.object(all).canonicalized()
    }

    private static func insertInOrder(_ member: (key: String, value: JSONValue), into members: inout [(key: String, value: JSONValue)]) {
        let position = members.firstIndex { !JSONValue.canonicallyPrecedes($0.key, member.key) } ?? members.endIndex
        members.insert(member, at: position)
    }

    package let json: JSONValue

    /// The top-level object of a `ceremony` state of this version, at most `maxLength` bytes and
    /// `maxDepth` levels deep (a flat state: 1; one with an object member: 2).
    package init(_ bytes: [UInt8], ceremony: String, maxLength: Int = CeremonyStateCoding.maxLength, maxDepth: Int = 2) throws(CoreError) {
        guard !bytes.isEmpty, bytes.count <= maxLength else { throw Self.unreadable }
        do { json = try JSONParser.parse(bytes, maxDepth: maxDepth) } catch { throw Self.unreadable }
        guard json["ceremony"]?.stringValue == ceremony, json["v"]?.intValue == Self.version else { throw Self.unreadable }
    }

    private init(json: JSONValue) { self.json = json }

    package func member(_ key: String) throws(CoreError) -> JSONValue {
        guard let value = json[key] else { throw Self.unreadable }
        return value
    }

    package func object(_ key: String) throws(CoreError) -> CeremonyStateCoding {
        let value = try member(key)
        guard value.objectValue != nil else { throw Self.unreadable }
        return CeremonyStateCoding(json: value)
    }

    package func string(_ key: String) throws(CoreError) -> String {
        guard let s = try member(key).stringValue else { throw Self.unreadable }
        return s
    }

    /// Present, and either null or a string.
    package func optionalString(_ key: String) throws(CoreError) -> String? {
        let value = try member(key)
        if value.isNull { return nil }
        guard let s = value.stringValue else { throw Self.unreadable }
        return s
    }

    /// Absent (a member written only when it says something), or a bool / a string.
    package func absentOrBool(_ key: String) throws(CoreError) -> Bool? {
        json[key] == nil ? nil : try bool(key)
    }

    package func absentOrString(_ key: String) throws(CoreError) -> String? {
        json[key] == nil ? nil : try string(key)
    }

    package func bool(_ key: String) throws(CoreError) -> Bool {
        guard let b = try member(key).boolValue else { throw Self.unreadable }
        return b
    }

    package func bytes(_ key: String) throws(CoreError) -> [UInt8] {
        try Self.bytes(member(key))
    }

    /// A challenge: at least 16 bytes (WebAuthn L3 §13.4.3), so no state can expect an empty one.
    package func challenge(_ key: String) throws(CoreError) -> [UInt8] {
        let challenge = try bytes(key)
        guard challenge.count >= 16 else { throw Self.unreadable }
        return challenge
    }

    package static func bytes(_ value: JSONValue) throws(CoreError) -> [UInt8] {
        guard let text = value.stringValue, let bytes = Base64URL.decode(text) else { throw unreadable }
        return bytes
    }

    /// Present, and either null or an array.
    package func optionalArray(_ key: String) throws(CoreError) -> [JSONValue]? {
        let value = try member(key)
        if value.isNull { return nil }
        guard let a = value.arrayValue else { throw Self.unreadable }
        return a
    }

    package func array(_ key: String) throws(CoreError) -> [JSONValue] {
        guard let a = try optionalArray(key) else { throw Self.unreadable }
        return a
    }

    /// The last step of every decode: the bytes must be the ones this value encodes to (no
    /// unknown members, no other spelling of a value).
    package static func requireCanonical(_ bytes: [UInt8], _ encoded: [UInt8]) throws(CoreError) {
        try require(bytes == encoded)
    }

    /// A decoded state must hold together (e.g. its challenge made for its user, key and action).
    package static func require(_ condition: Bool) throws(CoreError) {
        guard condition else { throw unreadable }
    }
}
