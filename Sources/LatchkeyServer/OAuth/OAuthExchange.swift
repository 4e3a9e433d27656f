import Foundation
import Storage

// The OpenID Provider's requests and answers as values (ARCHITECTURE.md: services never see HTTP).
// The routes (OAuthRoutes.swift) parse a request into one of these, the provider decides, and the
// routes render its answer — `OAuthError` as RFC 6749 §5.2 JSON, a `BrowserAnswer` as a redirect
// or a page — at the same edge as `ServiceError`.

/// A form or query of an OAuth endpoint: each parameter once (RFC 6749 §3.1), the first one given
/// twice named.
struct OAuthParameters: Sendable {
    let fields: [String: String]
    let duplicate: String?

    init(_ pairs: [(String, String)]) {
        var fields: [String: String] = [:]
        var duplicate: String? = nil
        for (k, v) in pairs where fields.updateValue(v, forKey: k) != nil { duplicate = duplicate ?? k }
        self.fields = fields
        self.duplicate = duplicate
    }

    subscript(_ name: String) -> String? { fields[name] }
}

/// `Authorization: Basic` of a client (RFC 6749 §2.3.1), decoded at the edge.
enum BasicCredentials: Sendable {
    case pair(clientId: String, secret: String)
    case malformed
}

/// A request to an endpoint where the client authenticates (token, PAR, revocation), before it
/// has: its form, its Basic credentials, and the address failed authentications are counted by
/// (SPEC "Limits"). `OAuthCallers` authenticates it.
struct ClientRequest: Sendable {
    let form: OAuthParameters
    let basic: BasicCredentials?
    let address: String
}

/// `POST /oauth2/token`: the authenticated client and the grant it asks for, parsed (RFC 6749
/// §4.1.3, §6). A grant that cannot be parsed is kept as its error, answered after the client
/// authenticated (an unauthenticated caller learns nothing about its form: the caller resolver
/// refuses it before the route parses anything).
struct TokenRequest: Sendable {
    let client: OAuthClientRecord
    let grant: Result<TokenGrant, OAuthError>
    /// The request's DPoP proof (RFC 9449 §5), unchecked.
    let dpop: DPoPPresentation?

    init(_ request: AuthenticatedClientRequest, dpop: DPoPPresentation? = nil) {
        client = request.client
        grant = Result { () throws(OAuthError) in try TokenGrant(request.form) }
        self.dpop = dpop
    }
}

enum TokenGrant: Sendable, Equatable {
    /// RFC 6749 §4.1.3; `verifier` is RFC 7636's `code_verifier`.
    case authorizationCode(code: String, redirectURI: String?, verifier: String?)
    /// RFC 6749 §6; `scope`, when given, may only repeat or narrow the grant.
    case refreshToken(String, scope: [String]?)

    init(_ form: OAuthParameters) throws(OAuthError) {
        let f = form.fields
        // SPEC "Tokens": an approval is used once, by the code exchange; nothing at the token
        // endpoint can ask for authorization_details again.
        guard f["authorization_details"] == nil else {
            throw OAuthError(.invalidAuthorizationDetails, "authorization_details are approved on the authorization request, not at the token endpoint")
        }
        switch f["grant_type"] {
        case "authorization_code":
            guard let code = f["code"], !code.isEmpty else { throw OAuthError.invalidRequest("code is required") }
            self = .authorizationCode(code: code, redirectURI: f["redirect_uri"], verifier: f["code_verifier"])
        case "refresh_token":
            guard let token = f["refresh_token"], !token.isEmpty else { throw OAuthError.invalidRequest("refresh_token is required") }
            let scope = f["scope"].map { $0.split(separator: " ").map(String.init) }
            if let scope, scope.joined(separator: " ").utf8.count > 1024 { throw OAuthError(.invalidScope, "scope exceeds the grant") }
            self = .refreshToken(token, scope: scope)
        case nil, "": throw OAuthError.invalidRequest("grant_type is required")
        default: throw OAuthError(.unsupportedGrantType, "grant_type must be authorization_code or refresh_token")
        }
    }
}

/// `/oauth2/authorize` (GET query or POST form): the parameters, the browser's languages, the OP
/// session cookie (read only for `prompt=none`) and the client address (SPEC "Limits").
struct AuthorizeRequest: Sendable {
    let parameters: [(String, String)]
    let acceptLanguage: String?
    let cookie: String?
    let clientAddress: String
}

/// `/oauth2/logout` (RP-Initiated Logout 1.0, GET or form POST).
struct LogoutRequest: Sendable {
    let parameters: [(String, String)]
    let cookie: String?
    let acceptLanguage: String?
}

/// Where a browser-facing endpoint sends the person.
enum BrowserAnswer: Sendable {
    /// 303 to `location` (back to the client, or to the /authorize page); `clearCookie`: the OP
    /// session it ended.
    case redirect(String, clearCookie: Bool = false)
    /// A page in `lang` that never redirects (RFC 6749 §4.1.2.1), or the signed-out page.
    case page(OAuthPages.Problem, lang: String, status: Int = 400, retryAfter: Int? = nil, clearCookie: Bool = false)
    /// SPEC "Userinfo and logout": sign out of Latchkey too?
    case logoutConfirmation(clientName: String, clientId: String, postLogoutRedirectURI: String?, state: String?, lang: String)
}
