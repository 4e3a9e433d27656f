import WebAuthn
import WellKnown

/// The relying party a deployment is: its rpId, the name authenticators show, the web origins of
/// its allowlist configuration and the issuer its tokens name. Built once from the configuration
/// and handed to the ceremonies' services, which take the rpId from here and nowhere else — so
/// that serving several relying parties later means passing another value, not another process.
public struct RelyingParty: Sendable, Equatable {
    /// `LATCHKEY_RP_ID`: what every rpIdHash, challenge seal and association file is bound to.
    public let id: String
    /// `LATCHKEY_RP_NAME`: `rp.name` in registration options.
    public let name: String
    /// `LATCHKEY_ORIGINS`: the configured web origins (the stored allowlist adds to them).
    public let origins: [String]
    /// `LATCHKEY_ISSUER`: `iss` of every token.
    public let issuer: String

    public init(id: String, name: String, origins: [String], issuer: String) {
        self.id = id
        self.name = name
        self.origins = origins
        self.issuer = issuer
    }

    public init(_ c: Configuration) {
        self.init(id: c.rpId, name: c.rpName, origins: c.origins, issuer: c.issuer)
    }

    /// The first web origin of `LATCHKEY_ORIGINS` (the web app's pages), else the issuer.
    public var webOrigin: String { PasskeyEndpoints.firstWebOrigin(origins) ?? issuer }

    /// WebAuthn's `PublicKeyCredentialRpEntity` for registration options.
    var entity: WebAuthn.RelyingParty { WebAuthn.RelyingParty(id: id, name: name) }
}
