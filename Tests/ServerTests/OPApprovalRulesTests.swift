import Crypto
import Foundation
import HTTP
import JSON
import PostgreSQL
import Storage
import Testing
import WebAuthnTesting
@testable import LatchkeyServer

/// SPEC "Who may approve", "Grants live and die" and "Userinfo and logout": the clauses that had no
/// test of their own, each over real HTTP and real PostgreSQL — a held passkey at the page's sign-in,
/// an email session at approve even with a step-up, and the logout confirmation, which ends the OP
/// session but no grant.
@Suite("OpenID Provider: who may approve, and what a logout ends")
struct OPApprovalRulesTests {
    static let form = "application/x-www-form-urlencoded"

    /// One server, one confidential client, and the page's requests as the browser sends them.
    struct Site {
        let server: TestServer
        let client: Client
        let clientId: String
        let basic: String
        var page: [(String, String)] { [("Origin", server.origin), ("Sec-Fetch-Site", "same-origin")] }

        init(_ name: String, configure: (inout Configuration) -> Void = { _ in }) throws {
            server = try TestServer(name: name, configure: configure)
            client = server.client()
            var registration = OAuthClientService.Registration(name: "Rules", redirectURIs: ["https://rp.example/cb"])
            registration.isPublic = false
            registration.postLogoutRedirectURIs = ["https://rp.example/bye"]
            let created = try server.services.oauthClients.add(registration, by: .named("test"))
            clientId = created.client.id
            basic = "Basic " + Base64.encodeStandard(Array("\(created.client.id):\(try #require(created.secret))".utf8))
        }

        /// A new pending request (scope `openid offline_access`): its id and PKCE verifier.
        func started() throws -> (id: String, verifier: String) {
            let verifier = Base64URL.encode(SecureRandom.bytes(32))
            let query = OpenIDProviderTests.form([
                ("response_type", "code"), ("client_id", clientId), ("redirect_uri", "https://rp.example/cb"),
                ("scope", "openid offline_access"), ("nonce", Base64URL.encode(SecureRandom.bytes(8))),
                ("code_challenge", Base64URL.encode(Digest.sha256(Array(verifier.utf8)))), ("code_challenge_method", "S256")])
            let reply = try client.get("/oauth2/authorize?" + String(decoding: query, as: UTF8.self))
            let id = try #require(URLComponents(string: reply.header("Location") ?? "")?.queryItems?.first { $0.name == "request" }?.value,
                                  "\(reply)")
            return (id, verifier)
        }

        /// The page's passkey sign-in on `requestId` (the reply, whatever it says).
        func signIn(_ requestId: String, with passkey: SoftAuthenticator) throws -> Reply {
            let view = try client.send("GET", "/v1/oauth/requests/\(requestId)", headers: [("Sec-Fetch-Site", "same-origin")])
            let assertion = try client.assertion(passkey, options: try #require(view.json?["publicKey"], "\(view)")).json()
            return try client.send("POST", "/v1/oauth/requests/\(requestId)/sign-in", body: assertion.serialized(), headers: page)
        }

        func cookie(of signedIn: Reply) throws -> String {
            try #require(signedIn.header("Set-Cookie")?.split(separator: ";").first.map(String.init), "\(signedIn)")
        }

        /// Approved by the OP cookie and exchanged: the token response.
        func grant(cookie: String) throws -> JSONValue {
            let (id, verifier) = try started()
            let approved = try client.send("POST", "/v1/oauth/requests/\(id)/approve", body: Array("{}".utf8), headers: page + [("Cookie", cookie)])
            let code = try #require(URLComponents(string: approved.json?["redirectTo"]?.stringValue ?? "")?.queryItems?.first { $0.name == "code" }?.value,
                                    "\(approved)")
            let tokens = try client.send("POST", "/oauth2/token", body: OpenIDProviderTests.form([
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", "https://rp.example/cb"), ("code_verifier", verifier)]),
                contentType: OPApprovalRulesTests.form, authorization: basic)
            #expect(tokens.status == 200, "\(tokens)")
            return try #require(tokens.json)
        }

        /// A refresh of `tokens`' grant: its status (and the rotated tokens, which replace them).
        func refresh(_ tokens: inout JSONValue) throws -> Int {
            let reply = try client.send("POST", "/oauth2/token", body: OpenIDProviderTests.form([
                ("grant_type", "refresh_token"), ("refresh_token", tokens["refresh_token"]?.stringValue ?? "")]),
                contentType: OPApprovalRulesTests.form, authorization: basic)
            if reply.status == 200, let json = reply.json { tokens = json }
            return reply.status
        }
    }

    @Test("a held passkey (added during a recovery's wait) signs in on the /authorize page → 403 recovery_pending, and no cookie is set")
    func heldPasskeyAtTheOPSignIn() throws {
        let site = try Site("op-held")
        defer { site.server.http.stop() }
        let owner = SoftAuthenticator()
        let account = try site.client.signUp(owner, username: site.server.username("held"))
        // Its hold, as a recovery or an email sign-in leaves it: approves from an hour on.
        _ = try TestDatabase.connect().execute("UPDATE credentials SET approves_from = now() + interval '1 hour' WHERE user_id = \(account.userId)")
        let (id, _) = try site.started()
        let refused = try site.signIn(id, with: owner)
        #expect(refused.status == 403 && refused.code == "recovery_pending", "\(refused)")
        #expect(refused.header("Set-Cookie") == nil, "\(refused.headers)")
        // The hold over, the same passkey signs in there.
        _ = try TestDatabase.connect().execute("UPDATE credentials SET approves_from = NULL WHERE user_id = \(account.userId)")
        let (again, _) = try site.started()
        let signedIn = try site.signIn(again, with: owner)
        #expect(signedIn.status == 200 && signedIn.header("Set-Cookie") != nil, "\(signedIn)")
    }

    @Test("an email session at approve is 403 forbidden even with a passkey step-up for exactly this request; deny it may")
    func emailSessionAtApprove() throws {
        let site = try Site("op-email")
        defer { site.server.http.stop() }
        let owner = SoftAuthenticator()
        let account = try site.client.signUp(owner, username: site.server.username("email"))
        let email = try site.server.services.sessions.startEmailSession(userId: account.userId, audit: [])
        let bearer = "Bearer \(email.accessToken)"
        let (id, _) = try site.started()
        let view = try site.client.get("/v1/oauth/requests/\(id)")
        let action = try #require(view.json?["stepUpAction"], "\(view)")
        // The email session may use a passkey step-up (SPEC "Assurance"), but approving is not its to do.
        let stepUp = try OpenIDProviderTests.passkeyStepUp(site.client, bearer: bearer, authenticator: owner, action: action)
        let bare = try site.client.post("/v1/oauth/requests/\(id)/approve", .object([]), authorization: bearer)
        #expect(bare.status == 403 && bare.code == "forbidden", "\(bare)")
        let stepped = try site.client.post("/v1/oauth/requests/\(id)/approve", .object([]), authorization: bearer, headers: [("Latchkey-Step-Up", stepUp)])
        #expect(stepped.status == 403 && stepped.code == "forbidden", "\(stepped)")
        // Nothing was used: the request is still pending, and the passkey session approves it with
        // a step-up of its own.
        #expect(try site.client.get("/v1/oauth/requests/\(id)").status == 200)
        let ownStepUp = try OpenIDProviderTests.passkeyStepUp(site.client, bearer: account.bearer, authenticator: owner, action: action)
        let approved = try site.client.post("/v1/oauth/requests/\(id)/approve", .object([]), authorization: account.bearer,
                                            headers: [("Latchkey-Step-Up", ownStepUp)])
        #expect(approved.status == 200, "\(approved)")
        // Deny is any session's, email ones included.
        let (other, _) = try site.started()
        let denied = try site.client.post("/v1/oauth/requests/\(other)/deny", .object([]), authorization: bearer)
        #expect(denied.status == 200 && denied.json?["redirectTo"]?.stringValue?.contains("error=access_denied") == true, "\(denied)")
    }

    @Test("the /oauth2/logout confirmation ends the OP session and the hinted grant only: the grants that session approved live on")
    func logoutConfirmationLeavesOtherGrants() throws {
        let site = try Site("op-logout")
        defer { site.server.http.stop() }
        let owner = SoftAuthenticator()
        _ = try site.client.signUp(owner, username: site.server.username("logout"))
        // A first OP session approves the grant whose id_token will be the hint; a second sign-in
        // replaces it, and the second session approves two more.
        let first = try site.cookie(of: try site.signIn(try site.started().id, with: owner))
        var hinted = try site.grant(cookie: first)
        let second = try site.cookie(of: try site.signIn(try site.started().id, with: owner))
        var kept = [try site.grant(cookie: second), try site.grant(cookie: second)]
        // The hint was issued for another OP session than the cookie's: the page asks first.
        let query = OpenIDProviderTests.form([("id_token_hint", hinted["id_token"]?.stringValue ?? ""),
                                              ("post_logout_redirect_uri", "https://rp.example/bye"), ("state", "out")])
        let asked = try site.client.send("GET", "/oauth2/logout?" + String(decoding: query, as: UTF8.self), headers: [("Cookie", second)])
        #expect(asked.status == 200 && asked.text.contains("data-state=\"confirm\""), "\(asked)")
        let confirmed = try site.client.send("POST", "/oauth2/logout", body: JSONValue.object([
            ("confirm", true), ("client_id", .string(site.clientId)), ("post_logout_redirect_uri", "https://rp.example/bye"), ("state", "out"),
        ]).serialized(), headers: site.page + [("Cookie", second)])
        #expect(confirmed.status == 200 && confirmed.json?["redirectTo"]?.stringValue == "https://rp.example/bye?state=out", "\(confirmed)")
        #expect(confirmed.header("Set-Cookie")?.contains("Max-Age=0") == true, "\(confirmed.headers)")
        // The OP session is over …
        let consents = try site.client.send("GET", "/v1/oauth/consents", headers: [("Sec-Fetch-Site", "same-origin"), ("Cookie", second)])
        #expect(consents.status == 401, "\(consents)")
        // … and so is the hinted grant; the two grants the ended session approved live on, refresh
        // and answer userinfo (a logout never cascades).
        #expect(try site.refresh(&hinted) == 400)
        for i in kept.indices {
            #expect(try site.refresh(&kept[i]) == 200, "grant \(i) approved by the session the logout ended")
            let info = try site.client.get("/oauth2/userinfo", authorization: "Bearer \(kept[i]["access_token"]?.stringValue ?? "")")
            #expect(info.status == 200, "\(info)")
        }
    }
}

extension RecoveryTests {
    /// SPEC "Grants live and die": a completed recovery is a security revocation. The OP browser
    /// session and the sessions it ends die, and with them every grant they approved and a code held
    /// unexchanged; the recovered account's new passkey approves anew.
    @Test("a completed recovery revokes the grants the sessions it ends approved, and a code held across it")
    func recoveryRevokesGrants() throws {
        let (server, _) = try Self.pair.get()
        let a = try account(server)
        var registration = OAuthClientService.Registration(name: "Recovered", redirectURIs: ["https://rp.example/cb"])
        registration.isPublic = false
        let created = try server.services.oauthClients.add(registration, by: .named("test"))
        let basic = "Basic " + Base64.encodeStandard(Array("\(created.client.id):\(try #require(created.secret))".utf8))
        let client = server.client()
        let page = [("Origin", server.origin), ("Sec-Fetch-Site", "same-origin")]
        func started() throws -> (id: String, verifier: String) {
            let verifier = Base64URL.encode(SecureRandom.bytes(32))
            let query = OpenIDProviderTests.form([
                ("response_type", "code"), ("client_id", created.client.id), ("redirect_uri", "https://rp.example/cb"),
                ("scope", "openid offline_access"), ("code_challenge", Base64URL.encode(Digest.sha256(Array(verifier.utf8)))),
                ("code_challenge_method", "S256")])
            let reply = try client.get("/oauth2/authorize?" + String(decoding: query, as: UTF8.self))
            return (try #require(URLComponents(string: reply.header("Location") ?? "")?.queryItems?.first { $0.name == "request" }?.value, "\(reply)"),
                    verifier)
        }
        func code(_ id: String, headers: [(String, String)], authorization: String? = nil) throws -> String {
            let approved = try client.send("POST", "/v1/oauth/requests/\(id)/approve", body: Array("{}".utf8), authorization: authorization,
                                           headers: headers)
            return try #require(URLComponents(string: approved.json?["redirectTo"]?.stringValue ?? "")?.queryItems?.first { $0.name == "code" }?.value,
                                "\(approved)")
        }
        func exchange(_ code: String, _ verifier: String) throws -> Reply {
            try client.send("POST", "/oauth2/token", body: OpenIDProviderTests.form([
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", "https://rp.example/cb"), ("code_verifier", verifier)]),
                contentType: "application/x-www-form-urlencoded", authorization: basic)
        }
        func refreshed(_ token: String) throws -> Reply {
            try client.send("POST", "/oauth2/token", body: OpenIDProviderTests.form([("grant_type", "refresh_token"), ("refresh_token", token)]),
                            contentType: "application/x-www-form-urlencoded", authorization: basic)
        }
        // Grants approved by the OP cookie and by the passkey session's Bearer with a step-up, and a
        // code approved and held.
        let first = try started()
        let view = try client.send("GET", "/v1/oauth/requests/\(first.id)", headers: [("Sec-Fetch-Site", "same-origin")])
        let assertion = try client.assertion(a.authenticator, options: try #require(view.json?["publicKey"], "\(view)")).json()
        let signedIn = try client.send("POST", "/v1/oauth/requests/\(first.id)/sign-in", body: assertion.serialized(), headers: page)
        let cookie = try #require(signedIn.header("Set-Cookie")?.split(separator: ";").first.map(String.init), "\(signedIn)")
        let byCookie = try exchange(try code(first.id, headers: page + [("Cookie", cookie)]), first.verifier)
        let bearerRequest = try started()
        let action = try #require(try client.get("/v1/oauth/requests/\(bearerRequest.id)").json?["stepUpAction"])
        let stepUp = try OpenIDProviderTests.passkeyStepUp(client, bearer: a.bearer, authenticator: a.authenticator, action: action)
        let byBearer = try exchange(try code(bearerRequest.id, headers: [("Latchkey-Step-Up", stepUp)], authorization: a.bearer), bearerRequest.verifier)
        let held = try started()
        let heldCode = try code(held.id, headers: page + [("Cookie", cookie)])
        let grants = try [byCookie, byBearer].map { try #require($0.json?["refresh_token"]?.stringValue, "\($0)") }

        // The recovery: its token registers a new passkey, which completes it.
        let recovery = try recoverByEmail(a, on: server)
        let token = try #require(recovery["recoveryToken"]?.stringValue)
        let (_, registered) = try client.register(SoftAuthenticator(), authorization: "Bearer \(token)")
        #expect(registered.status == 201, "\(registered)")

        for (i, refresh) in grants.enumerated() {
            let r = try refreshed(refresh)
            #expect(r.status == 400 && r.json?["error"]?.stringValue == "invalid_grant", "grant \(i) after the recovery: \(r)")
        }
        let late = try exchange(heldCode, held.verifier)
        #expect(late.status == 400 && late.json?["error"]?.stringValue == "invalid_grant", "the code held across the recovery: \(late)")
        let consents = try client.send("GET", "/v1/oauth/consents", headers: [("Sec-Fetch-Site", "same-origin"), ("Cookie", cookie)])
        #expect(consents.status == 401, "the OP session the recovery ended: \(consents)")
        let oauthLive = try TestDatabase.connect().query("""
            SELECT count(*)::int AS n FROM refresh_families WHERE user_id = \(a.session.userId) AND method = 'oauth' AND revoked_at IS NULL
            """)[0].int("n")
        #expect(oauthLive == 0, "\(oauthLive) oauth sessions outlived the recovery")
    }
}
