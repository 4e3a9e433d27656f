import Crypto
import Foundation
import HTTP
import JSON
import PostgreSQL
import Storage
import Testing
import WebAuthnTesting
@testable import LatchkeyServer

/// ARCHITECTURE.md "Revocation cascades": what dies with a revoked passkey, counted. One account
/// with two passkeys; the first begins sessions, an OP browser session, an OAuth grant (and a code
/// held unexchanged) and approves a step-up not yet used; then the second revokes it. Everything the
/// first began or approved is dead, and nothing of the second's.
@Suite("Revoking a passkey: what dies with it, counted")
struct RevocationCascadeTests {
    static let form = "application/x-www-form-urlencoded"

    /// The account's refresh families by who began them: `(dead, live)` for `credential`, and the
    /// `oauth` families (their grants' approver is in `oauth_grants`) by whether they live.
    static func families(userId: String, credential: [UInt8]) throws -> (deadOfPasskey: Int, liveOfPasskey: Int, deadOAuth: Int, liveOAuth: Int) {
        let row = try TestDatabase.connect().query("""
            SELECT count(*) FILTER (WHERE credential_id = \(credential) AND revoked_at IS NOT NULL)::int AS dead_passkey,
                   count(*) FILTER (WHERE credential_id = \(credential) AND revoked_at IS NULL)::int AS live_passkey,
                   count(*) FILTER (WHERE method = 'oauth' AND revoked_at IS NOT NULL)::int AS dead_oauth,
                   count(*) FILTER (WHERE method = 'oauth' AND revoked_at IS NULL)::int AS live_oauth
            FROM refresh_families WHERE user_id = \(userId)
            """)[0]
        return (try row.int("dead_passkey"), try row.int("live_passkey"), try row.int("dead_oauth"), try row.int("live_oauth"))
    }

    @Test("a revoked passkey ends its sessions, its OP browser session, the grants and codes it approved and its unused step-up; the other's stand")
    func passkeyRevocation() throws {
        let server = try TestServer(name: "cascade")
        defer { server.http.stop() }
        let client = server.client()
        let first = SoftAuthenticator(), second = SoftAuthenticator()
        let signedUp = try client.signUp(first, username: server.username("cascade"))
        let (_, added) = try client.register(second, authorization: signedUp.bearer, approver: first)
        #expect(added.status == 201, "\(added)")
        let ofSecond = try client.signIn(second)
        let ofFirst = [signedUp, try client.signIn(first), try client.signIn(first)]

        // An OAuth client; the first passkey signs in on the issuer's page and approves two requests
        // with offline_access: one code is exchanged (a grant), one is held.
        var registration = OAuthClientService.Registration(name: "Cascade", redirectURIs: ["https://rp.example/cb"])
        registration.isPublic = false
        let created = try server.services.oauthClients.add(registration, by: .named("test"))
        let basic = "Basic " + Base64.encodeStandard(Array("\(created.client.id):\(try #require(created.secret))".utf8))
        var cookie: String? = nil
        func approvedCode() throws -> (code: String, verifier: String) {
            let verifier = Base64URL.encode(SecureRandom.bytes(32))
            let challenge = Base64URL.encode(Digest.sha256(Array(verifier.utf8)))
            let started = try client.get("/oauth2/authorize?response_type=code&client_id=\(created.client.id)"
                                         + "&redirect_uri=https%3A%2F%2Frp.example%2Fcb&scope=openid%20offline_access"
                                         + "&code_challenge=\(challenge)&code_challenge_method=S256")
            let requestId = try #require(URLComponents(string: started.header("Location") ?? "")?.queryItems?.first { $0.name == "request" }?.value,
                                         "\(started)")
            let page = [("Origin", server.origin), ("Sec-Fetch-Site", "same-origin")]
            if cookie == nil {
                let view = try client.send("GET", "/v1/oauth/requests/\(requestId)", headers: [("Sec-Fetch-Site", "same-origin")])
                let assertion = try client.assertion(first, options: try #require(view.json?["publicKey"])).json()
                let signedIn = try client.send("POST", "/v1/oauth/requests/\(requestId)/sign-in", body: assertion.serialized(), headers: page)
                #expect(signedIn.status == 200, "\(signedIn)")
                cookie = signedIn.header("Set-Cookie")?.split(separator: ";").first.map(String.init)
            }
            let approved = try client.send("POST", "/v1/oauth/requests/\(requestId)/approve", body: Array("{}".utf8),
                                           headers: page + [("Cookie", try #require(cookie))])
            #expect(approved.status == 200, "\(approved)")
            let code = try #require(URLComponents(string: approved.json?["redirectTo"]?.stringValue ?? "")?.queryItems?.first { $0.name == "code" }?.value)
            return (code, verifier)
        }
        func exchange(_ code: String, _ verifier: String) throws -> Reply {
            try client.send("POST", "/oauth2/token", body: OpenIDProviderTests.form([
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", "https://rp.example/cb"), ("code_verifier", verifier)]),
                contentType: Self.form, authorization: basic)
        }
        let granted = try approvedCode()
        let tokens = try exchange(granted.code, granted.verifier)
        #expect(tokens.status == 200, "\(tokens)")
        let refreshToken = try #require(tokens.json?["refresh_token"]?.stringValue)
        let held = try approvedCode()
        // A step-up the first passkey made, not yet used.
        let unusedStepUp = try client.stepUpToken(first, authorization: ofSecond.bearer, action: Client.passkeyAddition)

        let userId = signedUp.userId
        let before = try Self.families(userId: userId, credential: first.credentialId)
        // The first passkey's three sessions, its OP browser session and the grant's family (which
        // names the passkey of the session that approved it); one live grant.
        #expect(before.deadOfPasskey == 0 && before.liveOfPasskey == 5, "\(before)")
        #expect(before.liveOAuth == 1 && before.deadOAuth == 0, "\(before)")

        let revoked = try client.revokePasskey(first.credentialId, authorization: ofSecond.bearer, approver: second)
        #expect(revoked.status == 200, "\(revoked)")

        // Counted: every family the first passkey began, and the grant it approved, died.
        let after = try Self.families(userId: userId, credential: first.credentialId)
        #expect(after.deadOfPasskey == 5 && after.liveOfPasskey == 0, "\(after)")
        #expect(after.deadOAuth == 1 && after.liveOAuth == 0, "\(after)")
        // And each is refused where it would be used.
        for session in ofFirst {
            #expect(try client.get("/v1/passkeys", authorization: session.bearer).status == 401)
        }
        let refreshed = try client.send("POST", "/oauth2/token", body: OpenIDProviderTests.form([("grant_type", "refresh_token"), ("refresh_token", refreshToken)]),
                                        contentType: Self.form, authorization: basic)
        #expect(refreshed.status == 400 && refreshed.json?["error"]?.stringValue == "invalid_grant", "\(refreshed)")
        let heldExchange = try exchange(held.code, held.verifier)
        #expect(heldExchange.status == 400 && heldExchange.json?["error"]?.stringValue == "invalid_grant", "\(heldExchange)")
        let options = try client.post("/v1/passkeys/registration/options", .object([]), authorization: ofSecond.bearer,
                                      headers: [("Latchkey-Step-Up", unusedStepUp)])
        #expect(options.status == 403 && options.code == "step_up_required", "\(options)")
        // The second passkey's session stands.
        #expect(try client.get("/v1/passkeys", authorization: ofSecond.bearer).status == 200)
        let survivors = try Self.families(userId: userId, credential: second.credentialId)
        #expect(survivors.liveOfPasskey == 2, "the second passkey's registration and sign-in sessions: \(survivors)")
    }
}
