import Crypto
import JSON

// Each vault route parses its request into one of these before the service sees it (the service
// never sees HTTP); a malformed body is 400 `invalid_request` here, before any step-up is looked at.
// The vault stores ciphertext only (SPEC "Portability"), so every value has one exact length.

enum VaultBytes {
    /// The PRF salt: 32 client-random bytes.
    static let saltLength = 32
    /// A wrapped data key: 12-byte IV ‖ AES-256-GCM ciphertext of the 32-byte data key ‖ 16-byte tag.
    static let wrappedKeyLength = 12 + 32 + 16

    /// `name` from `body`, an object with exactly that member: base64url (no padding) of `length` bytes.
    static func member(_ name: String, of body: JSONValue, length: Int, saying what: String) throws(ServiceError) -> [UInt8] {
        guard let members = body.objectValue else { throw ServiceError.invalid("the body must be a JSON object {\"\(name)\"}") }
        for (key, _) in members where key != name { throw ServiceError.invalid("unknown member \(key)") }
        guard let text = body[name]?.stringValue, text.utf8.count <= 4 * length, !text.contains("="),
              let bytes = Base64URL.decode(text), bytes.count == length else {
            throw ServiceError.invalid("\(name) is required: base64url of \(length) bytes (\(what))")
        }
        return bytes
    }
}

/// `PUT /v1/vault` `{"prfSalt"}`.
struct CreateVault: Sendable {
    let prfSalt: [UInt8]

    init(_ body: JSONValue) throws(ServiceError) {
        prfSalt = try VaultBytes.member("prfSalt", of: body, length: VaultBytes.saltLength, saying: "32 random bytes made by the client")
    }
}

/// `PUT /v1/vault/wrapped/{credentialId}` and `PUT /v1/vault/recovery` `{"wrappedKey"}`.
struct WrappedKeyBody: Sendable {
    let wrappedKey: [UInt8]

    init(_ body: JSONValue) throws(ServiceError) {
        wrappedKey = try VaultBytes.member("wrappedKey", of: body, length: VaultBytes.wrappedKeyLength,
                                           saying: "12-byte IV, AES-256-GCM ciphertext of the 32-byte data key, 16-byte tag")
    }
}
