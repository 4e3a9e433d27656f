import JSON

/// W3C "A Well-Known URL for Relying Party Passkey Endpoints": `/.well-known/passkey-endpoints` at
/// the rpId's host tells credential managers where a person enrols a passkey, manages their
/// passkeys and reads how the site uses the PRF extension. Every URL is on the deployment's first
/// web origin, where the web app answers them.
public enum PasskeyEndpoints {
    public static let name = "passkey-endpoints"

    /// `{"enroll","manage","prfUsageDetails"}` for the web app at `webOrigin` (no trailing slash).
    public static func json(webOrigin: String) -> JSONValue {
        let origin = webOrigin.hasSuffix("/") ? String(webOrigin.dropLast()) : webOrigin
        return .object([("enroll", .string(origin + "/?enroll=passkey")), ("manage", .string(origin + "/#passkeys")),
                        ("prfUsageDetails", .string(origin + "/help/vault"))])
    }

    /// The file's bytes, as served and as `latchkey wellknown build` writes them.
    public static func bytes(webOrigin: String) -> [UInt8] { json(webOrigin: webOrigin).serialized() }

    /// The first web origin of a list of origins (an `https://` or `http://` one; app origins such as
    /// `android:apk-key-hash:…` are not web pages), or nil.
    public static func firstWebOrigin(_ origins: [String]) -> String? {
        origins.first { $0.hasPrefix("https://") || $0.hasPrefix("http://") }
    }
}
