import Foundation
import JSON
import Storage

/// OpenID clients rendered (`/admin/v1/clients`): the one rendering of a client, never its secret
/// hash; the secret itself only in the answer that created it.
enum OAuthClientRenderer {
    /// `{"clients":[…]}`.
    static func clients(_ list: [OAuthClientRecord]) -> JSONValue {
        .object([("clients", .array(list.map { client($0) }))])
    }

    static func client(_ c: OAuthClientRecord, secret: String? = nil) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = [
            ("id", .string(c.id)), ("name", .string(c.name)), ("public", .bool(c.isPublic)),
            ("tokenEndpointAuthMethod", .string(c.authMethod.rawValue)), ("pkceRequired", .bool(c.pkceRequired)),
            ("redirectUris", .array(c.redirectURIs.map { .string($0) })),
            ("postLogoutRedirectUris", .array(c.postLogoutRedirectURIs.map { .string($0) })),
            ("jwksUri", c.jwksURI.map { .string($0) } ?? .null),
            ("authorizationDetailsTypes", .array(c.authorizationDetailsTypes.map { .string($0) })),
            ("idTokenSignedResponseAlg", .string(c.idTokenAlg)), ("dpopBoundAccessTokens", .bool(c.dpopRequired || c.isFAPI2)),
            ("profile", c.profile.map { .string($0.rawValue) } ?? .null),
            ("createdAt", .string(iso8601(c.createdAt))),
        ]
        // SPEC "FAPI 2.0": the registration describes the profile to the client, in RFC 7591's names.
        let profile = OAuthClientService.profileMetadata(c)
        if !profile.isEmpty { members.append(("profileMetadata", .object(profile))) }
        members += cibaMembers(c)
        if let secret { members.append(("clientSecret", .string(secret))) }
        return .object(members)
    }

    /// SPEC "Clients": `grantTypes` and the CIBA members (null for a client without the grant).
    static func cibaMembers(_ c: OAuthClientRecord) -> [(key: String, value: JSONValue)] {
        [("grantTypes", .array(OAuthClientService.grantTypes(c).map { .string($0) })),
         ("backchannelTokenDeliveryMode", c.ciba.map { .string($0.mode.rawValue) } ?? .null),
         ("backchannelClientNotificationEndpoint", c.ciba?.notificationEndpoint.map { .string($0) } ?? .null),
         ("cibaApprover", c.ciba.map { .string($0.approver.rawValue) } ?? .null)]
    }
}
