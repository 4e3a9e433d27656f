import Foundation

/// The OpenID Provider's settings, read once from the `Configuration` (SPEC "OpenID Provider",
/// "Tokens", "Limits"): what the provider and its clients decide with, and nothing else.
struct OAuthPolicy: Sendable {
    /// `iss` of every token and authorization response, and the base of the endpoints.
    var issuer: String
    /// Where `/authorize` lives (SPEC "Authorization": `<issuer>/authorize?request=…`, served on the
    /// issuer's origin, where the OP session cookie it sets reaches `/oauth2/authorize`): the
    /// issuer's `scheme://host[:port]`, whatever other origins are allowlisted before it.
    var pageOrigin: String
    /// The OP browser session's lifetime (its cookie's too).
    var opSessionTTL: Int
    /// An OAuth session's refresh token, from its last rotation.
    var refreshTokenTTL: Int
    /// An OAuth access token's lifetime: the server's, at most 300 s.
    var accessTokenTTL: Int
    var idTokenTTL = 600
    /// A pending authorization request, a pushed one (RFC 9126 §2.2 `expires_in`), a code.
    var requestTTL = 600
    /// A pushed request's `expires_in`: 600 s, as discovery documents it (RFC 9126 §2.2 leaves it to the server).
    var pushedTTL = 600
    /// SPEC "FAPI 2.0": a `--profile fapi2` client's pushed request lives 90 s.
    var fapi2PushedTTL = 90
    var codeTTL = 60
    /// SPEC "Limits": pending authorization requests one client address stores a minute, and one
    /// client in all. Their own limits: they hold with `LATCHKEY_RATE_LIMIT` off too.
    var pendingPerAddressPerMinute = 30
    var pendingPerClient = 10_000
    /// Development mode: `http` resources and redirect URIs on loopback.
    var developmentMode: Bool
    /// Where a client's `jwks_uri` may point and be fetched from (the webhooks' address rules).
    var jwksAddresses: WebhookAddressPolicy
    var jwksCAFile: String?
    /// RFC 9449 §4.3: the origins a DPoP proof's `htu` may name (the issuer's, and the allowlisted
    /// web origins: https ones, and in development mode the http://localhost ones too, where the
    /// console's admin listener is), and the key material its nonces are derived from (the KEK; nil
    /// in development without one: the deployment secret then).
    var dpopOrigins: [String]
    var dpopNonceKey: [UInt8]?

    init(_ configuration: Configuration) {
        issuer = configuration.issuer
        pageOrigin = Configuration.origin(ofURL: configuration.issuer)
        opSessionTTL = configuration.opSessionTTL
        refreshTokenTTL = configuration.refreshTokenTTL
        accessTokenTTL = min(configuration.accessTokenTTL, 300)
        developmentMode = configuration.developmentMode
        jwksAddresses = WebhookAddressPolicy(configuration)
        jwksCAFile = configuration.webhookCAFile
        let issuerOrigin = Configuration.origin(ofURL: configuration.issuer)
        dpopOrigins = [issuerOrigin] + configuration.origins.filter {
            $0 != issuerOrigin && ($0.hasPrefix("https://") || (configuration.developmentMode && $0.hasPrefix("http://")))
        }
        dpopNonceKey = configuration.keyEncryptionKey?.bytes
    }

    /// The fetch of clients' JWKS under these rules.
    func jwksFetcher(resolver: HostResolver) -> JWKSFetcher {
        JWKSFetcher(policy: jwksAddresses, protocols: developmentMode ? "http,https" : "https", caFile: jwksCAFile, resolver: resolver)
    }
}
