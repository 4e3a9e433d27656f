import Crypto
import Foundation
import JSON
import Tokens

/// What an approval grants (SPEC "Tokens"), stored with its code and then with the grant: the
/// request's parameters the token endpoint checks, and the authentication the tokens describe.
/// Stored as JSON (`json`) whose members the store's statements read by name (`redirect_uri`,
/// `code_challenge`, `scope`, `auth_time`, `credential_id`, `op_sid`); read back with `init(json:)`.
struct OAuthGrant: Sendable, Equatable {
    var redirectURI: String?
    /// RFC 7636's S256 challenge; nil for a confidential client registered with `--pkce optional`.
    var codeChallenge: String?
    /// The granted scopes, space-separated as the request normalised them.
    var scope: String
    var nonce: String?
    /// Whole seconds since 1970.
    var authTime: Int64
    /// The authentication the tokens describe, in OpenID's terms (EAP `acr`, RFC 8176 `amr`); nil
    /// only for a stored grant without one.
    var acr: String?
    var amr: [String]
    /// RFC 9396 details the person approved (nil: none); carried by the code exchange's access token only.
    var authorizationDetails: JSONValue?
    /// The step-up's receipt, when one approved.
    var receiptId: String?
    /// RFC 8707 `resource`: the access token's audience when given.
    var resource: String?
    /// The passkey that began the approving session (base64url): revoking it ends the OAuth session too.
    var credentialId: String?
    /// SPEC "Which authentication the tokens describe": the OP session's id when the cookie approved
    /// (the id_token's `sid`).
    var opSessionId: String?
    /// RFC 9449 §10: the DPoP key (`dpop_jkt`) the code is bound to; its exchange needs a proof by it.
    var dpopKey: String?

    var scopes: [String] { scope.split(separator: " ").map(String.init) }

    var authentication: GrantAuthentication? {
        acr.map { GrantAuthentication(authTime: authTime, acr: $0, amr: amr) }
    }

    /// A grant of the checked request `p` (`OpenIDProvider.check`'s object).
    init(request p: JSONValue, authTime: Date, authentication: AuthenticationClaims, receiptId: String?, credentialId: [UInt8]?,
         opSessionId: String?) {
        redirectURI = p["redirect_uri"]?.stringValue
        codeChallenge = p["code_challenge"]?.stringValue
        scope = p["scope"]?.stringValue ?? ""
        nonce = p["nonce"]?.stringValue
        self.authTime = Int64(authTime.timeIntervalSince1970.rounded(.down))
        acr = authentication.acr
        amr = authentication.amr
        authorizationDetails = Self.present(p["authorization_details"])
        self.receiptId = receiptId
        resource = p["resource"]?.stringValue
        self.credentialId = credentialId.map { Base64URL.encode($0) }
        self.opSessionId = opSessionId
        dpopKey = p["dpop_jkt"]?.stringValue
    }

    /// A stored grant; a member that is missing or of another type reads as absent.
    init(json g: JSONValue) {
        redirectURI = g["redirect_uri"]?.stringValue
        codeChallenge = g["code_challenge"]?.stringValue
        scope = g["scope"]?.stringValue ?? ""
        nonce = g["nonce"]?.stringValue
        authTime = Int64(g["auth_time"]?.doubleValue ?? 0)
        acr = g["acr"]?.stringValue
        amr = (g["amr"]?.arrayValue ?? []).compactMap(\.stringValue)
        authorizationDetails = Self.present(g["authorization_details"])
        receiptId = g["receipt_id"]?.stringValue
        resource = g["resource"]?.stringValue
        credentialId = g["credential_id"]?.stringValue
        opSessionId = g["op_sid"]?.stringValue
        dpopKey = g["dpop_jkt"]?.stringValue
    }

    /// A member that is there and not JSON `null`.
    private static func present(_ value: JSONValue?) -> JSONValue? {
        guard let value, value != .null else { return nil }
        return value
    }

    /// As stored (the members the store's statements read by name).
    var json: JSONValue {
        func text(_ s: String?) -> JSONValue { s.map { .string($0) } ?? .null }
        var members: [(key: String, value: JSONValue)] = [
            ("redirect_uri", text(redirectURI)), ("code_challenge", text(codeChallenge)), ("scope", .string(scope)),
            ("nonce", text(nonce)), ("auth_time", .number(Double(authTime))),
            ("acr", text(acr)), ("amr", .array(amr.map { .string($0) })),
            ("authorization_details", authorizationDetails ?? .null),
            ("receipt_id", text(receiptId)), ("resource", text(resource)),
            ("credential_id", text(credentialId)), ("op_sid", text(opSessionId)),
        ]
        if let dpopKey { members.append(("dpop_jkt", .string(dpopKey))) }
        return .object(members)
    }
}
