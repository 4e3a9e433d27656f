import Crypto
import JSON

/// `PublicKeyCredentialDescriptor` (WebAuthn L3 §5.8.3): a credential named in
/// `excludeCredentials` or `allowCredentials`.
public struct CredentialDescriptor: Sendable, Equatable {
    public let id: [UInt8]
    /// The transports the authenticator reported at registration (`internal`, `hybrid`, …).
    public let transports: [String]

    public init(id: [UInt8], transports: [String] = []) {
        self.id = id
        self.transports = transports
    }

    /// `{"type":"public-key","id":…}`, with `transports` only when there are some.
    public var json: JSONValue {
        var members: [(key: String, value: JSONValue)] = [("type", "public-key"), ("id", .string(Base64URL.encode(id)))]
        if !transports.isEmpty { members.append(("transports", .array(transports.map { .string($0) }))) }
        return .object(members)
    }
}
