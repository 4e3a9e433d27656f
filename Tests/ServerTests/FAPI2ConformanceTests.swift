import Crypto
import Foundation
import HTTP
import JSON
@testable import LatchkeyServer
import Storage
import Testing
import Tokens

/// The OpenID Foundation's FAPI 2.0 Security Profile (Final) authorization-server test plan
/// (`fapi2-security-profile-final-test-plan`), re-implemented from the modules' descriptions for the
/// variant Latchkey offers: `client_auth_type=private_key_jwt`, `sender_constrain=dpop`,
/// `fapi_profile=plain_fapi`, `openid=openid_connect`, unsigned requests through PAR. One test per
/// module, named after it; the provider over the in-memory store on a stepped clock (`FAPI2World`).
///
/// Modules that do not apply, and why:
/// - every `…-request-object-…` module, `…-ensure-matching-key-in-authorization-request`,
///   `…-ensure-unsigned-request-at-par-endpoint-fails`, `…-par-authorization-request-containing-request_uri`,
///   `…-state-only-outside-request-object-not-used`, `…-ensure-different-{nonce,state}-inside-and-outside-request-object`:
///   signed request objects (FAPI 2.0 Message Signing); Latchkey supports none (`request_parameter_supported`
///   false; a `request` parameter is `request_not_supported`).
/// - mTLS variants (client authentication and sender constraint): Latchkey binds with DPoP only.
/// - `…-grant-management-…`: Grant Management is not offered.
/// - `…-cdr-…`, `…-brazil-…`, `…-australia-connectid-…`, `…-ksa-…`: other ecosystems' profiles.
/// - `…-plain-fapi-tolerate-unregistered-redirect-uri`: for the signed-request variants only;
///   Latchkey requires a registered redirect URI (`…-ensure-registered-redirect-uri`).
/// - `…-par-ensure-reused-request-uri-prior-to-auth-completion-succeeds`: Latchkey uses a
///   `request_uri` once (RFC 9126 §7.3); the first use stores the authorization request, whose page
///   a reload returns to, so a second use of the `request_uri` is the error page (as in
///   `…-par-attempt-reuse-request_uri`).
/// - `…-access-token-type-header-case-sensitivity`: the `Authorization` scheme's case is the
///   request pipeline's (`Credentials`), tested with it.
@Suite("FAPI 2.0 Security Profile conformance (fapi2-security-profile-final-test-plan)")
struct FAPI2ConformanceTests {
    /// A fresh world; `body` runs and the JWKS server stops.
    func with(_ body: (FAPI2World) throws -> Void) throws {
        let f = try FAPI2World()
        defer { f.stop() }
        try body(f)
    }

    func pushedURI(_ f: FAPI2World) throws -> String { try #require(try f.par()["request_uri"]?.stringValue) }

    func isErrorPage(_ answer: BrowserAnswer) -> Bool {
        if case .page = answer { return true }
        return false
    }

    /// userinfo with `Authorization: DPoP` and a proof by `key` (the client's own by default).
    func userinfo(_ f: FAPI2World, _ access: String, key: DPoPKey? = nil) throws -> JSONValue {
        guard var bearer = f.w.callers.accessToken(access) else { throw OAuthError(.invalidToken, "no such token") }
        bearer.presentedAsDPoP = true
        try f.w.provider.checkPossession(bearer, f.proof("/oauth2/userinfo", method: "GET", key: key, withoutNonce: true, accessToken: access))
        return try f.w.provider.userinfo(bearer)
    }

    @Test("fapi2-security-profile-final-discovery-end-point-verification")
    func discovery() throws {
        try with { f throws in
            let d = try f.w.provider.discovery()
            #expect(d["issuer"]?.stringValue == f.issuer)
            #expect(d["pushed_authorization_request_endpoint"]?.stringValue == f.issuer + "/oauth2/par")
            #expect(d["code_challenge_methods_supported"] == ["S256"])
            #expect(d["authorization_response_iss_parameter_supported"] == true)
            #expect(d["token_endpoint_auth_methods_supported"]?.arrayValue?.contains("private_key_jwt") == true)
            for alg: JSONValue in ["ES256", "PS256"] {
                #expect(d["dpop_signing_alg_values_supported"]?.arrayValue?.contains(alg) == true)
                #expect(d["token_endpoint_auth_signing_alg_values_supported"]?.arrayValue?.contains(alg) == true)
            }
            #expect(d["response_types_supported"] == ["code"])
        }
    }

    @Test("fapi2-security-profile-final (the happy flow: PAR, authorize, token, userinfo)")
    func happyFlow() throws {
        try with { f throws in
            let person = try f.w.person("hana")
            let tokens = try f.exchange(try f.code(by: person))
            #expect(tokens["token_type"] == "DPoP")
            let idToken = try #require(tokens["id_token"]?.stringValue)
            #expect(CompactJWS(idToken)?.alg == "ES256")
            #expect(JWT.unverifiedClaims(idToken)?["nonce"]?.stringValue == "n-1")
            let access = try #require(tokens["access_token"]?.stringValue)
            #expect(try userinfo(f, access)["sub"]?.stringValue == person.id)
        }
    }

    @Test("fapi2-security-profile-final-user-rejects-authentication")
    func userRejects() throws {
        try with { f throws in
            let person = try f.w.person("ivan")
            let id = try f.w.requestId(f.w.authorize([("client_id", f.client.id), ("request_uri", try pushedURI(f))]))
            let (caller, _) = try #require(try f.w.provider.caller(cookie: person.cookie))
            let denied = try #require(try f.w.provider.deny(id, caller: caller, read: nil)["redirectTo"]?.stringValue)
            #expect(try OAuthWorld.query(denied, "error") == "access_denied")
            #expect(try OAuthWorld.query(denied, "iss") == f.issuer)
        }
    }

    @Test("fapi2-security-profile-final-ensure-other-scope-order-succeeds")
    func otherScopeOrder() throws {
        try with { f throws in
            let form = f.pushedParameters([("scope", "offline_access openid")], dropping: ["scope"])
            #expect(try f.par(form)["request_uri"] != nil)
        }
    }

    @Test("fapi2-security-profile-final-ensure-authorization-request-with-long-nonce")
    func longNonce() throws {
        try with { f throws in
            #expect(try f.par(f.pushedParameters([("nonce", String(repeating: "a", count: 64))], dropping: ["nonce"]))["request_uri"] != nil)
        }
    }

    @Test("fapi2-security-profile-final-ensure-authorization-request-with-long-state")
    func longState() throws {
        try with { f throws in
            #expect(try f.par(f.pushedParameters([("state", String(repeating: "s", count: 384))], dropping: ["state"]))["request_uri"] != nil)
        }
    }

    @Test("fapi2-security-profile-final-ensure-registered-redirect-uri")
    func registeredRedirectURI() throws {
        try with { f throws in
            let form = f.pushedParameters([("redirect_uri", "https://attacker.example/cb")], dropping: ["redirect_uri"])
            #expect(oauthRefusal { try f.par(form) }?.error == "invalid_request")
        }
    }

    @Test("fapi2-security-profile-final-ensure-unsigned-authorization-request-without-using-par-fails")
    func withoutPAR() throws {
        try with { f throws in
            guard case .redirect(let location, _) = f.w.authorize(f.pushedParameters()) else { Issue.record("no redirect"); return }
            #expect(try OAuthWorld.query(location, "error") == "invalid_request")
        }
    }

    @Test("fapi2-security-profile-final-ensure-redirect-uri-in-authorization-request")
    func redirectURIRequired() throws {
        try with { f throws in #expect(oauthRefusal { try f.par(f.pushedParameters(dropping: ["redirect_uri"])) }?.error == "invalid_request") }
    }

    @Test("fapi2-security-profile-final-ensure-response-type-code-idtoken-fails")
    func codeIdToken() throws {
        try with { f throws in
            let form = f.pushedParameters([("response_type", "code id_token")], dropping: ["response_type"])
            #expect(oauthRefusal { try f.par(form) }?.error == "unsupported_response_type")
        }
    }

    @Test("fapi2-security-profile-final-ensure-response-type-token-fails")
    func token() throws {
        try with { f throws in
            let form = f.pushedParameters([("response_type", "token")], dropping: ["response_type"])
            #expect(oauthRefusal { try f.par(form) }?.error == "unsupported_response_type")
        }
    }

    @Test("fapi2-security-profile-final-ensure-client-id-in-token-endpoint")
    func clientIdAtTheTokenEndpoint() throws {
        try with { f throws in
            let bare = ClientRequest(form: OAuthParameters([("grant_type", "authorization_code"), ("code", "x")]), basic: nil, address: "192.0.2.9")
            #expect(oauthRefusal { try f.w.callers.authenticate(bare, at: .token) }?.error == "invalid_client")
        }
    }

    @Test("fapi2-security-profile-final-ensure-holder-of-key-required")
    func holderOfKey() throws {
        try with { f throws in
            let code = try f.code(by: try f.w.person("jan"))
            #expect(oauthRefusal { try f.exchange(code, proof: .none) }?.error == "invalid_dpop_proof")
            let access = try #require(try f.exchange(code)["access_token"]?.stringValue)
            // Presented as Bearer, or with another key's proof, the bound token is refused.
            var bearer = try #require(f.w.callers.accessToken(access))
            bearer.presentedAsDPoP = false
            #expect(oauthRefusal { try f.w.provider.checkPossession(bearer, nil) }?.error == "invalid_token")
            #expect(oauthRefusal { try userinfo(f, access, key: DPoPKey.generate()) }?.error == "invalid_dpop_proof")
        }
    }

    @Test("fapi2-security-profile-final-ensure-authorization-code-is-bound-to-client")
    func codeBoundToClient() throws {
        try with { f throws in
            let code = try f.code(by: try f.w.person("kai"))
            var r = OAuthClientService.Registration(name: "Other bank", redirectURIs: [OAuthWorld.redirectURI])
            (r.jwksURI, r.profile) = (f.keys.uri, .fapi2)
            let other = try f.w.clients.add(r, by: .named("admin")).client
            let assertion = try FAPI2World.es256.sign(.object([("iss", .string(other.id)), ("sub", .string(other.id)), ("aud", .string(f.issuer)),
                                                              ("jti", .string(UUID().uuidString)), ("exp", .number(Double(f.now + 60)))]))
            let form = [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", OAuthWorld.redirectURI),
                        ("code_verifier", OAuthWorld.verifier), ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
                        ("client_assertion", assertion)]
            let request = AuthenticatedClientRequest(client: try f.w.callers.authenticate(ClientRequest(form: OAuthParameters(form), basic: nil,
                                                                                                          address: "192.0.2.9"), at: .token),
                                                     form: OAuthParameters(form))
            #expect(oauthRefusal { try f.w.provider.token(TokenRequest(request, dpop: f.proof("/oauth2/token"))) }?.error == "invalid_grant")
        }
    }

    @Test("fapi2-security-profile-final-attempt-reuse-authorization-code-after-one-second")
    func codeReuse() throws {
        try with { f throws in
            let code = try f.code(by: try f.w.person("lea"))
            let first = try f.exchange(code)
            f.w.clock.advance(1)
            #expect(oauthRefusal { try f.exchange(code) }?.error == "invalid_grant")
            // What the first use issued is revoked.
            #expect(oauthRefusal { try f.refresh(try #require(first["refresh_token"]?.stringValue)) }?.error == "invalid_grant")
        }
    }

    @Test("fapi2-security-profile-final-ensure-token-endpoint-fails-with-expired-auth-code")
    func expiredCode() throws {
        try with { f throws in
            let code = try f.code(by: try f.w.person("max"))
            f.w.clock.advance(61)
            #expect(oauthRefusal { try f.exchange(code) }?.error == "invalid_grant")
        }
    }

    @Test("fapi2-security-profile-final-ensure-signed-client-assertion-with-RS256-fails")
    func rs256Assertion() throws {
        try with { f throws in #expect(oauthRefusal { try f.par(assertion: try f.assertion(FAPI2World.rs256)) }?.error == "invalid_client") }
    }

    @Test("fapi2-security-profile-final-ensure-client-assertion-in-token-endpoint")
    func assertionAtTheTokenEndpoint() throws {
        try with { f throws in
            let code = try f.code(by: try f.w.person("nils"))
            #expect(try f.token([("grant_type", "authorization_code"), ("code", code), ("redirect_uri", OAuthWorld.redirectURI),
                                 ("code_verifier", OAuthWorld.verifier)], assertion: try f.assertion(FAPI2World.ps256))["access_token"] != nil)
        }
    }

    @Test("fapi2-security-profile-final-ensure-client-assertion-with-exp-is-5-minutes-in-past-fails")
    func expiredAssertion() throws {
        try with { f throws in
            let assertion = try FAPI2World.es256.sign(.object([("iss", .string(f.client.id)), ("sub", .string(f.client.id)), ("aud", .string(f.issuer)),
                                                              ("jti", .string(UUID().uuidString)), ("exp", .number(Double(f.now - 300)))]))
            #expect(oauthRefusal { try f.par(assertion: assertion) }?.error == "invalid_client")
        }
    }

    @Test("fapi2-security-profile-final-ensure-client-assertion-with-wrong-aud-fails")
    func wrongAudience() throws {
        try with { f throws in
            for aud: JSONValue in ["https://elsewhere.example", .string(f.issuer + "/oauth2/token"), .array([.string(f.issuer)])] {
                #expect(oauthRefusal { try f.par(assertion: try f.assertion(aud: aud)) }?.error == "invalid_client", "\(aud)")
            }
        }
    }

    @Test("fapi2-security-profile-final-ensure-client-assertion-with-no-sub-fails")
    func assertionWithoutSub() throws {
        try with { f throws in
            let assertion = try FAPI2World.es256.sign(.object([("iss", .string(f.client.id)), ("aud", .string(f.issuer)),
                                                              ("jti", .string(UUID().uuidString)), ("exp", .number(Double(f.now + 60)))]))
            #expect(oauthRefusal { try f.par(assertion: assertion) }?.error == "invalid_client")
        }
    }

    @Test("fapi2-security-profile-final-ensure-invalid-client-assertions-fail")
    func invalidAssertions() throws {
        try with { f throws in
            let forged = try FAPI2World.es256.sign(.object([("iss", .string(f.client.id)), ("sub", .string(f.client.id)), ("aud", .string(f.issuer)),
                                                           ("jti", .string(UUID().uuidString)), ("exp", .number(Double(f.now + 60)))]),
                                                   by: .generateEC(.p256))
            let replayed = try f.assertion()
            _ = try f.par(assertion: replayed)
            for bad in [forged, replayed, "not.a.jwt", ""] {
                #expect(oauthRefusal { try f.par(assertion: bad) }?.error == "invalid_client", "\(bad.prefix(20))")
            }
        }
    }

    @Test("fapi2-security-profile-final-dpop-negative-tests")
    func dpopNegative() throws {
        try with { f throws in
            let key = f.dpop
            func proof(_ claims: [(key: String, value: JSONValue)], header: [(key: String, value: JSONValue)]? = nil,
                       signer: DPoPKey? = nil) -> FAPI2World.Proof {
                let h = header ?? [("typ", "dpop+jwt"), ("alg", "ES256"), ("jwk", key.jwk)]
                return .given(DPoPPresentation(proof: (signer ?? key).sign(header: .object(h), claims: .object(claims)),
                                               repeated: false, method: "POST", path: "/oauth2/par"))
            }
            func claims(dropping: String? = nil, _ changes: [(key: String, value: JSONValue)] = []) -> [(key: String, value: JSONValue)] {
                var c: [(key: String, value: JSONValue)] = [("jti", .string(UUID().uuidString)), ("htm", "POST"), ("htu", .string(f.issuer + "/oauth2/par")),
                                                            ("iat", .number(Double(f.now))), ("nonce", .string(f.nonce))]
                c.removeAll { $0.key == dropping || changes.map(\.key).contains($0.key) }
                return c + changes
            }
            let cases: [(String, FAPI2World.Proof)] = [
                ("no typ", proof(claims(), header: [("alg", "ES256"), ("jwk", key.jwk)])),
                ("typ JWT", proof(claims(), header: [("typ", "JWT"), ("alg", "ES256"), ("jwk", key.jwk)])),
                ("alg none", .given(DPoPPresentation(proof: Base64URL.encode(Array(#"{"typ":"dpop+jwt","alg":"none"}"#.utf8)) + "."
                                                     + Base64URL.encode(JSONValue.object(claims()).serialized()) + ".",
                                                     repeated: false, method: "POST", path: "/oauth2/par"))),
                ("RS256", .given(f.proof("/oauth2/par", key: DPoPKey.generate(.rs256)))),
                ("htm GET", proof(claims([("htm", "GET")]))),
                ("htu elsewhere", proof(claims([("htu", "https://elsewhere.example/oauth2/par")]))),
                ("iat an hour ago", proof(claims([("iat", .number(Double(f.now - 3600)))]))),
                ("iat in the future", proof(claims([("iat", .number(Double(f.now + 3600)))]))),
                ("no jti", proof(claims(dropping: "jti"))),
                ("signed by another key", proof(claims(), signer: DPoPKey.generate())),
                ("a private key in jwk", proof(claims(), header: [("typ", "dpop+jwt"), ("alg", "ES256"),
                                                                  ("jwk", .object((key.jwk.objectValue ?? []) + [(key: "d", value: "AAAA")]))])),
            ]
            for (name, p) in cases {
                #expect(oauthRefusal { try f.par(proof: p) }?.error == "invalid_dpop_proof", "\(name)")
            }
            #expect(oauthRefusal { try f.par(proof: proof(claims(dropping: "nonce"))) }?.error == "use_dpop_nonce")
            #expect(oauthRefusal { try f.par(proof: proof(claims([("nonce", "not-a-nonce")]))) }?.error == "use_dpop_nonce")
            let once = f.proof("/oauth2/par")
            _ = try f.par(proof: .given(once))
            #expect(oauthRefusal { try f.par(proof: .given(once)) }?.error == "invalid_dpop_proof", "a reused jti")
        }
    }

    @Test("fapi2-security-profile-final-refresh-token")
    func refreshToken() throws {
        try with { f throws in
            let tokens = try f.exchange(try f.code(by: try f.w.person("olaf")))
            let refresh = try #require(tokens["refresh_token"]?.stringValue)
            let refreshed = try f.refresh(refresh)
            #expect(refreshed["token_type"] == "DPoP" && refreshed["id_token"] != nil)
            // No rotation for a fapi2 client: the same token refreshes again.
            #expect(refreshed["refresh_token"] == nil)
            #expect(try f.refresh(refresh)["access_token"] != nil)
            let access = try #require(refreshed["access_token"]?.stringValue)
            #expect(JWT.unverifiedClaims(access)?["cnf"]?["jkt"]?.stringValue == f.dpop.jkt)
            #expect(try userinfo(f, access)["sub"] != nil)
        }
    }

    @Test("fapi2-security-profile-final-par-attempt-reuse-request_uri")
    func reuseRequestURI() throws {
        try with { f throws in
            let person = try f.w.person("pete")
            let uri = try pushedURI(f)
            _ = try f.w.approve(try f.w.requestId(f.w.authorize([("client_id", f.client.id), ("request_uri", uri)])), by: person)
            #expect(isErrorPage(f.w.authorize([("client_id", f.client.id), ("request_uri", uri)])))
        }
    }

    @Test("fapi2-security-profile-final-par-attempt-to-use-expired-request_uri")
    func expiredRequestURI() throws {
        try with { f throws in
            let uri = try pushedURI(f)
            f.w.clock.advance(91)
            #expect(isErrorPage(f.w.authorize([("client_id", f.client.id), ("request_uri", uri)])))
        }
    }

    @Test("fapi2-security-profile-final-par-attempt-to-use-request_uri-for-different-client")
    func requestURIOfAnotherClient() throws {
        try with { f throws in
            let uri = try pushedURI(f)
            let other = try f.w.client()
            #expect(isErrorPage(f.w.authorize([("client_id", other.id), ("request_uri", uri)])))
        }
    }

    @Test("fapi2-security-profile-final-par-authorization-request-containing-request_uri-form-param")
    func requestURIPushed() throws {
        try with { f throws in
            let form = f.pushedParameters([("request_uri", "urn:ietf:params:oauth:request_uri:abc")])
            #expect(oauthRefusal { try f.par(form) }?.error == "invalid_request")
        }
    }

    @Test("fapi2-security-profile-final-par-attempt-invalid-http-method")
    func parMethod() throws {
        let server = try OAuthCallerTests.fixture.get()
        let par = Application(services: server.services).guards.filter { $0.pattern == "/oauth2/par" }.map(\.method)
        #expect(par == ["POST"], "PAR answers POST alone (RFC 9126 §2.1); any other method is the router's 405")
    }

    @Test("fapi2-security-profile-final-par-ensure-pkce-required")
    func pkceRequired() throws {
        try with { f throws in
            let form = f.pushedParameters(dropping: ["code_challenge", "code_challenge_method"])
            #expect(oauthRefusal { try f.par(form) }?.error == "invalid_request")
        }
    }

    @Test("fapi2-security-profile-final-ensure-pkce-code-verifier-required")
    func verifierRequired() throws {
        try with { f throws in
            let code = try f.code(by: try f.w.person("quincy"))
            #expect(oauthRefusal {
                try f.token([("grant_type", "authorization_code"), ("code", code), ("redirect_uri", OAuthWorld.redirectURI)])
            }?.error == "invalid_grant")
        }
    }

    @Test("fapi2-security-profile-final-incorrect-pkce-code-verifier-rejected")
    func wrongVerifier() throws {
        try with { f throws in
            let code = try f.code(by: try f.w.person("rosa"))
            #expect(oauthRefusal {
                try f.token([("grant_type", "authorization_code"), ("code", code), ("redirect_uri", OAuthWorld.redirectURI),
                             ("code_verifier", String(repeating: "w", count: 43))])
            }?.error == "invalid_grant")
        }
    }

    @Test("fapi2-security-profile-final-par-plain-pkce-rejected")
    func plainPKCE() throws {
        try with { f throws in
            let form = f.pushedParameters([("code_challenge", OAuthWorld.verifier), ("code_challenge_method", "plain")],
                                          dropping: ["code_challenge", "code_challenge_method"])
            #expect(oauthRefusal { try f.par(form) }?.error == "invalid_request")
        }
    }

    @Test("fapi2-security-profile-final-par-without-duplicate-parameters")
    func duplicateParameters() throws {
        // RFC 6749 §3.1 at the edge: each parameter once; the pushed form with one twice is invalid_request.
        let body = OpenIDProviderTests.form([("response_type", "code"), ("scope", "openid"), ("scope", "openid email")])
        let request = Request(method: "POST", target: "/oauth2/par", headers: [("Content-Type", "application/x-www-form-urlencoded")], body: body)
        #expect(oauthError { () throws(OAuthError) in try OAuthEdge.clientRequest(request, address: "192.0.2.9") }?.error == "invalid_request")
        try with { f throws in #expect(try f.par()["request_uri"] != nil, "each parameter once") }
    }
}
