import Crypto
import JSON
import Storage

/// The Signal API's payloads (SPEC "Signal API"; WebAuthn L3 §5.1.10): what the client hands to
/// `PublicKeyCredential.signalUnknownCredential` / `signalAllAcceptedCredentials` /
/// `signalCurrentUserDetails`, so the user's passkey provider drops or relabels what the server no
/// longer accepts. `userId` is the WebAuthn user handle (base64url), never the account id.
enum Signals {
    /// For a login that failed only because the credential id is unknown or revoked.
    static func unknownCredential(rpId: String, credentialId: [UInt8]) -> JSONValue {
        .object([("method", "signalUnknownCredential"),
                 ("options", .object([("rpId", .string(rpId)), ("credentialId", .string(Base64URL.encode(credentialId)))]))])
    }

    /// `"signals"`: the account's live credential ids, and its current names.
    static func current(rpId: String, user: UserRecord, credentialIds: [[UInt8]]) -> JSONValue {
        // The writer writes members of an object: this one's only member is the array.
        JSONObjectWriter.value(capacity: 256 + 48 * credentialIds.count) {
            writeCurrent(as: "signals", rpId: rpId, user: user, credentialIds: credentialIds, into: &$0)
        }["signals"] ?? .array([])
    }

    /// `current` as member `key` of `writer`'s object (the one definition of the shape).
    static func writeCurrent(as key: String, rpId: String, user: UserRecord, credentialIds: [[UInt8]],
                             into writer: inout JSONObjectWriter) {
        let handle = Base64URL.encode(user.userHandle)
        writer.member(key, objects: 2) { i, signal in
            if i == 0 {
                signal.member("method", string: "signalAllAcceptedCredentials")
                signal.member("options") { options in
                    options.member("rpId", string: rpId)
                    options.member("userId", string: handle)
                    options.member("allAcceptedCredentialIds", strings: credentialIds.map(Base64URL.encode))
                }
            } else {
                signal.member("method", string: "signalCurrentUserDetails")
                signal.member("options") { options in
                    options.member("rpId", string: rpId)
                    options.member("userId", string: handle)
                    options.member("name", string: user.username)
                    options.member("displayName", string: user.displayName)
                }
            }
        }
    }
}
