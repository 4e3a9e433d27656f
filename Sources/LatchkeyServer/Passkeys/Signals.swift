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
        let handle = JSONValue.string(Base64URL.encode(user.userHandle))
        return .array([
            .object([("method", "signalAllAcceptedCredentials"),
                     ("options", .object([("rpId", .string(rpId)), ("userId", handle),
                                          ("allAcceptedCredentialIds", .array(credentialIds.map { .string(Base64URL.encode($0)) }))]))]),
            .object([("method", "signalCurrentUserDetails"),
                     ("options", .object([("rpId", .string(rpId)), ("userId", handle), ("name", .string(user.username)),
                                          ("displayName", .string(user.displayName))]))]),
        ])
    }
}
