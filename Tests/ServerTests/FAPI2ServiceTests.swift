import Crypto
import Foundation
import JSON
@testable import LatchkeyServer
import Storage
import Testing
import Tokens

/// SPEC "FAPI 2.0 Security Profile" per client (`--profile fapi2`), decided by the provider over the
/// in-memory OAuth store on a stepped clock: each rule, and each refusal with its RFC error.
@Suite("FAPI 2.0 profile: the provider's rules")
struct FAPI2ServiceTests {
    @Test("registration: confidential private_key_jwt only, never RS256 id_tokens; the registration describes the profile")
    func registration() throws {
        let f = try FAPI2World()
        defer { f.stop() }
        #expect(f.client.isFAPI2 && f.client.authMethod == .privateKeyJWT)
        let rendered = OAuthClientRenderer.client(f.client)
        #expect(rendered["profile"] == "fapi2" && rendered["dpopBoundAccessTokens"] == true)
        #expect(rendered["profileMetadata"]?["require_pushed_authorization_requests"] == true)
        #expect(rendered["profileMetadata"]?["token_endpoint_auth_method"] == "private_key_jwt")
        func refused(_ change: (inout OAuthClientService.Registration) -> Void) -> String? {
            var r = OAuthClientService.Registration(name: "Bank", redirectURIs: [OAuthWorld.redirectURI])
            r.jwksURI = f.keys.uri
            r.profile = .fapi2
            change(&r)
            do { _ = try f.w.clients.add(r, by: .named("admin")); return nil } catch { return error.code.rawValue }
        }
        #expect(refused { $0.isPublic = true; $0.jwksURI = nil } == "invalid_request", "--public")
        #expect(refused { $0.idTokenAlg = "RS256" } == "invalid_request", "--id-token-alg RS256")
        #expect(refused { $0.jwksURI = nil } == "invalid_request", "a secret instead of private_key_jwt")
        #expect(refused { $0.pkceRequired = false } == "invalid_request", "--pkce optional")
        #expect(refused { _ in } == nil)
        // The admin API's member: "fapi2" or null; a combination the command line refuses is 400.
        let body: JSONValue = ["name": "Bank", "redirectUris": [.string(OAuthWorld.redirectURI)], "jwksUri": .string(f.keys.uri), "profile": "fapi2"]
        #expect(try OAuthClientService.registration(body).profile == .fapi2)
        var bad = body
        bad = .object((bad.objectValue ?? []).map { $0.key == "profile" ? (key: "profile", value: "fapi1") : $0 })
        #expect(throws: ServiceError.self) { try OAuthClientService.registration(bad) }
        let publicFAPI: JSONValue = ["name": "Bank", "redirectUris": ["http://127.0.0.1/cb"], "public": true, "profile": "fapi2"]
        #expect(throws: ServiceError.self) { try OAuthClientService.registration(publicFAPI) }
        #expect(throws: ServiceError.self) { try f.w.clients.update(id: f.client.id, body: ["idTokenSignedResponseAlg": "RS256"], by: .named("admin")) }
        #expect(try f.w.clients.update(id: f.client.id, body: ["profile": .null], by: .named("admin")).profile == nil)
        #expect(try f.w.clients.update(id: f.client.id, body: ["profile": "fapi2"], by: .named("admin")).profile == .fapi2)
    }

    @Test("the front channel without request_uri is invalid_request (redirected with iss); PAR answers expires_in 90")
    func parRequired() throws {
        let f = try FAPI2World()
        defer { f.stop() }
        let answer = f.w.authorize(f.pushedParameters())
        guard case .redirect(let location, _) = answer else { Issue.record("\(answer)"); return }
        #expect(try OAuthWorld.query(location, "error") == "invalid_request")
        #expect(try OAuthWorld.query(location, "iss") == f.issuer)
        #expect(try OAuthWorld.query(location, "state") == "st-1")
        let pushed = try f.par()
        #expect(pushed["expires_in"] == 90)
        #expect(pushed["request_uri"]?.stringValue?.hasPrefix("urn:ietf:params:oauth:request_uri:") == true)
    }

    @Test("PAR: redirect_uri, PKCE S256, a DPoP binding, a nonce ≤ 64 characters, response_mode query — each refusal its error")
    func pushedRequestRules() throws {
        let f = try FAPI2World()
        defer { f.stop() }
        func error(_ form: [(String, String)], proof: FAPI2World.Proof = .current) -> String? {
            oauthRefusal { try f.par(form, proof: proof) }?.error
        }
        #expect(error(f.pushedParameters(dropping: ["redirect_uri"])) == "invalid_request")
        #expect(error(f.pushedParameters(dropping: ["code_challenge", "code_challenge_method"])) == "invalid_request")
        #expect(error(f.pushedParameters([("code_challenge_method", "plain")], dropping: ["code_challenge_method"])) == "invalid_request")
        #expect(error(f.pushedParameters([("response_mode", "fragment")])) == "invalid_request")
        #expect(error(f.pushedParameters([("response_type", "code id_token")], dropping: ["response_type"])) == "unsupported_response_type")
        #expect(error(f.pushedParameters([("nonce", String(repeating: "n", count: 65))], dropping: ["nonce"])) == "invalid_request")
        #expect(error(f.pushedParameters([("nonce", String(repeating: "n", count: 64))], dropping: ["nonce"])) == nil)
        // DPoP: no proof and no dpop_jkt; dpop_jkt alone binds the code.
        #expect(error(f.pushedParameters(), proof: .none) == "invalid_request")
        #expect(error(f.pushedParameters([("dpop_jkt", f.dpop.jkt)]), proof: .none) == nil)
    }

    @Test("nonces at PAR and the token endpoint: use_dpop_nonce with the nonce; the previous slot's accepted, an older one not")
    func nonces() throws {
        let f = try FAPI2World()
        defer { f.stop() }
        let bare = try #require(oauthRefusal { try f.par(proof: .given(f.proof("/oauth2/par", withoutNonce: true))) })
        #expect(bare.error == "use_dpop_nonce" && bare.dpopNonce == f.nonce)
        let stale = f.nonce
        f.w.clock.advance(10)
        #expect(try f.par(proof: .given(f.proof("/oauth2/par", nonce: stale)))["request_uri"] != nil, "the previous slot's nonce")
        f.w.clock.advance(10)
        #expect(oauthRefusal { try f.par(proof: .given(f.proof("/oauth2/par", nonce: stale))) }?.error == "use_dpop_nonce")
        let person = try f.w.person("nina")
        let code = try f.code(by: person)
        let noNonce = try #require(oauthRefusal { try f.exchange(code, proof: .given(f.proof("/oauth2/token", withoutNonce: true))) })
        #expect(noNonce.error == "use_dpop_nonce" && noNonce.dpopNonce == f.nonce)
        #expect(try f.exchange(code)["token_type"] == "DPoP", "the refusal left the code usable")
    }

    @Test("ES256, PS256 and EdDSA only: an RS256 DPoP proof is invalid_dpop_proof at PAR and the token endpoint")
    func algorithms() throws {
        let f = try FAPI2World()
        defer { f.stop() }
        let rs = DPoPKey.generate(.rs256)
        #expect(oauthRefusal { try f.par(proof: .given(f.proof("/oauth2/par", key: rs))) }?.error == "invalid_dpop_proof")
        for alg in [DPoPAlgorithm.ps256, .edDSA] {
            #expect(try f.par(proof: .given(f.proof("/oauth2/par", key: DPoPKey.generate(alg))))["request_uri"] != nil, "\(alg)")
        }
        let code = try f.code(by: try f.w.person("olga"))
        #expect(oauthRefusal { try f.exchange(code, proof: .given(f.proof("/oauth2/token", key: rs))) }?.error == "invalid_dpop_proof")
    }

    @Test("private_key_jwt: ES256 or PS256 with aud exactly the issuer as a string; RS256, another aud, an array: invalid_client")
    func clientAssertions() throws {
        let f = try FAPI2World()
        defer { f.stop() }
        let form = f.pushedParameters()
        #expect(try f.par(form, assertion: try f.assertion(FAPI2World.ps256))["request_uri"] != nil)
        #expect(oauthRefusal { try f.par(form, assertion: try f.assertion(FAPI2World.rs256)) }?.error == "invalid_client")
        for aud: JSONValue in [.string(f.issuer + "/oauth2/token"), .string(f.issuer + "/oauth2/par"), .array([.string(f.issuer)])] {
            #expect(oauthRefusal { try f.par(form, assertion: try f.assertion(aud: aud)) }?.error == "invalid_client", "aud \(aud)")
        }
        // Another client keeps RFC 7523's wider audiences.
        let secret = try f.w.client()
        _ = try f.w.request(secret, [("grant_type", "refresh_token")], at: .par)
    }

    @Test("the token endpoint: a proof required, by the key the code is bound to; codes live 60 s")
    func codeBinding() throws {
        let f = try FAPI2World()
        defer { f.stop() }
        let person = try f.w.person("pia")
        let code = try f.code(by: person)
        #expect(oauthRefusal { try f.exchange(code, proof: .none) }?.error == "invalid_dpop_proof")
        #expect(oauthRefusal { try f.exchange(code, proof: .given(f.proof("/oauth2/token", key: DPoPKey.generate()))) }?.error == "invalid_grant")
        let late = try f.code(by: person)
        f.w.clock.advance(61)
        #expect(oauthRefusal { try f.exchange(late) }?.error == "invalid_grant", "a code older than 60 s")
    }

    @Test("refresh tokens do not rotate: no refresh_token in the answer, the same token again and again, until revoked")
    func refreshWithoutRotation() throws {
        let f = try FAPI2World()
        defer { f.stop() }
        let tokens = try f.exchange(try f.code(by: try f.w.person("quinn")))
        #expect(tokens["token_type"] == "DPoP")
        #expect(JWT.unverifiedClaims(try #require(tokens["access_token"]?.stringValue))?["cnf"]?["jkt"]?.stringValue == f.dpop.jkt)
        let refresh = try #require(tokens["refresh_token"]?.stringValue)
        for _ in 0..<3 {
            let refreshed = try f.refresh(refresh)
            #expect(refreshed["refresh_token"] == nil && refreshed["access_token"] != nil && refreshed["token_type"] == "DPoP")
        }
        #expect(oauthRefusal { try f.refresh(refresh, proof: .none) }?.error == "invalid_dpop_proof")
        try f.w.provider.revoke(try f.request([("token", refresh)], at: .revoke))
        #expect(oauthRefusal { try f.refresh(refresh) }?.error == "invalid_grant", "revoked")
    }

    @Test("a proof at PAR is recorded with the pushed request: the same proof again is invalid_dpop_proof")
    func parProofReplay() throws {
        let f = try FAPI2World()
        defer { f.stop() }
        let proof = f.proof("/oauth2/par")
        #expect(try f.par(proof: .given(proof))["request_uri"] != nil)
        #expect(oauthRefusal { try f.par(proof: .given(proof)) }?.error == "invalid_dpop_proof")
    }
}
