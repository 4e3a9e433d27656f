import Crypto
import Foundation
import JSON

// The protocol pieces of the OpenID Provider (SPEC "OpenID Provider") that know no HTTP and no SQL:
// OAuth's own error shape, PKCE, redirect-URI rules, scopes and RFC 9396 authorization details.

/// An OAuth refusal in OAuth's own terms (RFC 6749 §4.1.2.1 and §5.2, RFC 6750 §3.1, RFC 9396 §5,
/// OpenID Connect Core §3.1.2.6): `code` is one of the registered codes, `description` safe to show.
struct OAuthError: Error, Sendable, CustomStringConvertible {
    /// The registered error codes Latchkey answers with; `rawValue` is the wire name.
    enum Code: String, Sendable, CaseIterable {
        case invalidRequest = "invalid_request"
        case invalidClient = "invalid_client"
        case invalidGrant = "invalid_grant"
        case unsupportedGrantType = "unsupported_grant_type"
        case invalidScope = "invalid_scope"
        case unsupportedResponseType = "unsupported_response_type"
        case accessDenied = "access_denied"
        case temporarilyUnavailable = "temporarily_unavailable"
        case loginRequired = "login_required"
        case consentRequired = "consent_required"
        case interactionRequired = "interaction_required"
        case requestNotSupported = "request_not_supported"
        case invalidAuthorizationDetails = "invalid_authorization_details"
        case invalidTarget = "invalid_target"
        case invalidToken = "invalid_token"
        case insufficientScope = "insufficient_scope"
        // OpenID CIBA Core 1.0 §13 and §11.
        case unauthorizedClient = "unauthorized_client"
        case unknownUserId = "unknown_user_id"
        case invalidBindingMessage = "invalid_binding_message"
        case authorizationPending = "authorization_pending"
        case slowDown = "slow_down"
        case expiredToken = "expired_token"
        /// RFC 9449 §5, §7.1: a DPoP proof that is missing where required, malformed or replayed.
        case invalidDPoPProof = "invalid_dpop_proof"
        /// RFC 9449 §8: the proof must carry the nonce of the `DPoP-Nonce` header.
        case useDPoPNonce = "use_dpop_nonce"
    }

    let code: Code
    let description: String
    /// Set on a refusal by a limit (SPEC "Limits"): 429 with `Retry-After`.
    var retryAfter: Int? = nil
    /// Set when the store could not answer: a server error (503), never a refusal of the client.
    var serverSide = false
    /// Set when the request carried a DPoP proof or a DPoP-bound token: the answer carries
    /// `DPoP-Nonce` and, at userinfo, the `DPoP` challenge (RFC 9449 §7.1, §8).
    var dpopNonce: String? = nil
    /// The `error` member as sent (RFC 6749 §5.2).
    var error: String { code.rawValue }
    /// The token endpoint's status: 400, 401 for `invalid_client`, 429 for a limit, 503 when the
    /// store could not answer.
    var status: Int { serverSide ? 503 : retryAfter != nil ? 429 : code == .invalidClient ? 401 : 400 }

    init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }

    static func invalidRequest(_ d: String) -> OAuthError { OAuthError(.invalidRequest, d) }
    static func invalidGrant(_ d: String) -> OAuthError { OAuthError(.invalidGrant, d) }
    static func invalidClient(_ d: String) -> OAuthError { OAuthError(.invalidClient, d) }
    /// The store (or a key it holds) could not answer: RFC 6749 §4.1.2.1's `temporarily_unavailable`, 503.
    static var unavailable: OAuthError {
        var e = OAuthError(.temporarilyUnavailable, "try again")
        e.serverSide = true
        return e
    }

    var json: JSONValue { .object([("error", .string(error)), ("error_description", .string(description))]) }
}

/// RFC 7636: S256 only, for every client.
enum PKCE {
    /// §4.1: 43…128 characters of [A-Z a-z 0-9 - . _ ~].
    static func isVerifier(_ v: String) -> Bool {
        (43...128).contains(v.utf8.count) && v.utf8.allSatisfy { c in
            (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x2D || c == 0x2E || c == 0x5F || c == 0x7E
        }
    }

    /// A challenge is base64url of 32 bytes (43 characters).
    static func isChallenge(_ c: String) -> Bool { Base64URL.decode(c)?.count == 32 && c.utf8.count == 43 }

    /// §4.6: BASE64URL(SHA256(verifier)) == challenge, compared in constant time.
    static func verify(verifier: String, challenge: String) -> Bool {
        guard isVerifier(verifier) else { return false }
        return constantTimeEquals(Array(Base64URL.encode(Digest.sha256(Array(verifier.utf8))).utf8), Array(challenge.utf8))
    }
}

/// Redirect URIs (SPEC "OpenID Provider"; RFC 8252 for native apps; RFC 9700 §4.1: exact match).
enum RedirectURIs {
    /// What may be registered: `https://` without a fragment; for public (native) clients also the
    /// loopback `http://127.0.0.1` / `http://[::1]` and a private-use scheme (`com.example.app:/cb`,
    /// RFC 8252 §7.1: a reverse domain name); in dev mode any client may register `http://127.0.0.1`
    /// or `http://localhost`. Nothing with userinfo, whitespace or a fragment.
    static func registrable(_ uri: String, isPublic: Bool, developmentMode: Bool) -> Bool {
        guard uri.utf8.count <= 2048, !uri.contains("#"), !uri.contains(where: { $0.isWhitespace || $0.asciiValue.map { $0 < 0x20 } ?? false }),
              let url = URLComponents(string: uri), let scheme = url.scheme?.lowercased() else { return false }
        if url.user != nil || url.password != nil { return false }
        switch scheme {
        case "https": return !(url.host ?? "").isEmpty
        case "http":
            let host = (url.host ?? "").lowercased()
            if isLoopbackIP(host) { return isPublic || developmentMode }
            return developmentMode && host == "localhost"
        default:
            // A private-use scheme: reverse-DNS (contains a dot), native (public) clients only.
            return isPublic && scheme.contains(".") && scheme.allSatisfy { $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "+" }
        }
    }

    static func isLoopbackIP(_ host: String) -> Bool { host == "127.0.0.1" || host == "[::1]" || host == "::1" }

    /// The registered URI `presented` names, if any: exact string match, except that a public client's
    /// loopback IP redirect matches on any port (RFC 8252 §7.3).
    static func match(_ presented: String, registered: [String], isPublic: Bool) -> String? {
        if registered.contains(presented) { return presented }
        guard isPublic, let p = URLComponents(string: presented), p.scheme == "http", isLoopbackIP(p.host ?? "") else { return nil }
        for r in registered {
            guard var reg = URLComponents(string: r), reg.scheme == "http", isLoopbackIP(reg.host ?? "") else { continue }
            var pres = p
            reg.port = nil
            pres.port = nil
            if reg.string == pres.string { return presented }
        }
        return nil
    }

    /// `uri` with `params` added to its query (RFC 6749 §4.1.2: keeping any query it has).
    static func appending(_ uri: String, _ params: [(String, String)]) -> String {
        let query = params.map { "\(formEncode($0.0))=\(formEncode($0.1))" }.joined(separator: "&")
        guard !query.isEmpty else { return uri }
        return uri + (uri.contains("?") ? "&" : "?") + query
    }
}

/// `application/x-www-form-urlencoded` encoding of one name or value.
func formEncode(_ s: String) -> String {
    var out = ""
    for b in s.utf8 {
        switch b {
        case 0x41...0x5A, 0x61...0x7A, 0x30...0x39, 0x2D, 0x2E, 0x5F, 0x7E: out.unicodeScalars.append(Unicode.Scalar(b))
        default: out += String(format: "%%%02X", b)
        }
    }
    return out
}

/// The scopes Latchkey knows (OpenID Connect Core §5.4, §11); others are ignored (§3.1.2.1).
enum Scopes {
    static let supported = ["openid", "profile", "email", "offline_access"]

    /// The known scopes of a `scope` parameter, in the order `supported` lists them.
    static func parse(_ scope: String) -> [String] {
        let asked = Set(scope.split(separator: " ").map(String.init))
        return supported.filter(asked.contains)
    }

    /// Plain words for the page (SPEC "The page": scopes in plain words).
    static func words(_ scope: String) -> String {
        switch scope {
        case "openid": "Sign you in with your Latchkey account"
        case "profile": "See your username and display name"
        case "email": "See your verified email address"
        case "offline_access": "Stay signed in when you are not using it"
        default: scope
        }
    }
}

/// RFC 9396 `authorization_details`: a JSON array of objects, each with a string `type` the
/// client may ask for.
enum AuthorizationDetails {
    static func parse(_ text: String, allowed: [String]) throws(OAuthError) -> JSONValue {
        guard text.utf8.count <= 8192, let value = try? JSONParser.parse(Array(text.utf8), maxDepth: 8), let list = value.arrayValue,
              !list.isEmpty, list.count <= 16 else {
            throw OAuthError(.invalidAuthorizationDetails, "authorization_details must be a non-empty JSON array of objects")
        }
        for entry in list {
            guard case .object = entry, let type = entry["type"]?.stringValue, !type.isEmpty else {
                throw OAuthError(.invalidAuthorizationDetails, "every authorization_details entry needs a string type")
            }
            guard allowed.contains(type) else {
                throw OAuthError(.invalidAuthorizationDetails, "the client may not ask for authorization_details of type \(type)")
            }
        }
        return value
    }
}
