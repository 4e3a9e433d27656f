import Crypto
import Foundation
import HTTP
import JSON
@testable import LatchkeyServer
import Storage
import Testing
import Tokens
import WebAuthnTesting

/// SPEC "Sender-constrained tokens (DPoP)" at the OpenID Provider (RFC 9449): a proof at the token
/// endpoint binds the tokens to its key; a stolen access token or refresh token is refused without
/// that key; a proof is accepted once, on every instance (two servers, one database).
@Suite("DPoP at the OpenID Provider")
struct DPoPOAuthTests {
    static let form = "application/x-www-form-urlencoded"

    /// Proofs are made for the time the servers read (`Runtime.system`); nothing asserts on it.
    static var now: Int64 { Int64(Date().timeIntervalSince1970) }

    /// A code for `client` approved by a passkey step-up in the owner's session; the PKCE verifier.
    static func code(_ server: TestServer, clientId: String, owner: SoftAuthenticator, bearer: String,
                     query given: [(String, String)]? = nil) throws -> (code: String, verifier: String) {
        let verifier = Base64URL.encode(SecureRandom.bytes(32))
        let query = given ?? [("response_type", "code"), ("client_id", clientId), ("redirect_uri", "https://rp.example/cb"),
                              ("scope", "openid offline_access"), ("code_challenge", Base64URL.encode(Digest.sha256(Array(verifier.utf8)))),
                              ("code_challenge_method", "S256")]
        let started = try server.client().get("/oauth2/authorize?" + String(decoding: OpenIDProviderTests.form(query), as: UTF8.self))
        let location = try #require(started.header("Location"), "\(started)")
        let requestId = try #require(URLComponents(string: location)?.queryItems?.first { $0.name == "request" }?.value)
        let view = try server.client().get("/v1/oauth/requests/\(requestId)")
        let action = try #require(view.json?["stepUpAction"], "\(view)")
        let stepUp = try OpenIDProviderTests.passkeyStepUp(server.client(), bearer: bearer, authenticator: owner, action: action)
        let approved = try server.client().post("/v1/oauth/requests/\(requestId)/approve", .object([]), authorization: bearer,
                                                headers: [("Latchkey-Step-Up", stepUp)])
        let redirect = try #require(approved.json?["redirectTo"]?.stringValue, "\(approved)")
        return (try #require(URLComponents(string: redirect)?.queryItems?.first { $0.name == "code" }?.value), verifier)
    }

    /// A code through PAR (RFC 9126) carrying `pairs` and the DPoP `proof` header, approved like `code`.
    static func pushedCode(_ server: TestServer, clientId: String, basic: String, owner: SoftAuthenticator, bearer: String,
                           pairs: [(String, String)], proof: String?) throws -> (code: String, verifier: String, reply: Reply) {
        let verifier = Base64URL.encode(SecureRandom.bytes(32))
        let pushed = try server.client().send("POST", "/oauth2/par", body: OpenIDProviderTests.form([
            ("response_type", "code"), ("client_id", clientId), ("redirect_uri", "https://rp.example/cb"), ("scope", "openid"),
            ("code_challenge", Base64URL.encode(Digest.sha256(Array(verifier.utf8)))), ("code_challenge_method", "S256")] + pairs),
            contentType: form, authorization: basic, headers: proof.map { [("DPoP", $0)] } ?? [])
        guard let uri = pushed.json?["request_uri"]?.stringValue else { return ("", verifier, pushed) }
        let (code, _) = try Self.code(server, clientId: clientId, owner: owner, bearer: bearer, query: [("client_id", clientId), ("request_uri", uri)])
        return (code, verifier, pushed)
    }

    static func token(_ server: TestServer, _ pairs: [(String, String)], proof: String?, basic: String? = nil) throws -> Reply {
        try server.client().send("POST", "/oauth2/token", body: OpenIDProviderTests.form(pairs), contentType: form, authorization: basic,
                                 headers: proof.map { [("DPoP", $0)] } ?? [])
    }

    static func userinfo(_ server: TestServer, authorization: String, proof: String?) throws -> Reply {
        try server.client().send("GET", "/oauth2/userinfo", authorization: authorization, headers: proof.map { [("DPoP", $0)] } ?? [])
    }

    @Test("a public client's DPoP-bound tokens: refused as Bearer, with another key, replayed, or refreshed without the key")
    func publicClient() throws {
        let a = try TestServer(name: "dpop")
        let b = try TestServer(name: "dpop-b", rpIdOverride: a.rpId)
        defer { a.http.stop(); b.http.stop() }
        let owner = SoftAuthenticator()
        let session = try a.client().signUp(owner, username: a.username("dpop"))
        var registration = OAuthClientService.Registration(name: "DPoP app", redirectURIs: ["https://rp.example/cb"])
        registration.isPublic = true
        let created = try a.services.oauthClients.add(registration, by: .named("test"))
        let clientId = created.client.id
        let key = DPoPKey.generate(), thief = DPoPKey.generate(.edDSA)
        let tokenURL = a.origin + "/oauth2/token", userinfoURL = a.origin + "/oauth2/userinfo"

        let discovery = try a.client().get("/.well-known/openid-configuration")
        #expect(discovery.json?["dpop_signing_alg_values_supported"] == ["ES256", "EdDSA", "RS256", "PS256"])

        let (code, verifier) = try Self.code(a, clientId: clientId, owner: owner, bearer: session.bearer)
        let exchange = [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", "https://rp.example/cb"),
                        ("code_verifier", verifier), ("client_id", clientId)]
        // A malformed proof is refused before the code is touched, as the RFC's error.
        let malformed = try Self.token(a, exchange, proof: thief.proof(method: "GET", url: tokenURL, iat: Self.now))
        #expect(malformed.status == 400 && malformed.json?["error"]?.stringValue == "invalid_dpop_proof", "\(malformed)")
        #expect(malformed.header("DPoP-Nonce") != nil)
        let tokens = try Self.token(a, exchange, proof: key.proof(method: "POST", url: tokenURL, iat: Self.now))
        #expect(tokens.status == 200 && tokens.json?["token_type"]?.stringValue == "DPoP", "\(tokens)")
        #expect(tokens.header("DPoP-Nonce")?.count == 22)
        let access = try #require(tokens.json?["access_token"]?.stringValue)
        let refresh = try #require(tokens.json?["refresh_token"]?.stringValue)
        #expect(JWT.unverifiedClaims(access)?["cnf"]?["jkt"]?.stringValue == key.jkt)

        // The stolen access token: as Bearer, as DPoP without a proof, with the thief's own proof.
        let bearer = try Self.userinfo(a, authorization: "Bearer \(access)", proof: nil)
        #expect(bearer.status == 401 && bearer.header("WWW-Authenticate")?.hasPrefix(#"DPoP error="invalid_token""#) == true, "\(bearer)")
        let bare = try Self.userinfo(a, authorization: "DPoP \(access)", proof: nil)
        #expect(bare.status == 401 && bare.header("WWW-Authenticate")?.hasPrefix(#"DPoP error="invalid_dpop_proof""#) == true, "\(bare)")
        let stolen = try Self.userinfo(a, authorization: "DPoP \(access)",
                                       proof: thief.proof(method: "GET", url: userinfoURL, iat: Self.now, accessToken: access))
        #expect(stolen.status == 401 && stolen.header("WWW-Authenticate")?.hasPrefix("DPoP ") == true, "\(stolen)")
        let otherToken = try Self.userinfo(a, authorization: "DPoP \(access)",
                                           proof: key.proof(method: "GET", url: userinfoURL, iat: Self.now, accessToken: "another"))
        #expect(otherToken.status == 401, "an ath for another token: \(otherToken)")
        // The holder of the key; the same proof again, on the other instance, is a replay.
        let proof = key.proof(method: "GET", url: userinfoURL, iat: Self.now, accessToken: access)
        let owned = try Self.userinfo(a, authorization: "DPoP \(access)", proof: proof)
        #expect(owned.status == 200 && owned.json?["sub"]?.stringValue == session.userId, "\(owned)")
        #expect(owned.header("DPoP-Nonce") != nil)
        let replayed = try Self.userinfo(b, authorization: "DPoP \(access)", proof: proof)
        #expect(replayed.status == 401 && replayed.header("WWW-Authenticate")?.contains("invalid_dpop_proof") == true, "\(replayed)")

        // The stolen refresh token: without a proof, or with the thief's key.
        let refreshing = [("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", clientId)]
        let noProof = try Self.token(a, refreshing, proof: nil)
        #expect(noProof.status == 400 && noProof.json?["error"]?.stringValue == "invalid_grant", "\(noProof)")
        let thiefs = try Self.token(b, refreshing, proof: thief.proof(method: "POST", url: tokenURL, iat: Self.now))
        #expect(thiefs.status == 400 && thiefs.json?["error"]?.stringValue == "invalid_grant", "\(thiefs)")
        // The key's holder refreshes (the refused attempts left the token as it was) …
        let refreshProof = key.proof(method: "POST", url: tokenURL, iat: Self.now)
        let refreshed = try Self.token(b, refreshing, proof: refreshProof)
        #expect(refreshed.status == 200 && refreshed.json?["token_type"]?.stringValue == "DPoP", "\(refreshed)")
        let next = try #require(refreshed.json?["refresh_token"]?.stringValue)
        // … and that proof is spent, on every instance, even with the new refresh token.
        let again = try Self.token(a, [("grant_type", "refresh_token"), ("refresh_token", next), ("client_id", clientId)], proof: refreshProof)
        #expect(again.status == 400 && again.json?["error"]?.stringValue == "invalid_dpop_proof", "\(again)")
        let fresh = try Self.token(a, [("grant_type", "refresh_token"), ("refresh_token", next), ("client_id", clientId)],
                                   proof: key.proof(method: "POST", url: tokenURL, iat: Self.now))
        #expect(fresh.status == 200, "the replay refused left the token usable: \(fresh)")
    }

    @Test("a confidential client's refresh token may present a new key; without a proof its tokens stay Bearer")
    func confidentialClient() throws {
        let server = try TestServer(name: "dpop-conf")
        defer { server.http.stop() }
        let owner = SoftAuthenticator()
        let session = try server.client().signUp(owner, username: server.username("dpop"))
        let registration = OAuthClientService.Registration(name: "DPoP backend", redirectURIs: ["https://rp.example/cb"])
        let created = try server.services.oauthClients.add(registration, by: .named("test"))
        let basic = "Basic " + Base64.encodeStandard(Array("\(created.client.id):\(try #require(created.secret))".utf8))
        let tokenURL = server.origin + "/oauth2/token"
        let first = DPoPKey.generate(.ps256), second = DPoPKey.generate()

        let (code, verifier) = try Self.code(server, clientId: created.client.id, owner: owner, bearer: session.bearer)
        let tokens = try Self.token(server, [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", "https://rp.example/cb"),
                                             ("code_verifier", verifier)],
                                    proof: first.proof(method: "POST", url: tokenURL, iat: Self.now), basic: basic)
        #expect(tokens.status == 200 && tokens.json?["token_type"]?.stringValue == "DPoP", "\(tokens)")
        let refresh = try #require(tokens.json?["refresh_token"]?.stringValue)
        let rebound = try Self.token(server, [("grant_type", "refresh_token"), ("refresh_token", refresh)],
                                     proof: second.proof(method: "POST", url: tokenURL, iat: Self.now), basic: basic)
        #expect(rebound.status == 200, "\(rebound)")
        let access = try #require(rebound.json?["access_token"]?.stringValue)
        #expect(JWT.unverifiedClaims(access)?["cnf"]?["jkt"]?.stringValue == second.jkt)
        let userinfo = try Self.userinfo(server, authorization: "DPoP \(access)",
                                         proof: second.proof(method: "GET", url: server.origin + "/oauth2/userinfo", iat: Self.now,
                                                             accessToken: access))
        #expect(userinfo.status == 200, "\(userinfo)")

        // Unbound tokens work exactly as before, and are not accepted under the DPoP scheme.
        let (code2, verifier2) = try Self.code(server, clientId: created.client.id, owner: owner, bearer: session.bearer)
        let plain = try Self.token(server, [("grant_type", "authorization_code"), ("code", code2), ("redirect_uri", "https://rp.example/cb"),
                                            ("code_verifier", verifier2)], proof: nil, basic: basic)
        #expect(plain.status == 200 && plain.json?["token_type"]?.stringValue == "Bearer" && plain.header("DPoP-Nonce") == nil, "\(plain)")
        let plainAccess = try #require(plain.json?["access_token"]?.stringValue)
        #expect(JWT.unverifiedClaims(plainAccess)?["cnf"] == nil)
        #expect(try Self.userinfo(server, authorization: "Bearer \(plainAccess)", proof: nil).status == 200)
        let asDPoP = try Self.userinfo(server, authorization: "DPoP \(plainAccess)",
                                       proof: second.proof(method: "GET", url: server.origin + "/oauth2/userinfo", iat: Self.now,
                                                           accessToken: plainAccess))
        #expect(asDPoP.status == 401, "\(asDPoP)")
    }

    @Test("PAR binds the code to a DPoP key, by dpop_jkt or by a proof; the exchange needs a proof by that key")
    func pushedBinding() throws {
        let server = try TestServer(name: "dpop-par")
        defer { server.http.stop() }
        let owner = SoftAuthenticator()
        let session = try server.client().signUp(owner, username: server.username("dpop"))
        let created = try server.services.oauthClients.add(OAuthClientService.Registration(name: "PAR", redirectURIs: ["https://rp.example/cb"]),
                                                           by: .named("test"))
        let clientId = created.client.id
        let basic = "Basic " + Base64.encodeStandard(Array("\(clientId):\(try #require(created.secret))".utf8))
        let key = DPoPKey.generate(), other = DPoPKey.generate()
        let tokenURL = server.origin + "/oauth2/token", parURL = server.origin + "/oauth2/par"
        func exchange(_ code: String, _ verifier: String, _ proof: String?) throws -> Reply {
            try Self.token(server, [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", "https://rp.example/cb"),
                                    ("code_verifier", verifier)], proof: proof, basic: basic)
        }
        // dpop_jkt: a proof by another key, or none, is refused (and uses the code up).
        let bound = try Self.pushedCode(server, clientId: clientId, basic: basic, owner: owner, bearer: session.bearer,
                                        pairs: [("dpop_jkt", key.jkt)], proof: nil)
        let wrong = try exchange(bound.code, bound.verifier, other.proof(method: "POST", url: tokenURL, iat: Self.now))
        #expect(wrong.status == 400 && wrong.json?["error"]?.stringValue == "invalid_grant", "\(wrong)")
        let bound2 = try Self.pushedCode(server, clientId: clientId, basic: basic, owner: owner, bearer: session.bearer,
                                         pairs: [("dpop_jkt", key.jkt)], proof: nil)
        let none = try exchange(bound2.code, bound2.verifier, nil)
        #expect(none.status == 400 && none.json?["error"]?.stringValue == "invalid_grant", "\(none)")
        let bound3 = try Self.pushedCode(server, clientId: clientId, basic: basic, owner: owner, bearer: session.bearer,
                                         pairs: [("dpop_jkt", key.jkt)], proof: nil)
        let right = try exchange(bound3.code, bound3.verifier, key.proof(method: "POST", url: tokenURL, iat: Self.now))
        #expect(right.status == 200 && right.json?["token_type"]?.stringValue == "DPoP", "\(right)")
        // A proof at PAR binds the same way, and answers with a nonce.
        let proved = try Self.pushedCode(server, clientId: clientId, basic: basic, owner: owner, bearer: session.bearer, pairs: [],
                                         proof: key.proof(method: "POST", url: parURL, iat: Self.now))
        #expect(proved.reply.status == 201 && proved.reply.header("DPoP-Nonce") != nil, "\(proved.reply)")
        let stolen = try exchange(proved.code, proved.verifier, other.proof(method: "POST", url: tokenURL, iat: Self.now))
        #expect(stolen.status == 400 && stolen.json?["error"]?.stringValue == "invalid_grant", "\(stolen)")
        // dpop_jkt and a proof by another key; a malformed dpop_jkt.
        let mismatch = try Self.pushedCode(server, clientId: clientId, basic: basic, owner: owner, bearer: session.bearer,
                                           pairs: [("dpop_jkt", other.jkt)], proof: key.proof(method: "POST", url: parURL, iat: Self.now))
        #expect(mismatch.reply.status == 400 && mismatch.reply.json?["error"]?.stringValue == "invalid_dpop_proof", "\(mismatch.reply)")
        let malformed = try Self.pushedCode(server, clientId: clientId, basic: basic, owner: owner, bearer: session.bearer,
                                            pairs: [("dpop_jkt", "short")], proof: nil)
        #expect(malformed.reply.status == 400 && malformed.reply.json?["error"]?.stringValue == "invalid_request", "\(malformed.reply)")
    }

    @Test("a client registered --dpop required (dpopBoundAccessTokens) gets invalid_dpop_proof without a proof")
    func requiredByTheClient() throws {
        let server = try TestServer(name: "dpop-req")
        defer { server.http.stop() }
        let owner = SoftAuthenticator()
        let session = try server.client().signUp(owner, username: server.username("dpop"))
        var registration = OAuthClientService.Registration(name: "Must prove", redirectURIs: ["https://rp.example/cb"])
        registration.dpopRequired = true
        let created = try server.services.oauthClients.add(registration, by: .named("test"))
        #expect(OAuthClientRenderer.client(created.client)["dpopBoundAccessTokens"] == true)
        let basic = "Basic " + Base64.encodeStandard(Array("\(created.client.id):\(try #require(created.secret))".utf8))
        let (code, verifier) = try Self.code(server, clientId: created.client.id, owner: owner, bearer: session.bearer)
        let exchange = [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", "https://rp.example/cb"), ("code_verifier", verifier)]
        let bare = try Self.token(server, exchange, proof: nil, basic: basic)
        #expect(bare.status == 400 && bare.json?["error"]?.stringValue == "invalid_dpop_proof", "\(bare)")
        let proved = try Self.token(server, exchange, proof: DPoPKey.generate().proof(method: "POST", url: server.origin + "/oauth2/token", iat: Self.now),
                                    basic: basic)
        #expect(proved.status == 200 && proved.json?["token_type"]?.stringValue == "DPoP", "the refusal left the code usable: \(proved)")
        // The admin API turns it off and on.
        let off = try server.services.oauthClients.update(id: created.client.id, body: ["dpopBoundAccessTokens": false], by: .named("test"))
        #expect(!off.dpopRequired)
        #expect(try server.services.oauthClients.client(id: created.client.id)?.dpopRequired == false)
    }

    @Test("garbage in the DPoP header is a 4xx with the RFC's error at the token endpoint, PAR and userinfo, never a 5xx")
    func garbageIsRefused() throws {
        let server = try TestServer(name: "dpop-junk")
        defer { server.http.stop() }
        let created = try server.services.oauthClients.add(OAuthClientService.Registration(name: "Junk", redirectURIs: ["https://rp.example/cb"]),
                                                           by: .named("test"))
        let basic = "Basic " + Base64.encodeStandard(Array("\(created.client.id):\(try #require(created.secret))".utf8))
        let key = DPoPKey.generate()
        let deep = Base64URL.encode(Array((String(repeating: "{\"a\":", count: 200) + "1" + String(repeating: "}", count: 200)).utf8))
        let junk = ["", "x", "a.b.c", "..", String(repeating: "A", count: 9000), "\(deep).\(deep).AAAA",
                    key.sign(header: ["typ": "dpop+jwt", "alg": "ES256", "jwk": key.jwk], claims: ["iat": 1e300]),
                    key.sign(header: ["typ": "dpop+jwt", "alg": "ES256", "jwk": ["kty": "EC", "crv": "P-256", "x": 1, "y": []]], claims: [:])]
        for proof in junk {
            let token = try Self.token(server, [("grant_type", "refresh_token"), ("refresh_token", "lkor_x")], proof: proof, basic: basic)
            #expect(token.status == 400 && token.json?["error"]?.stringValue == "invalid_dpop_proof", "\(proof.prefix(40)): \(token)")
            let par = try server.client().send("POST", "/oauth2/par", body: OpenIDProviderTests.form([
                ("response_type", "code"), ("client_id", created.client.id), ("redirect_uri", "https://rp.example/cb"), ("scope", "openid"),
                ("code_challenge", Base64URL.encode(Digest.sha256(Array("v".utf8)))), ("code_challenge_method", "S256")]),
                contentType: Self.form, authorization: basic, headers: [("DPoP", proof)])
            #expect(par.status == 400 && par.json?["error"]?.stringValue == "invalid_dpop_proof", "\(proof.prefix(40)): \(par)")
            let info = try Self.userinfo(server, authorization: "DPoP not-a-token", proof: proof)
            #expect(info.status == 401 && info.header("WWW-Authenticate")?.hasPrefix("DPoP ") == true, "\(info)")
        }
        // Two DPoP headers (RFC 9449 §4.3 step 1).
        let good = key.proof(method: "POST", url: server.origin + "/oauth2/token", iat: Self.now)
        let twice = try server.client().send("POST", "/oauth2/token",
                                             body: OpenIDProviderTests.form([("grant_type", "refresh_token"), ("refresh_token", "lkor_x")]),
                                             contentType: Self.form, authorization: basic, headers: [("DPoP", good), ("DPoP", good)])
        #expect(twice.status == 400 && twice.json?["error"]?.stringValue == "invalid_dpop_proof", "\(twice)")
    }
}
