import Crypto
import Foundation
import HTTP
import JSON
@testable import LatchkeyServer
import Storage
import Testing
import WebAuthnTesting

/// SPEC "OpenID Provider": the protocol pieces (PKCE, redirect-URI rules), and a request begun on
/// one instance finished on another (all state in PostgreSQL). Real clients (Authlib, idpyoidc)
/// run the full flows against a real server in Tests/OIDC.
@Suite("OpenID Provider")
struct OpenIDProviderTests {
    @Test("PKCE S256: RFC 7636 Appendix B, and a wrong or malformed verifier fails")
    func pkce() {
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        #expect(PKCE.isChallenge(challenge))
        #expect(PKCE.verify(verifier: verifier, challenge: challenge))
        #expect(!PKCE.verify(verifier: verifier + "A", challenge: challenge))
        #expect(!PKCE.verify(verifier: "short", challenge: challenge))
        #expect(!PKCE.verify(verifier: String(repeating: "a", count: 42) + "\u{0}", challenge: challenge))
        #expect(!PKCE.isChallenge("plain-text-challenge"))
    }

    @Test("redirect URIs: exact match; a public client's loopback matches on any port, a confidential one's does not")
    func redirectMatching() {
        let registered = ["http://127.0.0.1/callback", "https://app.example/cb"]
        #expect(RedirectURIs.match("https://app.example/cb", registered: registered, isPublic: false) == "https://app.example/cb")
        #expect(RedirectURIs.match("https://app.example/cb/", registered: registered, isPublic: false) == nil)
        #expect(RedirectURIs.match("https://app.example/cb?x=1", registered: registered, isPublic: true) == nil)
        #expect(RedirectURIs.match("http://127.0.0.1:51000/callback", registered: registered, isPublic: true) == "http://127.0.0.1:51000/callback")
        #expect(RedirectURIs.match("http://127.0.0.1:51000/callback", registered: registered, isPublic: false) == nil)
        #expect(RedirectURIs.match("http://127.0.0.1:51000/other", registered: registered, isPublic: true) == nil)
        #expect(RedirectURIs.match("http://localhost:51000/callback", registered: registered, isPublic: true) == nil)
    }

    @Test("what may be registered: https; loopback and private-use schemes for public clients; http://localhost in dev mode only")
    func registrable() {
        #expect(RedirectURIs.registrable("https://app.example/cb", isPublic: false, developmentMode: false))
        #expect(!RedirectURIs.registrable("https://app.example/cb#frag", isPublic: false, developmentMode: false))
        #expect(!RedirectURIs.registrable("https://user@app.example/cb", isPublic: false, developmentMode: false))
        #expect(!RedirectURIs.registrable("http://app.example/cb", isPublic: true, developmentMode: true))
        #expect(RedirectURIs.registrable("http://127.0.0.1/cb", isPublic: true, developmentMode: false))
        #expect(!RedirectURIs.registrable("http://127.0.0.1/cb", isPublic: false, developmentMode: false))
        #expect(RedirectURIs.registrable("http://localhost:3000/cb", isPublic: false, developmentMode: true))
        #expect(!RedirectURIs.registrable("http://localhost:3000/cb", isPublic: true, developmentMode: false))
        #expect(RedirectURIs.registrable("com.example.app:/oauth2redirect", isPublic: true, developmentMode: false))
        #expect(!RedirectURIs.registrable("com.example.app:/oauth2redirect", isPublic: false, developmentMode: false))
        #expect(!RedirectURIs.registrable("javascript:alert(1)", isPublic: true, developmentMode: true))
    }

    static func form(_ pairs: [(String, String)]) -> [UInt8] {
        Array(pairs.map { "\(formEncode($0.0))=\(formEncode($0.1))" }.joined(separator: "&").utf8)
    }

    /// A user-verified passkey step-up for `action` in the Bearer's session → the step-up token.
    static func passkeyStepUp(_ client: Client, bearer: String, authenticator: SoftAuthenticator, action: JSONValue) throws -> String {
        try client.stepUpToken(authenticator, authorization: bearer, action: action)
    }

    @Test("a request begun on one instance is approved and redeemed on another; a replayed code revokes the session it issued")
    func twoInstances() throws {
        let a = try TestServer(name: "op")
        let b = try TestServer(name: "op-b", rpIdOverride: a.rpId)
        defer { a.http.stop(); b.http.stop() }
        let owner = SoftAuthenticator()
        let session = try a.client().signUp(owner, username: a.username("op"))
        var registration = OAuthClientService.Registration(name: "Two instances", redirectURIs: ["https://rp.example/cb"])
        registration.isPublic = false
        let created = try a.services.oauthClients.add(registration, by: .named("test"))
        let secret = try #require(created.secret)
        let verifier = Base64URL.encode(SecureRandom.bytes(32))
        let challenge = Base64URL.encode(Digest.sha256(Array(verifier.utf8)))
        let query = [("response_type", "code"), ("client_id", created.client.id), ("redirect_uri", "https://rp.example/cb"),
                     ("scope", "openid offline_access"), ("state", "s1"), ("code_challenge", challenge), ("code_challenge_method", "S256")]
        let started = try a.client().get("/oauth2/authorize?" + String(decoding: Self.form(query), as: UTF8.self))
        #expect(started.status == 303)
        let location = try #require(started.header("Location"))
        let requestId = try #require(URLComponents(string: location)?.queryItems?.first { $0.name == "request" }?.value)
        // Instance B reads and approves what A stored. A Bearer token alone approves nothing (SPEC
        // "Who may approve"): it needs the step-up for exactly this request, made in its session.
        let view = try b.client().get("/v1/oauth/requests/\(requestId)")
        #expect(view.status == 200)
        let bare = try b.client().post("/v1/oauth/requests/\(requestId)/approve", .object([]), authorization: session.bearer)
        #expect(bare.status == 403 && bare.code == "step_up_required", "\(bare)")
        let action = try #require(view.json?["stepUpAction"])
        #expect(action["requestId"]?.stringValue == requestId)
        let stepUp = try Self.passkeyStepUp(b.client(), bearer: session.bearer, authenticator: owner, action: action)
        let approved = try b.client().post("/v1/oauth/requests/\(requestId)/approve", .object([]), authorization: session.bearer,
                                           headers: [("Latchkey-Step-Up", stepUp)])
        #expect(approved.status == 200, "\(approved)")
        let redirect = try #require(approved.json?["redirectTo"]?.stringValue)
        let items = URLComponents(string: redirect)?.queryItems ?? []
        #expect(items.first { $0.name == "iss" }?.value == a.origin)
        #expect(items.first { $0.name == "state" }?.value == "s1")
        let code = try #require(items.first { $0.name == "code" }?.value)
        let basic = "Basic " + Base64.encodeStandard(Array("\(created.client.id):\(secret)".utf8))
        let exchange = Self.form([("grant_type", "authorization_code"), ("code", code), ("redirect_uri", "https://rp.example/cb"),
                                  ("code_verifier", verifier)])
        let tokens = try a.client().send("POST", "/oauth2/token", body: exchange, contentType: "application/x-www-form-urlencoded", authorization: basic)
        #expect(tokens.status == 200, "\(tokens)")
        let refresh = try #require(tokens.json?["refresh_token"]?.stringValue, "\(tokens)")
        // The same code again, on the other instance: invalid_grant, and the first use's session is revoked.
        let replay = try b.client().send("POST", "/oauth2/token", body: exchange, contentType: "application/x-www-form-urlencoded", authorization: basic)
        #expect(replay.status == 400 && replay.json?["error"]?.stringValue == "invalid_grant", "\(replay)")
        let refreshed = try a.client().send("POST", "/oauth2/token", body: Self.form([("grant_type", "refresh_token"), ("refresh_token", refresh)]),
                                            contentType: "application/x-www-form-urlencoded", authorization: basic)
        #expect(refreshed.status == 400 && refreshed.json?["error"]?.stringValue == "invalid_grant", "\(refreshed)")
        // SPEC "Assurance": only a session a not-held passkey began approves; an email session is 403 forbidden.
        let again = try a.client().get("/oauth2/authorize?" + String(decoding: Self.form(query), as: UTF8.self))
        let againId = try #require(URLComponents(string: again.header("Location") ?? "")?.queryItems?.first { $0.name == "request" }?.value)
        let email = try a.services.sessions.startEmailSession(userId: session.userId, audit: [])
        let refused = try a.client().post("/v1/oauth/requests/\(againId)/approve", .object([]), authorization: "Bearer \(email.accessToken)")
        #expect(refused.status == 403 && refused.code == "forbidden", "\(refused)")
        #expect(try a.client().get("/v1/oauth/requests/\(againId)").status == 200, "a refused approval leaves the request unused")
        // An OAuth access token is not a key to Latchkey's own API.
        let oauthAccess = try #require(tokens.json?["access_token"]?.stringValue)
        #expect(try a.client().get("/v1/passkeys", authorization: "Bearer \(oauthAccess)").status == 401)
    }
}

extension OpenIDProviderTests {
    /// The pending-request limits are SPEC "Limits"' own: they held only while `LATCHKEY_RATE_LIMIT`
    /// was on, so with it off (0) every unauthenticated `/oauth2/authorize` wrote a row.
    @Test("SPEC Limits: an identical authorization request gets the same id; one address stores 30 a minute, then the styled 429 page — with LATCHKEY_RATE_LIMIT off too",
          arguments: [0, 10_000])
    func pendingRequestLimits(rateLimit: Int) throws {
        let server = try TestServer(name: "op-limits") { $0.rateLimit = rateLimit; $0.trustProxy = true }
        // An address of its own (the count is per client address across instances and tests).
        let address = "198.51.100.\(Int.random(in: 1...254))"
        defer { server.http.stop() }
        var registration = OAuthClientService.Registration(name: "Limits", redirectURIs: ["https://rp.example/cb"])
        registration.isPublic = false
        let created = try server.services.oauthClients.add(registration, by: .named("test"))
        func request(_ state: String) throws -> Reply {
            let challenge = Base64URL.encode(Digest.sha256(Array(state.utf8)))
            let query = [("response_type", "code"), ("client_id", created.client.id), ("redirect_uri", "https://rp.example/cb"),
                         ("scope", "openid"), ("state", state), ("code_challenge", challenge), ("code_challenge_method", "S256")]
            return try server.client().send("GET", "/oauth2/authorize?" + String(decoding: Self.form(query), as: UTF8.self),
                                            headers: [("Accept-Language", "pl"), ("X-Forwarded-For", address)])
        }
        let first = try request("s0")
        let again = try request("s0")
        #expect(first.status == 303 && again.status == 303 && first.header("Location") == again.header("Location"), "\(first) \(again)")
        for i in 1..<30 { #expect(try request("s\(i)").status == 303) }
        let refused = try request("s30")
        #expect(refused.status == 429 && refused.header("Retry-After") != nil && refused.header("Location") == nil, "\(refused)")
        #expect(refused.text.contains("lang=\"pl\""), "the 429 page in the browser's language")
        // The pending one is still answered with its id.
        #expect(try request("s0").header("Location") == first.header("Location"))
    }

    @Test("RFC 9126 §2.2: a pushed request is used once, even by two authorization requests at the same moment")
    func pushedRequestUsedOnceUnderRace() throws {
        let server = try TestServer(name: "op-par-race")
        defer { server.http.stop() }
        var registration = OAuthClientService.Registration(name: "PAR race", redirectURIs: ["https://rp.example/cb"])
        registration.isPublic = false
        let created = try server.services.oauthClients.add(registration, by: .named("test"))
        let basic = "Basic " + Base64.encodeStandard(Array("\(created.client.id):\(try #require(created.secret))".utf8))
        for round in 0..<8 {
            let verifier = Base64URL.encode(SecureRandom.bytes(32))
            let pushed = try server.client().send("POST", "/oauth2/par", body: Self.form([
                ("response_type", "code"), ("client_id", created.client.id), ("redirect_uri", "https://rp.example/cb"),
                ("scope", "openid"), ("state", "r\(round)"), ("code_challenge", Base64URL.encode(Digest.sha256(Array(verifier.utf8)))),
                ("code_challenge_method", "S256")]), contentType: "application/x-www-form-urlencoded", authorization: basic)
            let uri = try #require(pushed.json?["request_uri"]?.stringValue, "\(pushed)")
            let path = "/oauth2/authorize?" + String(decoding: Self.form([("client_id", created.client.id), ("request_uri", uri)]), as: UTF8.self)
            let statuses = ConcurrentResults()
            DispatchQueue.concurrentPerform(iterations: 2) { _ in
                statuses.append((try? server.client().get(path).status) ?? 0)
            }
            #expect(statuses.values.sorted() == [303, 400], "round \(round): \(statuses.values)")
            #expect(try server.client().get(path).status == 400, "and never again")
        }
    }
}


extension OpenIDProviderTests {
    /// The hole: with another web origin allowlisted before the issuer's, `/oauth2/authorize` sent
    /// the browser to that origin's `/authorize`, whose sign-in then carried the wrong `Origin`
    /// and was refused 403. SPEC "OpenID Provider": the page is served on the issuer's origin.
    @Test("the /authorize page is on the issuer's origin, not the first of LATCHKEY_ORIGINS, and its sign-in works there")
    func authorizePageOnTheIssuersOrigin() throws {
        var appOrigin = ""
        let server = try TestServer(name: "op-page-origin") { c in
            appOrigin = "https://app.\(c.rpId)"
            c.origins = [appOrigin, c.issuer]
        }
        defer { server.http.stop() }
        #expect(server.configuration.origins.first == appOrigin && server.configuration.issuer == server.origin)
        let client = server.client()
        let owner = SoftAuthenticator()
        _ = try client.signUp(owner, username: server.username("page"))
        var registration = OAuthClientService.Registration(name: "Page origin", redirectURIs: ["https://rp.example/cb"])
        registration.isPublic = false
        let created = try server.services.oauthClients.add(registration, by: .named("test"))
        let verifier = Base64URL.encode(SecureRandom.bytes(32))
        let query = Self.form([("response_type", "code"), ("client_id", created.client.id), ("redirect_uri", "https://rp.example/cb"),
                               ("scope", "openid"), ("code_challenge", Base64URL.encode(Digest.sha256(Array(verifier.utf8)))),
                               ("code_challenge_method", "S256")])
        let started = try client.get("/oauth2/authorize?" + String(decoding: query, as: UTF8.self))
        let location = try #require(started.header("Location"), "\(started)")
        #expect(started.status == 303 && location.hasPrefix(server.origin + "/authorize?request="), "\(location)")
        #expect(!location.hasPrefix(appOrigin), "sent to the first allowlisted origin: \(location)")
        let page = try #require(URLComponents(string: location))
        let pageOrigin = "\(page.scheme ?? "")://\(page.host ?? "")" + (page.port.map { ":\($0)" } ?? "")
        let requestId = try #require(page.queryItems?.first { $0.name == "request" }?.value)
        // The page's own fetches, from the origin it was loaded on: view, sign-in, approve.
        let sent = [("Origin", pageOrigin), ("Sec-Fetch-Site", "same-origin")]
        let view = try client.send("GET", "/v1/oauth/requests/\(requestId)", headers: [("Sec-Fetch-Site", "same-origin")])
        #expect(view.status == 200, "\(view)")
        let assertion = try client.assertion(owner, options: try #require(view.json?["publicKey"])).json()
        let signedIn = try client.send("POST", "/v1/oauth/requests/\(requestId)/sign-in", body: assertion.serialized(), headers: sent)
        #expect(signedIn.status == 200, "the page's sign-in on \(pageOrigin): \(signedIn)")
        let cookie = try #require(signedIn.header("Set-Cookie")?.split(separator: ";").first.map(String.init), "\(signedIn)")
        let approved = try client.send("POST", "/v1/oauth/requests/\(requestId)/approve", body: Array("{}".utf8), headers: sent + [("Cookie", cookie)])
        #expect(approved.status == 200 && approved.json?["redirectTo"]?.stringValue?.hasPrefix("https://rp.example/cb?code=") == true, "\(approved)")
        // The first allowlisted origin's page would have been refused: the cookie routes take the issuer's origin only.
        let elsewhere = try client.send("POST", "/v1/oauth/requests/\(requestId)/sign-in", body: assertion.serialized(),
                                        headers: [("Origin", appOrigin), ("Sec-Fetch-Site", "same-origin")])
        #expect(elsewhere.status == 403, "\(elsewhere)")
    }
}
