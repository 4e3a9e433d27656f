import Crypto
import Foundation
import JSON
import Storage
@testable import LatchkeyServer
import Testing
import Tokens
import WebAuthnTesting

/// SPEC "Client authentication": the OAuth endpoints' callers are resolved by the one caller
/// resolver, before the route runs — a client at the token, PAR and revocation endpoints
/// (`Access.oauthClient`), an access token's bearer at userinfo (`Access.oauthBearer`) — and
/// refused in OAuth's own formats (RFC 6749 §5.2, RFC 6750 §3.1), over HTTP and real PostgreSQL.
@Suite("OAuth callers: resolved by the route guard")
struct OAuthCallerTests {
    static let fixture = Result { try TestServer(name: "oauth-callers") }
    static let form = "application/x-www-form-urlencoded"

    @Test("the token, PAR, revocation and backchannel endpoints declare the OAuth client's access, userinfo the OAuth bearer's; no other route does")
    func declared() throws {
        let server = try Self.fixture.get()
        let guards = Application(services: server.services).guards
        let clients = Set(guards.filter { $0.access == "oauth-client" }.map { "\($0.method) \($0.pattern)" })
        let bearers = Set(guards.filter { $0.access == "oauth-bearer" }.map { "\($0.method) \($0.pattern)" })
        #expect(clients == ["POST /oauth2/token", "POST /oauth2/par", "POST /oauth2/revoke", "POST /oauth2/bc-authorize"])
        #expect(bearers == ["GET /oauth2/userinfo", "POST /oauth2/userinfo"])
        #expect(Set(OAuthEndpoint.allCases.map { "POST \($0.rawValue)" }) == clients)
    }

    @Test("an unauthenticated client is refused by the guard with RFC 6749 §5.2's invalid_client, whatever else the request holds")
    func clientRefusedByTheGuard() throws {
        let server = try Self.fixture.get()
        let client = server.client()
        var registration = OAuthClientService.Registration(name: "Callers", redirectURIs: ["https://rp.example/cb"])
        registration.isPublic = false
        let created = try server.services.oauthClients.add(registration, by: .named("test"))
        let wrong = "Basic " + Base64.encodeStandard(Array("\(created.client.id):not-the-secret".utf8))
        for endpoint in OAuthEndpoint.allCases {
            // A grant the handler would refuse, sent by no client and by a wrong secret: the caller is refused first.
            let body = OpenIDProviderTests.form([("grant_type", "nonsense"), ("token", "x")])
            for authorization in [nil, wrong, "Basic %%%"] {
                let reply = try client.send("POST", endpoint.rawValue, body: body, contentType: Self.form, authorization: authorization)
                let place = "\(endpoint.rawValue) with \(authorization ?? "no credentials")"
                #expect(reply.status == 401, "\(place): \(reply)")
                #expect(reply.json?["error"]?.stringValue == "invalid_client", "\(place): \(reply)")
                #expect(reply.json?["error_description"]?.stringValue?.isEmpty == false, "\(place)")
                #expect(reply.header("WWW-Authenticate") == "Basic realm=\"latchkey\"", "\(place): \(reply)")
                #expect(reply.header("Cache-Control") == "no-store", "\(place)")
                #expect(reply.header("Content-Type")?.hasPrefix("application/json") == true, "not problem+json: \(place)")
            }
            // The form is parsed before the client is looked for: a body that is not a form is invalid_request.
            let json = try client.send("POST", endpoint.rawValue, body: Array("{}".utf8), authorization: wrong)
            #expect(json.status == 400 && json.json?["error"]?.stringValue == "invalid_request", "\(endpoint.rawValue): \(json)")
        }
        // Authenticated, the route decides: the grant it cannot parse, answered only now.
        let basic = "Basic " + Base64.encodeStandard(Array("\(created.client.id):\(try #require(created.secret))".utf8))
        let grant = try client.send("POST", "/oauth2/token", body: OpenIDProviderTests.form([("grant_type", "nonsense")]),
                                    contentType: Self.form, authorization: basic)
        #expect(grant.status == 400 && grant.json?["error"]?.stringValue == "unsupported_grant_type", "\(grant)")
        let revoked = try client.send("POST", "/oauth2/revoke", body: OpenIDProviderTests.form([("token", "lkor_unknown")]),
                                      contentType: Self.form, authorization: basic)
        #expect(revoked.status == 200, "\(revoked)")
    }

    @Test("userinfo's bearer is resolved by the guard: no token, a Latchkey API token or garbage is RFC 6750's invalid_token")
    func bearerRefusedByTheGuard() throws {
        let server = try Self.fixture.get()
        let client = server.client()
        let user = try client.signUp(SoftAuthenticator(), username: server.username("callers"))
        for method in ["GET", "POST"] {
            for authorization in [nil, user.bearer, "Bearer garbage", "Basic eDp5"] {
                let reply = try client.send(method, "/oauth2/userinfo", authorization: authorization)
                let place = "\(method) /oauth2/userinfo with \(authorization?.prefix(12) ?? "nothing")"
                #expect(reply.status == 401, "\(place): \(reply)")
                #expect(reply.json?["error"]?.stringValue == "invalid_token", "\(place): \(reply)")
                #expect(reply.header("WWW-Authenticate") == "Bearer error=\"invalid_token\"", "\(place): \(reply)")
                #expect(reply.header("Cache-Control") == "no-store", "\(place)")
            }
        }
    }
}

/// SPEC "Client authentication" (RFC 7523 §3 item 3): a client assertion's `aud` is the issuer, the
/// token endpoint, or the URL of the endpoint receiving it — checked per endpoint, so an assertion
/// made for one endpoint is not accepted at another. Real keys, served over HTTP from loopback.
@Suite("Client assertion audience per endpoint")
struct ClientAssertionAudienceTests {
    @Test("aud: the issuer, the token endpoint or the receiving endpoint; revoke accepts its own URL, the token endpoint not the PAR URL")
    func audiencePerEndpoint() throws {
        let w = try OAuthWorld { $0.developmentMode = true }
        let keys = try ClientKeySetsTests.JWKSServer(keys: [ClientKeySetsTests.ec.jwk])
        defer { keys.stop() }
        var registration = OAuthClientService.Registration(name: "JWT app", redirectURIs: [OAuthWorld.redirectURI])
        registration.jwksURI = keys.uri
        let client = try w.clients.add(registration, by: .named("admin")).client
        #expect(client.authMethod == .privateKeyJWT)
        let issuer = w.policy.issuer

        /// The refusal of an assertion for `aud` at `endpoint` (nil: the client authenticated).
        func refusal(_ aud: JSONValue, at endpoint: OAuthEndpoint) throws -> OAuthError? {
            let claims = JSONValue.object([("iss", .string(client.id)), ("sub", .string(client.id)), ("aud", aud),
                                           ("jti", .string(UUID().uuidString)), ("exp", .number(Double(w.base.runtime.unixTime + 120)))])
            let form = OAuthParameters([("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
                                        ("client_assertion", try ClientKeySetsTests.ec.sign(claims))])
            return oauthError { () throws(OAuthError) in
                try w.callers.authenticate(ClientRequest(form: form, basic: nil, address: "192.0.2.7"), at: endpoint)
            }
        }

        for endpoint in OAuthEndpoint.allCases {
            for aud in [issuer, issuer + "/oauth2/token", issuer + endpoint.rawValue] {
                let refused = try refusal(.string(aud), at: endpoint)
                #expect(refused == nil, "aud \(aud) at \(endpoint.rawValue): \(String(describing: refused))")
            }
            // Another endpoint's URL, a stranger, or none: invalid_client.
            for other in OAuthEndpoint.allCases where other != endpoint && other != .token {
                let refused = try refusal(.string(issuer + other.rawValue), at: endpoint)
                #expect(refused?.error == "invalid_client", "aud \(other.rawValue) at \(endpoint.rawValue): \(String(describing: refused))")
                #expect(refused?.description.contains("aud") == true)
            }
            #expect(try refusal(.string("https://elsewhere.example/oauth2/token"), at: endpoint)?.error == "invalid_client")
            #expect(try refusal(.array([]), at: endpoint)?.error == "invalid_client")
            // RFC 7519 §4.1.3: an array naming one accepted audience is accepted.
            #expect(try refusal(.array(["https://elsewhere.example", .string(issuer + endpoint.rawValue)]), at: endpoint) == nil)
        }
        // The two holes closed: revoke accepts <issuer>/oauth2/revoke; the token endpoint no longer accepts the PAR URL.
        #expect(try refusal(.string(issuer + "/oauth2/revoke"), at: .revoke) == nil)
        #expect(try refusal(.string(issuer + "/oauth2/par"), at: .token)?.error == "invalid_client")
    }
}

/// OpenID Connect Core §3.1.2.1 and RP-Initiated Logout §2: an RS256 id_token of ours, read by the
/// Tokens module's one JWS parser, is accepted as `id_token_hint`; one altered or signed by another
/// key is not.
@Suite("RS256 id_token hints")
struct RS256HintTests {
    @Test("an RS256 client's id_token is a hint this server issued; altered, or under another kid, it is not")
    func rs256Hint() throws {
        let w = try OAuthWorld { $0.keyEncryptionKey = try? KeyEncryptionKey(bytes: [UInt8](repeating: 9, count: 32)) }
        var registration = OAuthClientService.Registration(name: "RS256 app", redirectURIs: [OAuthWorld.redirectURI])
        registration.idTokenAlg = "RS256"
        registration.postLogoutRedirectURIs = ["https://app.example/bye"]
        let created = try w.clients.add(registration, by: .named("admin"))
        let c = OAuthWorld.Client(id: created.client.id, secret: created.secret)
        let alice = try w.person("alice")
        let idToken = try #require(try w.exchange(c, code: try w.code(c, by: alice))["id_token"]?.stringValue)
        #expect(CompactJWS(idToken)?.alg == "RS256")
        let claims = try #require(try w.provider.verifiedIdToken(idToken))
        #expect(claims["sub"]?.stringValue == alice.id && claims["aud"]?.stringValue == c.id)
        // An altered payload, or the right signature under another kid: no id_token of ours.
        let parts = idToken.split(separator: ".").map(String.init)
        var altered = try #require(CompactJWS(idToken)).claims
        altered = .object((altered.objectValue ?? []).map { member in member.key == "sub" ? (key: "sub", value: "someone-else") : member })
        #expect(try w.provider.verifiedIdToken(parts[0] + "." + Base64URL.encode(altered.serialized()) + "." + parts[2]) == nil)
        let otherKid = Base64URL.encode(JSONValue.object([("alg", "RS256"), ("typ", "JWT"), ("kid", "other")]).serialized())
        #expect(try w.provider.verifiedIdToken(otherKid + "." + parts[1] + "." + parts[2]) == nil)
        // As an authorization request's hint it names the user.
        let checked = try w.provider.check(["redirect_uri": OAuthWorld.redirectURI, "response_type": "code", "scope": "openid",
                                            "code_challenge": OAuthWorld.challenge, "code_challenge_method": "S256", "id_token_hint": idToken],
                                           client: created.client, redirectURI: OAuthWorld.redirectURI, pushed: false)
        #expect(checked["id_token_hint_sub"]?.stringValue == alice.id)
    }
}
