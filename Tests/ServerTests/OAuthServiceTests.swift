import Crypto
import DeviceKeys
import HTTP
import Foundation
import JSON
@testable import LatchkeyServer
@testable import Storage
import Testing
import Tokens

/// The OpenID Provider's decisions over the in-memory OAuth store (`OAuthWorld`): no socket, no
/// PostgreSQL. The HTTP suites (OpenIDProviderTests, OAuthRoundTripTests, the OIDC clients) keep
/// the same flows against the real server.
@Suite("OpenID Provider, in memory")
struct OAuthServiceTests {
    // MARK: Authorization requests and PAR

    @Test("a valid request goes to the page under an id derived from it: the same request finds its pending row")
    func authorizeStoresOnce() throws {
        let w = try OAuthWorld()
        let c = try w.client()
        let first = try w.requestId(w.authorize(w.parameters(c)))
        let again = try w.requestId(w.authorize(w.parameters(c)))
        #expect(first == again)
        #expect(w.oauth.snapshot.requests.count == 1)
        let stored = try #require(try w.provider.pendingRequest(first))
        #expect(stored.clientId == c.id)
        #expect(stored.params["code_challenge"]?.stringValue == OAuthWorld.challenge)
    }

    @Test("what cannot be redirected is a page; what can is a redirect with the error and state")
    func authorizeRefusals() throws {
        let w = try OAuthWorld()
        let c = try w.client(public: true)
        guard case .page(.unknownClient, _, 400, _, _) = w.authorize([("client_id", "lkc_nobody"), ("redirect_uri", OAuthWorld.redirectURI)]) else {
            Issue.record("an unknown client is told on a page")
            return
        }
        guard case .page(.unregisteredRedirectURI, _, _, _, _) = w.authorize([("client_id", c.id), ("redirect_uri", "https://evil.example/cb")]) else {
            Issue.record("an unregistered redirect URI is told on a page")
            return
        }
        // A public client must send PKCE.
        guard case .redirect(let location, _) = w.authorize(w.parameters(c, pkce: false)) else {
            Issue.record("a request without PKCE is redirected back with its error")
            return
        }
        #expect(try OAuthWorld.query(location, "error") == "invalid_request")
        #expect(try OAuthWorld.query(location, "state") == "st-1")
        #expect(try OAuthWorld.query(location, "iss") == w.policy.issuer)
        #expect(w.oauth.snapshot.requests.isEmpty)
    }

    @Test("a pushed request stands for its parameters once, and not after it expires")
    func pushedRequestOnce() throws {
        let w = try OAuthWorld()
        let c = try w.client()
        let pushed = try w.provider.pushed(w.request(c, w.parameters(c), at: .par))
        let uri = try #require(pushed["request_uri"]?.stringValue)
        #expect(pushed["expires_in"]?.doubleValue == 600)
        let id = try w.requestId(w.authorize([("client_id", c.id), ("request_uri", uri)]))
        #expect(try w.provider.pendingRequest(id)?.params["pushed"] == .bool(true))
        guard case .page(.requestURIUnknown, _, _, _, _) = w.authorize([("client_id", c.id), ("request_uri", uri)]) else {
            Issue.record("a request_uri is used once (RFC 9126 §2.2)")
            return
        }
        let late = try #require(try w.provider.pushed(w.request(c, w.parameters(c, extra: [("login_hint", "x")]), at: .par))["request_uri"]?.stringValue)
        w.clock.advance(Double(w.policy.pushedTTL) + 1)
        guard case .page(.requestURIUnknown, _, _, _, _) = w.authorize([("client_id", c.id), ("request_uri", late)]) else {
            Issue.record("an expired request_uri stands for nothing")
            return
        }
    }

    @Test("a pending request expires with its lifetime, and its approval then finds nothing")
    func requestExpires() throws {
        let w = try OAuthWorld()
        let c = try w.client()
        let alice = try w.person("alice")
        let id = try w.requestId(w.authorize(w.parameters(c)))
        w.clock.advance(Double(w.policy.requestTTL) + 1)
        #expect(try w.provider.pendingRequest(id) == nil)
        expectRefusal(.notFound) { try w.approve(id, by: alice) }
    }

    // MARK: Codes

    @Test("approve → code → tokens: the grant, its refresh token, the consent and the audit line")
    func codeFlow() throws {
        let w = try OAuthWorld()
        let c = try w.client()
        let alice = try w.person("alice", email: "alice@example.com")
        let code = try w.code(c, by: alice)
        let tokens = try w.exchange(c, code: code)
        #expect(tokens["token_type"]?.stringValue == "Bearer")
        #expect(tokens["refresh_token"]?.stringValue?.hasPrefix("lkor_") == true)
        let idToken = try #require(tokens["id_token"]?.stringValue)
        let claims = try #require(try w.provider.verifiedIdToken(idToken))
        #expect(claims["sub"]?.stringValue == alice.id)
        #expect(claims["nonce"]?.stringValue == "n-1")
        #expect(claims["aud"]?.stringValue == c.id)
        // The grant's OAuth session names its approvers: the cookie's session and its passkey.
        let grant = try #require(w.oauth.snapshot.grants.values.first)
        #expect(grant.approvers == .init(family: alice.browserSession, credential: Base64URL.encode(alice.passkey), deviceKey: nil))
        let consents = try w.provider.consents(userId: alice.id)["consents"]?.arrayValue ?? []
        #expect(consents.first?["clientId"]?.stringValue == c.id)
        #expect(w.tables.snapshot.audit.contains { $0.action == AuditAction.oauthTokenIssued.rawValue && $0.subject == alice.id })
    }

    @Test("a code used twice: refused, and what its first use issued is revoked")
    func codeReplay() throws {
        let w = try OAuthWorld()
        let c = try w.client()
        let alice = try w.person("alice")
        let code = try w.code(c, by: alice)
        let tokens = try w.exchange(c, code: code)
        let replay = oauthError { () throws(OAuthError) in try w.exchange(c, code: code) }
        #expect(replay?.error == "invalid_grant")
        #expect(replay?.description.contains("already used") == true)
        #expect(oauthError { () throws(OAuthError) in try w.refresh(c, tokens["refresh_token"]) }?.error == "invalid_grant")
        #expect(oauthError { () throws(OAuthError) in try w.userinfo(accessToken: tokens["access_token"]?.stringValue) }?.error
            == "invalid_token")
        #expect(w.tables.snapshot.audit.contains { $0.action == AuditAction.oauthCodeReplayed.rawValue })
    }

    @Test("the PKCE verifier and redirect_uri are checked with the code, and a refused code stays used")
    func codeChecks() throws {
        let w = try OAuthWorld()
        let c = try w.client()
        let alice = try w.person("alice")
        let wrongVerifier = oauthError { () throws(OAuthError) in
            try w.exchange(c, code: try! w.code(c, by: alice), verifier: "other-" + String(repeating: "v", count: 40))
        }
        #expect(wrongVerifier?.error == "invalid_grant")
        #expect(wrongVerifier?.description.contains("code_verifier") == true)
        let code = try w.code(c, by: alice, scope: "openid")
        let wrongRedirect = oauthError { () throws(OAuthError) in try w.exchange(c, code: code, redirectURI: "https://app.example/other") }
        #expect(wrongRedirect?.description.contains("redirect_uri") == true)
        // Refused once, the code is used: the right presentation now is a replay.
        #expect(oauthError { () throws(OAuthError) in try w.exchange(c, code: code) }?.description.contains("already used") == true)
        let noVerifier = try w.code(c, by: alice, scope: "openid profile")
        #expect(oauthError { () throws(OAuthError) in try w.exchange(c, code: noVerifier, verifier: nil) }?.error == "invalid_grant")
    }

    @Test("a code expires, and is another client's to no one")
    func codeExpiryAndClient() throws {
        let w = try OAuthWorld()
        let c = try w.client()
        let other = try w.client(name: "Other app")
        let alice = try w.person("alice")
        let stolen = try w.code(c, by: alice)
        #expect(oauthError { () throws(OAuthError) in try w.exchange(other, code: stolen) }?.description.contains("another client") == true)
        let late = try w.code(c, by: alice, scope: "openid")
        w.clock.advance(Double(w.policy.codeTTL) + 1)
        #expect(oauthError { () throws(OAuthError) in try w.exchange(c, code: late) }?.description.contains("expired") == true)
    }

    @Test("a code dies with its approving session: a security revocation refuses it, a logout does not")
    func codeDiesWithApprover() throws {
        let w = try OAuthWorld()
        let c = try w.client()
        let alice = try w.person("alice")
        let code = try w.code(c, by: alice)
        try w.oauth.revokeSession(alice.browserSession)
        let refused = oauthError { () throws(OAuthError) in try w.exchange(c, code: code) }
        #expect(refused?.error == "invalid_grant")
        #expect(refused?.description.contains("revoked") == true)
        #expect(w.oauth.snapshot.grants.isEmpty)

        let bob = try w.person("bob")
        let bobs = try w.code(c, by: bob)
        #expect(try w.provider.endBrowserSessionForTest(bob.browserSession))
        #expect(try w.exchange(c, code: bobs)["access_token"] != nil)
    }

    // MARK: Grants and refresh tokens

    @Test("a refresh token rotates once: the new one works, the old one presented again revokes the family")
    func refreshRotationAndReuse() throws {
        let w = try OAuthWorld()
        let c = try w.client()
        let alice = try w.person("alice")
        let first = try w.exchange(c, code: try w.code(c, by: alice))
        let second = try w.refresh(c, first["refresh_token"])
        #expect(second["refresh_token"] != first["refresh_token"])
        #expect(second["id_token"] != nil)
        let third = try w.refresh(c, second["refresh_token"])
        let reuse = oauthError { () throws(OAuthError) in try w.refresh(c, first["refresh_token"]) }
        #expect(reuse?.description.contains("reuse") == true)
        #expect(oauthError { () throws(OAuthError) in try w.refresh(c, third["refresh_token"]) }?.error == "invalid_grant")
        #expect(w.tables.snapshot.audit.contains { $0.action == AuditAction.refreshReuseDetected.rawValue && $0.subject == c.id })
    }

    @Test("a refresh may narrow the scope, never widen it; a refused one leaves the token as it was")
    func refreshScope() throws {
        let w = try OAuthWorld()
        let c = try w.client()
        let alice = try w.person("alice")
        let tokens = try w.exchange(c, code: try w.code(c, by: alice, scope: "openid profile offline_access"))
        #expect(oauthError { () throws(OAuthError) in try w.refresh(c, tokens["refresh_token"], scope: "openid email") }?.error == "invalid_scope")
        let narrowed = try w.refresh(c, tokens["refresh_token"], scope: "profile")
        #expect(narrowed["scope"]?.stringValue == "profile")
        #expect(narrowed["id_token"] == nil)
        // Another client cannot use it at all.
        let other = try w.client(name: "Other app")
        #expect(oauthError { () throws(OAuthError) in try w.refresh(other, narrowed["refresh_token"]) }?.error == "invalid_grant")
    }

    @Test("a grant dies with the passkey that approved it")
    func grantDiesWithPasskey() throws {
        let w = try OAuthWorld()
        let c = try w.client()
        let alice = try w.person("alice")
        let tokens = try w.exchange(c, code: try w.code(c, by: alice))
        try w.oauth.revokePasskey(alice.passkey)
        #expect(oauthError { () throws(OAuthError) in try w.refresh(c, tokens["refresh_token"]) }?.error == "invalid_grant")
    }

    @Test("a Bearer approval with a device-key step-up: the step-up is used once, and the grant dies with the key")
    func deviceKeyApproval() throws {
        let w = try OAuthWorld()
        let c = try w.client()
        let alice = try w.person("alice")
        try w.oauth.addSession("app-session", userId: alice.id, credentialId: alice.passkey)
        w.oauth.addDeviceKey("phone-1")
        let id = try w.requestId(w.authorize(w.parameters(c)))
        let action = try OpenIDProvider.stepUpAction(clientId: c.id, requestId: id, details: .null)
        let redemption = StepUpRedemption(jti: "jti-1", userId: alice.id, actionHash: action.hash)
        w.oauth.addStepUp(redemption, method: "device-key", keyId: "phone-1")
        let caller = SessionService.Caller(userId: alice.id, sessionId: "app-session")
        // Without the step-up a Bearer caller approves nothing.
        expectRefusal(.stepUpRequired) { try w.provider.approve(id, caller: caller, viaCookie: false, approval: nil, read: nil) }
        let approval = Approval.stepUp(redemption, receiptId: "rcpt-1", authentication: .deviceKeyAttested)
        let answer = try w.provider.approve(id, caller: caller, viaCookie: false, approval: approval, read: nil)
        let tokens = try w.exchange(c, code: try OAuthWorld.query(try #require(answer["redirectTo"]?.stringValue), "code"))
        #expect(w.oauth.snapshot.grants.values.first?.approvers == .init(family: "app-session", credential: nil, deviceKey: "phone-1"))
        // The same step-up on another request is refused.
        let second = try w.requestId(w.authorize(w.parameters(c, extra: [("login_hint", "again")])))
        expectRefusal(.stepUpRequired) { try w.provider.approve(second, caller: caller, viaCookie: false, approval: approval, read: nil) }
        try w.oauth.revokeDeviceKey("phone-1")
        #expect(oauthError { () throws(OAuthError) in try w.refresh(c, tokens["refresh_token"]) }?.error == "invalid_grant")
    }

    @Test("deny uses the request up and sends access_denied back")
    func deny() throws {
        let w = try OAuthWorld()
        let c = try w.client()
        let alice = try w.person("alice")
        let id = try w.requestId(w.authorize(w.parameters(c)))
        let (caller, _) = try #require(try w.provider.caller(cookie: alice.cookie))
        let answer = try w.provider.deny(id, caller: caller, read: nil)
        let target = try #require(answer["redirectTo"]?.stringValue)
        #expect(try OAuthWorld.query(target, "error") == "access_denied")
        #expect(try OAuthWorld.query(target, "state") == "st-1")
        expectRefusal(.notFound) { try w.approve(id, by: alice) }
        #expect(w.oauth.snapshot.codes.isEmpty)
    }

    // MARK: Consents, silent sign-in, userinfo, revoke, logout

    @Test("consents are remembered by approval, answer prompt=none, and are forgotten on request")
    func consentsAndSilentSignIn() throws {
        let w = try OAuthWorld()
        let c = try w.client()
        let alice = try w.person("alice")
        let silent = w.parameters(c, scope: "openid profile", extra: [("prompt", "none")])
        guard case .redirect(let before, _) = w.authorize(silent, cookie: alice.cookie) else { throw OAuthWorld.Failure("no redirect") }
        #expect(try OAuthWorld.query(before, "error") == "consent_required")
        _ = try w.code(c, by: alice, scope: "openid profile email")
        guard case .redirect(let after, _) = w.authorize(silent, cookie: alice.cookie) else { throw OAuthWorld.Failure("no redirect") }
        #expect(try w.exchange(c, code: try OAuthWorld.query(after, "code"))["id_token"] != nil)
        guard case .redirect(let noCookie, _) = w.authorize(silent) else { throw OAuthWorld.Failure("no redirect") }
        #expect(try OAuthWorld.query(noCookie, "error") == "login_required")

        let listed = try w.provider.consents(userId: alice.id)["consents"]?.arrayValue ?? []
        #expect(listed.count == 1)
        #expect(listed.first?["scopes"] == .array(["email", "openid", "profile"]))
        try w.provider.forgetConsent(userId: alice.id, clientId: c.id)
        expectRefusal(.notFound) { try w.provider.forgetConsent(userId: alice.id, clientId: c.id) }
        guard case .redirect(let forgotten, _) = w.authorize(silent, cookie: alice.cookie) else { throw OAuthWorld.Failure("no redirect") }
        #expect(try OAuthWorld.query(forgotten, "error") == "consent_required")
    }

    @Test("userinfo answers what the scopes allow, while the session lives")
    func userinfo() throws {
        let w = try OAuthWorld()
        let c = try w.client()
        let alice = try w.person("alice", email: "alice@example.com")
        let full = try w.exchange(c, code: try w.code(c, by: alice))
        let info = try w.userinfo(accessToken: full["access_token"]?.stringValue)
        #expect(info["sub"]?.stringValue == alice.id)
        #expect(info["preferred_username"]?.stringValue == "alice")
        #expect(info["email"]?.stringValue == "alice@example.com")
        let narrow = try w.exchange(c, code: try w.code(c, by: alice, scope: "openid"))
        let bare = try w.userinfo(accessToken: narrow["access_token"]?.stringValue)
        #expect(bare["email"] == nil && bare["preferred_username"] == nil)
        #expect(oauthError { () throws(OAuthError) in try w.userinfo(accessToken: "not-a-token") }?.error == "invalid_token")
    }

    @Test("revocation ends the client's own OAuth session; any other token is answered alike")
    func revoke() throws {
        let w = try OAuthWorld()
        let c = try w.client()
        let other = try w.client(name: "Other app")
        let alice = try w.person("alice")
        let tokens = try w.exchange(c, code: try w.code(c, by: alice))
        let refresh = try #require(tokens["refresh_token"]?.stringValue)
        try w.provider.revoke(w.request(other, [("token", refresh)], at: .revoke))
        let rotated = try w.refresh(c, tokens["refresh_token"])
        try w.provider.revoke(w.request(c, [("token", "lkor_unknown")], at: .revoke))
        try w.provider.revoke(w.request(c, [("token", try #require(rotated["refresh_token"]?.stringValue))], at: .revoke))
        #expect(oauthError { () throws(OAuthError) in try w.refresh(c, rotated["refresh_token"]) }?.error == "invalid_grant")
        #expect(oauthError { () throws(OAuthError) in try w.userinfo(accessToken: rotated["access_token"]?.stringValue) }?.error
            == "invalid_token")
    }

    @Test("a logout with the id_token's sid ends that OAuth session, without a cascade")
    func logout() throws {
        let w = try OAuthWorld()
        let c = try w.client()
        let alice = try w.person("alice")
        let tokens = try w.exchange(c, code: try w.code(c, by: alice))
        let idToken = try #require(tokens["id_token"]?.stringValue)
        let answer = w.provider.logout(LogoutRequest(parameters: [("id_token_hint", idToken), ("post_logout_redirect_uri", "https://app.example/bye"),
                                                                  ("state", "s")], cookie: alice.cookie, acceptLanguage: nil))
        guard case .redirect(let target, let cleared) = answer else { throw OAuthWorld.Failure("expected a redirect: \(answer)") }
        #expect(target.hasPrefix("https://app.example/bye"))
        // The hint named the OP session (its sid): it ends too, and the cookie with it.
        #expect(cleared)
        #expect(oauthError { () throws(OAuthError) in try w.refresh(c, tokens["refresh_token"]) }?.error == "invalid_grant")
        #expect(w.tables.snapshot.families[alice.browserSession]?.endedBy == "logout")
    }

    // MARK: A store that cannot answer fails the request as the server's, never the client's

    @Test("storage failures: a pushed request's lookup, the client's at the token endpoint, the OP session's")
    func storageFailures() throws {
        let w = try OAuthWorld()
        let c = try w.client()
        let alice = try w.person("alice")
        let uri = try #require(try w.provider.pushed(w.request(c, w.parameters(c), at: .par))["request_uri"]?.stringValue)
        w.oauth.fail(["pushed"])
        guard case .page(.lookupFailed, _, 503, _, _) = w.authorize([("client_id", c.id), ("request_uri", uri)]) else {
            Issue.record("a pushed request that cannot be read is a 503 page, not an unknown request_uri")
            return
        }
        w.oauth.fail([])
        // The request_uri is still there once the store answers again.
        _ = try w.requestId(w.authorize([("client_id", c.id), ("request_uri", uri)]))

        let code = try w.code(c, by: alice)
        w.clients.invalidate()
        w.oauth.fail(["clients", "client"])
        let token = oauthError { () throws(OAuthError) in try w.exchange(c, code: code) }
        #expect(token?.error == "temporarily_unavailable")
        #expect(token?.status == 503)
        #expect(token?.tokenResponse.status == 503)
        #expect(w.callers.failures.recordFailure(clientId: c.id, address: "192.0.2.9") == .counted,
                "a store failure is not counted as a failed authentication")
        w.oauth.fail([])
        #expect(try w.exchange(c, code: code)["access_token"] != nil, "the code was not used by the failed request")

        w.oauth.fail(["browserSession"])
        guard case .redirect(let silent, _) = w.authorize(w.parameters(c, scope: "openid", extra: [("prompt", "none")]), cookie: alice.cookie) else {
            throw OAuthWorld.Failure("no redirect")
        }
        #expect(try OAuthWorld.query(silent, "error") == "temporarily_unavailable", "not login_required")
    }

    @Test("storage failures at logout and discovery: a 503, never a page that blames the hint or an empty list")
    func storageFailuresAtLogoutAndDiscovery() throws {
        let w = try OAuthWorld()
        let c = try w.client()
        let alice = try w.person("alice")
        let tokens = try w.exchange(c, code: try w.code(c, by: alice))
        let idToken = try #require(tokens["id_token"]?.stringValue)
        w.clients.invalidate()
        w.oauth.fail(["clients", "client"])
        guard case .page(.lookupFailed, _, 503, _, _) = w.provider.logout(LogoutRequest(parameters: [("id_token_hint", idToken)],
                                                                                        cookie: nil, acceptLanguage: nil)) else {
            Issue.record("the hint's client that cannot be read is a 503")
            return
        }
        guard case .page(.lookupFailed, _, 503, _, _) = w.provider.logout(LogoutRequest(parameters: [("client_id", c.id)],
                                                                                        cookie: nil, acceptLanguage: nil)) else {
            Issue.record("a named client that cannot be read is a 503")
            return
        }
        expectRefusal(.internalError) { try w.provider.discovery() }
        w.oauth.fail(["browserSession"])
        w.clients.invalidate()
        guard case .page(.lookupFailed, _, 503, _, _) = w.provider.logout(LogoutRequest(parameters: [("client_id", c.id)],
                                                                                        cookie: alice.cookie, acceptLanguage: nil)) else {
            Issue.record("a cookie whose session cannot be read is a 503, not a signed-out page")
            return
        }
        w.oauth.fail([])
        #expect(try w.provider.discovery()["issuer"]?.stringValue == w.policy.issuer)
        // An RS256 hint while the RS256 key cannot be had (no key-encryption key here to seal one):
        // the server's failure, not a refused hint; a hint that is no token of ours is refused.
        func part(_ json: String) -> String { Base64URL.encode(Array(json.utf8)) }
        let rs256 = part(#"{"alg":"RS256","typ":"JWT","kid":"k"}"#) + "." + part(#"{"iss":"\#(w.policy.issuer)"}"#) + "."
            + Base64URL.encode([UInt8](repeating: 7, count: 256))
        guard case .page(.lookupFailed, _, 503, _, _) = w.provider.logout(LogoutRequest(parameters: [("id_token_hint", rs256)],
                                                                                        cookie: nil, acceptLanguage: nil)) else {
            Issue.record("an RS256 hint whose key cannot be read is a 503")
            return
        }
        guard case .page(.idTokenHintRefused, _, 400, _, _) = w.provider.logout(LogoutRequest(parameters: [("id_token_hint", "a.b.c")],
                                                                                              cookie: nil, acceptLanguage: nil)) else {
            Issue.record("a hint that is no id_token of ours is refused")
            return
        }
    }

    /// A store that is down: the RS256 key cannot be read or made.
    struct UnreachableKeys: RSAKeySource {
        func secret(named name: String, candidate: [UInt8]) throws(StorageError) -> [UInt8] { throw .unavailable("down") }
        func replaceEmptySecret(named name: String, with value: [UInt8]) throws(StorageError) { throw .unavailable("down") }
    }

    @Test("the JWKS lists the RS256 key beside the ES256 ones, and fails rather than answer a set without it")
    func theJWKSNeverLeavesOutTheRS256Key() throws {
        let sealed: (inout Configuration) -> Void = { $0.keyEncryptionKey = TestDatabase.keyEncryptionKey }   // the key is kept sealed
        let w = try OAuthWorld(configure: sealed)
        let keys = try #require(try w.provider.jwks()["keys"]?.arrayValue)
        #expect(keys.contains { $0["alg"]?.stringValue == "RS256" && $0["kty"]?.stringValue == "RSA" && $0["kid"] != nil })
        #expect(keys.contains { $0["alg"]?.stringValue == "ES256" })
        // A set without the RS256 key, cached by clients for five minutes, would refuse RS256 id_tokens.
        // Without a KEK no RS256 key can exist: the set is the ES256 keys, complete.
        #expect(try OAuthWorld().provider.jwks()["keys"]?.arrayValue?.allSatisfy { $0["alg"]?.stringValue == "ES256" } == true)
        let down = try OAuthWorld(rsaKeys: UnreachableKeys(), configure: sealed)
        do {
            _ = try down.provider.jwks()
            Issue.record("a JWKS without the RS256 key was answered")
        } catch {
            #expect(error.code == .internalError && error.status == 503, "\(error)")
        }
    }
}

extension OpenIDProvider {
    /// The OP browser session ended like a logout (the confirmation's "yes").
    func endBrowserSessionForTest(_ familyId: String) throws -> Bool {
        try store.endBrowserSession(familyId: familyId)
    }
}
