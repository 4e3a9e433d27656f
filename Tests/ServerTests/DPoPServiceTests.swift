import Crypto
import Foundation
import HTTP
import JSON
@testable import LatchkeyServer
import Testing
import Tokens

/// The OpenID Provider's DPoP decisions over the in-memory store (`OAuthWorld`, its stepped clock):
/// the same rules as PostgreSQL's (DPoPOAuthTests) — binding, the same key for a public client's
/// refresh, each proof once.
@Suite("DPoP at the OpenID Provider, in memory")
struct DPoPServiceTests {
    static func presented(_ proof: String, path: String = "/oauth2/token") -> DPoPPresentation {
        DPoPPresentation(proof: proof, repeated: false, method: "POST", path: path)
    }

    @Test("a proof binds the tokens; a public client's refresh needs the same key; a proof is used once")
    func publicClient() throws {
        let w = try OAuthWorld()
        let c = try w.client(public: true)
        let p = try w.person("alice")
        let key = DPoPKey.generate(), thief = DPoPKey.generate()
        let url = w.policy.issuer + "/oauth2/token"
        func proof(_ k: DPoPKey) -> String { k.proof(method: "POST", url: url, iat: w.provider.runtime.unixTime) }
        func token(_ form: [(String, String)], _ dpop: String?) throws(OAuthError) -> JSONValue {
            try w.provider.token(TokenRequest(w.request(c, form + [("client_id", c.id)]), dpop: dpop.map { Self.presented($0) }))
        }
        let code = try w.code(c, by: p)
        let first = proof(key)
        let tokens = try token([("grant_type", "authorization_code"), ("code", code), ("redirect_uri", OAuthWorld.redirectURI),
                                ("code_verifier", OAuthWorld.verifier)], first)
        #expect(tokens["token_type"] == "DPoP")
        let access = try #require(tokens["access_token"]?.stringValue)
        #expect(JWT.unverifiedClaims(access)?["cnf"]?["jkt"]?.stringValue == key.jkt)
        let refresh = try #require(tokens["refresh_token"]?.stringValue)
        let refreshing = [("grant_type", "refresh_token"), ("refresh_token", refresh)]
        #expect(oauthError { () throws(OAuthError) in try token(refreshing, first) }?.code == .invalidDPoPProof, "a replayed proof")
        #expect(oauthError { () throws(OAuthError) in try token(refreshing, nil) }?.code == .invalidGrant, "no proof")
        #expect(oauthError { () throws(OAuthError) in try token(refreshing, proof(thief)) }?.code == .invalidGrant, "another key")
        #expect(try token(refreshing, proof(key))["token_type"] == "DPoP")

        // Userinfo: the bound token as Bearer is refused with the DPoP challenge.
        let bearer = try #require(w.callers.accessToken(access))
        #expect(bearer.dpopKey == key.jkt)
        let refused = oauthError { () throws(OAuthError) in try w.provider.checkPossession(bearer, nil) }
        #expect(refused?.code == .invalidToken && refused?.dpopNonce != nil)
        #expect(refused?.bearerResponse.header("WWW-Authenticate")?.hasPrefix(#"DPoP error="invalid_token""#) == true)
    }
}
