/// `PublicKeyCredentialUserEntity` (WebAuthn L3 §5.4.3): the account a new credential is for.
public struct UserEntity: Sendable, Equatable {
    /// The user handle: opaque random bytes (at most 64, §5.4.3), never the username. An
    /// assertion's `userHandle` is compared against it (§7.2 step 6).
    public let id: [UInt8]
    public let name: String
    public let displayName: String

    public init(id: [UInt8], name: String, displayName: String) {
        self.id = id
        self.name = name
        self.displayName = displayName
    }
}
