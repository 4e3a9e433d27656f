import HTTP
import JSON
import Crypto

func jsonBody(_ request: Request) throws(ServiceError) -> JSONValue {
    do {
        let value = try JSONParser.parse(request.body)
        guard case .object = value else { throw ServiceError.invalid("the body must be a JSON object") }
        return value
    } catch let e as JSONError {
        throw ServiceError.invalid("malformed JSON: \(e.reason)")
    } catch {
        throw ServiceError.invalid("the body must be a JSON object")
    }
}

/// OAuth token requests come form-encoded (RFC 6749 §4.1.3); JSON is accepted too.
func formOrJSON(_ request: Request) throws(ServiceError) -> [String: String] {
    if request.mediaType == "application/x-www-form-urlencoded" {
        var out: [String: String] = [:]
        for pair in String(decoding: request.body, as: UTF8.self).split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = formDecode(String(kv[0])), value = kv.count > 1 ? formDecode(String(kv[1])) : ""
            guard let key, let value else { throw ServiceError.invalid("malformed form body") }
            // RFC 6749 §3.2: a parameter must not be included more than once.
            guard out.updateValue(value, forKey: key) == nil else { throw ServiceError.invalid("\(key) is given more than once") }
        }
        return out
    }
    var out: [String: String] = [:]
    for member in try jsonBody(request).objectValue ?? [] {
        if let s = member.value.stringValue { out[member.key] = s }
    }
    return out
}

/// A form body's pairs in order, duplicates kept (the authorization endpoint refuses them itself);
/// a pair that does not decode is dropped, as a query's would be.
func formPairs(_ body: [UInt8]) -> [(String, String)] {
    String(decoding: body, as: UTF8.self).split(separator: "&").compactMap { pair in
        let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        guard let key = formDecode(String(kv[0])), let value = kv.count > 1 ? formDecode(String(kv[1])) : "" else { return nil }
        return (key, value)
    }
}

func formDecode(_ s: String) -> String? {
    var bytes: [UInt8] = []
    var it = Array(s.utf8).makeIterator()
    while let c = it.next() {
        if c == UInt8(ascii: "+") { bytes.append(0x20) }
        else if c == UInt8(ascii: "%") {
            guard let h = it.next(), let l = it.next(), let v = UInt8(String(decoding: [h, l], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(v)
        } else { bytes.append(c) }
    }
    return String(validating: bytes, as: UTF8.self)
}

// MARK: The edge: what a string or an id from a client may be
//
// SPEC: no input yields a 5xx. Every string and id a route hands to a service is checked here
// first, so nothing PostgreSQL cannot hold (a NUL byte) or has no business holding (control
// characters, bidi overrides, megabytes) gets further than the route.

/// Text a client may put into a stored or looked-up string: no control characters (Cc: NUL,
/// C0, DEL, C1), no line or paragraph separators, and no invisible format characters (Cf: bidi
/// overrides, zero-width spaces, BOM) other than the joiners that emoji and some scripts need.
func isPrintableText(_ value: String) -> Bool {
    !value.unicodeScalars.contains { scalar in
        switch scalar.properties.generalCategory {
        case .control, .lineSeparator, .paragraphSeparator, .surrogate: true
        case .format: scalar.value != 0x200C && scalar.value != 0x200D  // ZWNJ, ZWJ
        default: false
        }
    }
}

/// Names and usernames: 1…64 printable characters (at most 256 bytes of UTF-8), not only spaces.
func validateName(_ value: String, _ field: String) throws(ServiceError) {
    guard !value.isEmpty, value.count <= 64, value.utf8.count <= 256, isPrintableText(value),
          value.contains(where: { !$0.isWhitespace }) else {
        throw ServiceError.invalid("\(field) must be 1 to 64 printable characters")
    }
}

/// The ids Latchkey hands out and takes back in paths and bodies, by how they are made.
enum Identifiers {
    /// `Runtime.identifier()`: base64url (no padding) of 16 random bytes, 22 characters — device
    /// keys, step-up receipts, users; sessions (refresh families) the same shape from
    /// `Runtime.sessionIdentifier()`. Anything else names nothing.
    static func opaque(_ text: String?) -> String? {
        guard let text, text.utf8.count == 22, let bytes = Base64URL.decode(text), bytes.count == 16,
              Base64URL.encode(bytes) == text else { return nil }
        return text
    }

    /// A webhook endpoint id: `wh_` + an opaque id (WebhookService.create).
    static func webhook(_ text: String?) -> String? {
        guard let text, text.hasPrefix("wh_"), opaque(String(text.dropFirst(3))) != nil else { return nil }
        return text
    }

    /// A passkey credential id: base64url (no padding) of 1…1023 bytes (WebAuthn L3 §5.1: at most 1023).
    static func credential(_ text: String?) -> [UInt8]? {
        guard let text, !text.isEmpty, text.utf8.count <= 1364, let bytes = Base64URL.decode(text),
              (1...1023).contains(bytes.count), Base64URL.encode(bytes) == text else { return nil }
        return bytes
    }

    /// A path segment that names a stored string (an origin, an app backend's user id): printable,
    /// 1…`max` bytes; nil when it cannot name anything.
    static func text(_ text: String?, max: Int) -> String? {
        guard let text, !text.isEmpty, text.utf8.count <= max, isPrintableText(text) else { return nil }
        return text
    }
}

/// Query parameters a route hands to a service (`?user=`, `?username=`, `?action=`): absent or
/// empty is nil; anything PostgreSQL cannot hold or no stored string can contain (a NUL, control
/// characters) or longer than `max` bytes is `invalid_request` naming the parameter, never a 5xx.
enum QueryFields {
    static func text(_ request: Request, _ name: String, max: Int) throws(ServiceError) -> String? {
        guard let value = request.queryValue(name), !value.isEmpty else { return nil }
        guard value.utf8.count <= max, isPrintableText(value) else {
            throw ServiceError.invalid("\(name) must be at most \(max) bytes of printable characters")
        }
        return value
    }

    /// A whole number in `range` (decimal digits only), nil when absent. Anything else — empty
    /// (`?limit=`), `-1`, `1e3`, `abc`, a number past the range — is 400 `invalid_request`, not read
    /// as the default (`?limit=5000` is not 1000, and `?limit=` is not absent).
    static func integer(_ request: Request, _ name: String, in range: ClosedRange<Int64>) throws(ServiceError) -> Int64? {
        guard let value = request.queryValue(name) else { return nil }
        guard value.utf8.count <= 19, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = Int64(value), range.contains(n) else {
            throw ServiceError.invalid("\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return n
    }
}

/// Typed members of a JSON request body: a missing member is `invalid_request` naming it.
enum RequestFields {
    /// `{"username","displayName"?}` of a new account (registration options, enrolment tickets):
    /// both names checked; `displayName` defaults to the username.
    static func accountNames(_ body: JSONValue) throws(ServiceError) -> (username: String, displayName: String) {
        guard let username = try optionalString(body, "username") else { throw ServiceError.invalid("username is required") }
        let displayName = try optionalString(body, "displayName") ?? username
        try validateName(username, "username")
        try validateName(displayName, "displayName")
        return (username, displayName)
    }

    static func string(_ body: JSONValue, _ member: String, max: Int) throws(ServiceError) -> String {
        guard let v = body[member], !v.isNull else { throw ServiceError.invalid("\(member) is required") }
        guard let s = v.stringValue, !s.isEmpty, s.utf8.count <= max, isPrintableText(s) else {
            throw ServiceError.invalid("\(member) must be a string of 1 to \(max) bytes")
        }
        return s
    }

    /// A member that may be absent or null (nil); present, it must be a JSON string — a number or
    /// an object in its place is `invalid_request` naming it, never silently replaced by a default.
    static func optionalString(_ body: JSONValue, _ member: String) throws(ServiceError) -> String? {
        guard let v = body[member], !v.isNull else { return nil }
        guard let s = v.stringValue else { throw ServiceError.invalid("\(member) must be a string") }
        return s
    }

    static func bytes(_ body: JSONValue, _ member: String) throws(ServiceError) -> [UInt8] {
        guard let v = body[member], !v.isNull else { throw ServiceError.invalid("\(member) is required") }
        guard let text = v.stringValue, let bytes = Base64URL.decode(text) else {
            throw ServiceError.invalid("\(member) is not base64url")
        }
        return bytes
    }

    /// A challenge id: base64url of the 32-byte SHA-256 of the challenge.
    static func challengeId(_ body: JSONValue) throws(ServiceError) -> [UInt8] {
        guard let v = body["challengeId"], !v.isNull else { throw ServiceError.invalid("challengeId is required") }
        guard let text = v.stringValue, let bytes = Base64URL.decode(text), bytes.count == 32 else {
            throw ServiceError.invalid("challengeId is not a challenge id (base64url of 32 bytes)")
        }
        return bytes
    }
}
