/// `PublicKeyCredentialRpEntity` (WebAuthn L3 §5.4.2): the relying party the options are for.
public struct RelyingParty: Sendable, Equatable {
    /// The RP ID (a registrable domain suffix of the origins, §5.4.2): what `rpIdHash` covers.
    public let id: String
    /// Human-readable name, shown by some authenticators.
    public let name: String

    public init(id: String, name: String) {
        self.id = id
        self.name = name
    }
}
