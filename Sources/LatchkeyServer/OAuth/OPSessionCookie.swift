import Foundation
import HTTP

/// The OpenID Provider's browser session cookie (SPEC "Who may approve", "The cookie routes"):
/// set by a passkey sign-in on the `/authorize` page, HttpOnly and never a bearer token. Only the
/// cookie routes read it, and only from a request that a page of the issuer's origin sent.
struct OPSessionCookie: Sendable {
    /// `__Host-latchkey-op` (Secure, no Domain, Path=/) for an https issuer; `latchkey-op` on a
    /// development `http://localhost` issuer, where a Secure cookie would never come back.
    let name: String
    let secure: Bool
    /// `scheme://host[:port]` of `LATCHKEY_ISSUER`: the one origin that may send the cookie.
    let issuerOrigin: String
    let ttlSeconds: Int

    init(issuer: String, ttlSeconds: Int) {
        let url = URLComponents(string: issuer)
        secure = url?.scheme == "https"
        name = secure ? "__Host-latchkey-op" : "latchkey-op"
        issuerOrigin = url.map { "\($0.scheme ?? "https")://\($0.host ?? "")" + ($0.port.map { ":\($0)" } ?? "") } ?? issuer
        self.ttlSeconds = ttlSeconds
    }

    /// The cookie's value as the browser sent it (RFC 6265 §5.4: `name=value` pairs split by `; `).
    func value(_ request: Request) -> String? {
        guard let header = request.header("Cookie"), header.utf8.count <= 8192 else { return nil }
        for pair in header.split(separator: ";") {
            let trimmed = pair.drop(while: { $0 == " " })
            guard let eq = trimmed.firstIndex(of: "="), trimmed[..<eq] == name[...] else { continue }
            let value = String(trimmed[trimmed.index(after: eq)...])
            return value.isEmpty ? nil : value
        }
        return nil
    }

    /// `Set-Cookie` for a new OP session (SameSite=Lax: the top-level navigation back from an app
    /// to `/oauth2/authorize` carries it; a cross-site POST does not).
    func setting(_ value: String) -> (String, String) {
        ("Set-Cookie", "\(name)=\(value); Path=/; Max-Age=\(ttlSeconds); HttpOnly; SameSite=Lax" + (secure ? "; Secure" : ""))
    }

    func clearing() -> (String, String) {
        ("Set-Cookie", "\(name)=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax" + (secure ? "; Secure" : ""))
    }

    /// SPEC "The cookie routes": a request the cookie authenticates (and every sign-in) was sent by
    /// a page of the issuer's origin. `POST`/`DELETE` carry `application/json` (415 first: a form
    /// or text/plain body is what a cross-site form can send without a preflight); `Origin` is the
    /// issuer's (a same-origin `GET` has none and says `Sec-Fetch-Site: same-origin` instead);
    /// `Sec-Fetch-Site`, when sent, is `same-origin`. Else 403 `forbidden`.
    func checkSentByIssuerPage(_ request: Request) throws(ServiceError) {
        if request.method == "POST" || request.method == "DELETE" {
            guard request.mediaType == "application/json" else {
                throw ServiceError(.unsupportedMediaType, "this route takes application/json")
            }
        }
        let site = request.header("Sec-Fetch-Site")
        if let site, site != "same-origin" { throw ServiceError(.forbidden, "the request did not come from the issuer's own page") }
        if let origin = request.header("Origin") {
            guard origin == issuerOrigin else { throw ServiceError(.forbidden, "the request did not come from the issuer's own page") }
        } else {
            guard request.method == "GET", site == "same-origin" else {
                throw ServiceError(.forbidden, "the request did not come from the issuer's own page (no Origin)")
            }
        }
    }
}
