import Crypto
import Foundation
import HTTP
import JSON
import Storage
import Testing
import WebAuthnTesting
@testable import LatchkeyServer

/// SPEC "The cookie routes": the OP session cookie is accepted on the /authorize page's routes alone.
/// A real cookie (from a passkey sign-in on a request) is sent alone, from the issuer's own origin,
/// to every other route of the table that needs a caller: each answers 401, as without it.
@Suite("OP session cookie: no key anywhere else")
struct OPCookieTests {
    /// The routes whose guard reads the cookie (`Access.approver`, `.sessionOrBrowser`, `.anyoneOrBrowser`).
    static let cookieAccess: Set<String> = ["approver", "session-or-browser", "anyone-or-browser"]

    @Test("the cookie alone, from the issuer's page, is 401 on every route that needs a caller and does not read it")
    func cookieAloneElsewhere() throws {
        let server = try TestServer(name: "op-cookie")
        defer { server.http.stop() }
        let client = server.client()
        let owner = SoftAuthenticator()
        _ = try client.signUp(owner, username: server.username("cookie"))
        var registration = OAuthClientService.Registration(name: "Cookie", redirectURIs: ["https://rp.example/cb"])
        registration.isPublic = false
        let created = try server.services.oauthClients.add(registration, by: .named("test"))
        let challenge = Base64URL.encode(Digest.sha256(Array("cookie-verifier-cookie-verifier-cookie-verifier".utf8)))
        let started = try client.get("/oauth2/authorize?response_type=code&client_id=\(created.client.id)&redirect_uri=https%3A%2F%2Frp.example%2Fcb"
                                     + "&scope=openid&code_challenge=\(challenge)&code_challenge_method=S256")
        let requestId = try #require(URLComponents(string: started.header("Location") ?? "")?.queryItems?.first { $0.name == "request" }?.value,
                                     "\(started)")
        let view = try client.send("GET", "/v1/oauth/requests/\(requestId)", headers: [("Sec-Fetch-Site", "same-origin")])
        let assertion = try client.assertion(owner, options: try #require(view.json?["publicKey"])).json()
        let page = [("Origin", server.origin), ("Sec-Fetch-Site", "same-origin")]
        let signedIn = try client.send("POST", "/v1/oauth/requests/\(requestId)/sign-in", body: assertion.serialized(), headers: page)
        #expect(signedIn.status == 200, "\(signedIn)")
        let setCookie = try #require(signedIn.header("Set-Cookie"))
        #expect(setCookie.contains("HttpOnly") && setCookie.contains("Path=/") && setCookie.contains("SameSite=Lax"), "\(setCookie)")
        let cookie = try #require(setCookie.split(separator: ";").first.map(String.init))
        // The cookie works where it should: the consents of its account.
        let consents = try client.send("GET", "/v1/oauth/consents", headers: [("Sec-Fetch-Site", "same-origin"), ("Cookie", cookie)])
        #expect(consents.status == 200, "\(consents)")

        // Every access kind that needs a caller, not only the Bearer ones: passkey sessions (quorum
        // approvals) too. Registration and the open routes take anyone, and are walked below.
        let guards = Application(services: server.services).guards.filter { $0.enabled && !Self.cookieAccess.contains($0.access) }
        let open: Set<String> = ["anyone", "registration-verify", "registration"]
        // The OAuth endpoints' callers are clients and their tokens, refused in RFC 6749/6750's words (below).
        let oauth: Set<String> = ["oauth-client", "oauth-bearer"]
        var walked: [String: Int] = [:]
        for g in guards where !open.contains(g.access) && !oauth.contains(g.access) {
            let target = RouteGuardTests.target(g.pattern, "AAAAAAAAAAAAAAAAAAAAAA")
            let body = ["POST", "PUT", "PATCH"].contains(g.method) ? Array("{}".utf8) : []
            let reply = try client.send(g.method, target, body: body, headers: page + [("Cookie", cookie)])
            #expect(reply.status == 401 && reply.code == "unauthorized", "\(g.method) \(g.pattern) (\(g.access)) with the OP cookie alone: \(reply)")
            walked[g.access, default: 0] += 1
        }
        #expect(walked.values.reduce(0, +) > 30, "\(walked) routes walked")
        for kind in ["session", "passkey-session", "admin", "step-up-token"] { #expect(walked[kind, default: 0] > 0, "no \(kind) route walked: \(walked)") }
        // Registration options take anyone (a new account): the cookie alone is nobody, never its
        // account adding a passkey — a body without a username is refused as it is without the cookie.
        for g in guards where g.access == "registration" {
            let target = RouteGuardTests.target(g.pattern, "AAAAAAAAAAAAAAAAAAAAAA")
            let anonymous = try client.send(g.method, target, body: Array("{}".utf8), headers: page)
            let withCookie = try client.send(g.method, target, body: Array("{}".utf8), headers: page + [("Cookie", cookie)])
            #expect(withCookie.status == anonymous.status && withCookie.status == 400 && withCookie.code == anonymous.code,
                    "\(g.method) \(g.pattern) with the OP cookie alone: \(withCookie), without: \(anonymous)")
            walked[g.access, default: 0] += 1
        }
        #expect(walked["registration", default: 0] > 0, "no registration route walked: \(walked)")
        // The cookie is no client authentication (RFC 6749 §5.2 invalid_client) and no access token (RFC 6750 §3.1).
        for g in guards where oauth.contains(g.access) {
            let form = [("Content-Type", "application/x-www-form-urlencoded")]
            let reply = try client.send(g.method, g.pattern, body: g.method == "POST" ? Array("token=x&grant_type=refresh_token&refresh_token=x".utf8) : [],
                                        headers: page + form + [("Cookie", cookie)])
            let error = reply.json?["error"]?.stringValue
            #expect(reply.status == 401 && error == (g.access == "oauth-client" ? "invalid_client" : "invalid_token"),
                    "\(g.method) \(g.pattern) (\(g.access)) with the OP cookie alone: \(reply)")
            walked[g.access, default: 0] += 1
        }
        for kind in oauth { #expect(walked[kind, default: 0] > 0, "no \(kind) route walked: \(walked)") }
        // Nor does it stand in for a Bearer at the token refresh or userinfo.
        let refresh = try client.send("POST", "/v1/token", body: Array(#"{"grant_type":"refresh_token","refresh_token":"x"}"#.utf8),
                                      headers: page + [("Cookie", cookie)])
        #expect(refresh.status == 400 || refresh.status == 401, "\(refresh)")
        let info = try client.send("GET", "/oauth2/userinfo", headers: page + [("Cookie", cookie)])
        #expect(info.status == 401, "\(info)")

        // The second listener (LATCHKEY_ADMIN_LISTEN): the cookie alone is nobody there either —
        // 401 on every route it serves that needs a caller (the admin API, the console's step-up),
        // and the cookie routes are not served there at all.
        let admin = try HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threadPoolSize: 2, connectionTimeoutSeconds: 30,
                                                        connectionLimit: 64, maxBodyBytes: server.configuration.maxBody),
                                   responder: Application(services: server.services).serving(.adminOnly))
        defer { admin.stop() }
        let onAdmin = Client(Endpoint(port: admin.port, rpId: server.rpId, origin: server.origin, adminKey: nil))
        var served = 0
        for g in Application(services: server.services).guards where g.enabled && !open.contains(g.access) {
            let target = RouteGuardTests.target(g.pattern, "AAAAAAAAAAAAAAAAAAAAAA")
            let body = ["POST", "PUT", "PATCH", "DELETE"].contains(g.method) ? Array("{}".utf8) : []
            let reply = try onAdmin.send(g.method, target, body: body, headers: page + [("Cookie", cookie)])
            if Self.cookieAccess.contains(g.access) {
                if !Application.consolePaths.contains(g.pattern) {
                    #expect(reply.status == 404, "a cookie route on the admin listener: \(g.method) \(g.pattern) \(reply)")
                }
            } else if g.pattern.hasPrefix("/admin/") || reply.status != 404 {
                #expect(reply.status == 401 && reply.code == "unauthorized",
                        "admin listener: \(g.method) \(g.pattern) (\(g.access)) with the OP cookie alone: \(reply)")
                served += 1
            }
        }
        #expect(served > 10, "\(served) routes of the admin listener walked")
    }
}
