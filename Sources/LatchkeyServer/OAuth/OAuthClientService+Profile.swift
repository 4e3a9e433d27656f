import JSON
import Storage

/// SPEC "FAPI 2.0 Security Profile" per client (`--profile fapi2`, `"profile":"fapi2"`): what a
/// registration must be to take the profile, and how the registration describes it to the client.
extension OAuthClientService {
    /// The combinations the profile refuses (exit 64 on the command line, 400 `invalid_request` over
    /// HTTP): a public client, RS256 id_tokens, and anything but `private_key_jwt` with PKCE.
    static func checkProfile(_ profile: OAuthClientProfile?, isPublic: Bool, idTokenAlg: String, method: OAuthClientAuthMethod,
                             pkceRequired: Bool) throws(ServiceError) {
        guard profile == .fapi2 else { return }
        guard !isPublic else { throw ServiceError.invalid("--profile fapi2 is for a confidential client (not --public)") }
        guard idTokenAlg != "RS256" else { throw ServiceError.invalid("--profile fapi2 signs id_tokens ES256 (not --id-token-alg RS256)") }
        guard method == .privateKeyJWT else { throw ServiceError.invalid("--profile fapi2 authenticates with private_key_jwt (--jwks-uri)") }
        guard pkceRequired else { throw ServiceError.invalid("--profile fapi2 requires PKCE (not --pkce optional)") }
    }

    /// `"profile"` of an admin API body: `"fapi2"` or null.
    static func profileMember(_ value: JSONValue) throws(ServiceError) -> OAuthClientProfile? {
        if value == .null { return nil }
        guard let profile = value.stringValue.flatMap(OAuthClientProfile.init(rawValue:)) else {
            throw ServiceError.invalid("profile must be \"fapi2\" or null")
        }
        return profile
    }

    /// The client metadata (RFC 7591 §2, RFC 9126 §6, RFC 9449 §5.2 names) the profile holds a client
    /// to: what its registration tells the client to do. Empty without a profile.
    public static func profileMetadata(_ c: OAuthClientRecord) -> [(key: String, value: JSONValue)] {
        guard c.isFAPI2 else { return [] }
        return [
            ("require_pushed_authorization_requests", true), ("dpop_bound_access_tokens", true),
            ("token_endpoint_auth_method", "private_key_jwt"), ("token_endpoint_auth_signing_alg", "ES256"),
            ("token_endpoint_auth_signing_alg_values", ["ES256", "PS256"]),
            ("dpop_signing_alg_values", ["ES256", "PS256", "EdDSA"]),
            ("id_token_signed_response_alg", "ES256"), ("response_types", ["code"]),
            ("response_modes", ["query"]), ("code_challenge_method", "S256"),
            ("authorization_response_iss_parameter_supported", true),
        ]
    }
}
