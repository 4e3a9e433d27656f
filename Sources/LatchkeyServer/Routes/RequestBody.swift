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
            out[key] = value
        }
        return out
    }
    var out: [String: String] = [:]
    for member in try jsonBody(request).objectValue ?? [] {
        if let s = member.value.stringValue { out[member.key] = s }
    }
    return out
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

/// Names shown to users: 1…64 characters, no control characters.
func validateName(_ value: String, _ field: String) throws(ServiceError) {
    guard !value.isEmpty, value.count <= 64, !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
        throw ServiceError.invalid("\(field) must be 1 to 64 printable characters")
    }
}

/// Typed members of a JSON request body: a missing member is `invalid_request` naming it.
enum RequestFields {
    static func string(_ body: JSONValue, _ member: String, max: Int) throws(ServiceError) -> String {
        guard let v = body[member], !v.isNull else { throw ServiceError.invalid("\(member) is required") }
        guard let s = v.stringValue, !s.isEmpty, s.utf8.count <= max,
              !s.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw ServiceError.invalid("\(member) must be a string of 1 to \(max) bytes")
        }
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
