import Crypto
import Foundation
import HTTP
import JSON
@testable import LatchkeyServer
import Storage
import Testing
import Tokens
import WebAuthnTesting

/// SPEC "FAPI 2.0 Security Profile" over HTTP and PostgreSQL: a `--profile fapi2` client's whole
/// flow — PAR with `private_key_jwt` (ES256) and a DPoP proof, the nonce demanded and retried,
/// the approval, the token with a nonce, userinfo with DPoP, refreshes that do not rotate, and a
/// stolen refresh token refused without the client's key.
@Suite("FAPI 2.0 profile over HTTP")
struct FAPI2HTTPTests {
    static let form = "application/x-www-form-urlencoded"
    static var now: Int64 { Int64(Date().timeIntervalSince1970) }

    @Test("PAR + private_key_jwt + DPoP with nonce retry, authorize, token, userinfo, refresh without rotation, a stolen refresh token")
    func flow() throws {
        let server = try TestServer(name: "fapi2") { $0.developmentMode = true }
        let keys = try ClientKeySetsTests.JWKSServer(keys: [FAPI2World.es256.jwk])
        defer { server.http.stop(); keys.stop() }
        var registration = OAuthClientService.Registration(name: "Bank", redirectURIs: ["https://rp.example/cb"])
        (registration.jwksURI, registration.profile) = (keys.uri, .fapi2)
        let client = try server.services.oauthClients.add(registration, by: .named("test")).client
        let owner = SoftAuthenticator()
        let session = try server.client().signUp(owner, username: server.username("fapi"))
        let key = DPoPKey.generate()
        func assertion() throws -> [(String, String)] {
            let jwt = try FAPI2World.es256.sign(.object([("iss", .string(client.id)), ("sub", .string(client.id)), ("aud", .string(server.origin)),
                                                        ("jti", .string(UUID().uuidString)), ("exp", .number(Double(Self.now + 60)))]))
            return [("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"), ("client_assertion", jwt)]
        }
        func post(_ path: String, _ pairs: [(String, String)], proof: String?) throws -> Reply {
            try server.client().send("POST", path, body: OpenIDProviderTests.form(pairs), contentType: Self.form,
                                     headers: proof.map { [("DPoP", $0)] } ?? [])
        }
        let verifier = Base64URL.encode(SecureRandom.bytes(32))
        let pushed = [("response_type", "code"), ("client_id", client.id), ("redirect_uri", "https://rp.example/cb"), ("scope", "openid offline_access"),
                      ("code_challenge", Base64URL.encode(Digest.sha256(Array(verifier.utf8)))), ("code_challenge_method", "S256"), ("nonce", "n-1")]
        let parURL = server.origin + "/oauth2/par", tokenURL = server.origin + "/oauth2/token"

        // PAR: the nonce is demanded, then the retry with it is accepted; its proof's jti is recorded.
        let first = try post("/oauth2/par", pushed + (try assertion()), proof: key.proof(method: "POST", url: parURL, iat: Self.now))
        #expect(first.status == 400 && first.json?["error"]?.stringValue == "use_dpop_nonce", "\(first)")
        let nonce = try #require(first.header("DPoP-Nonce"))
        let parProof = key.proof(method: "POST", url: parURL, iat: Self.now, nonce: nonce)
        let accepted = try post("/oauth2/par", pushed + (try assertion()), proof: parProof)
        #expect(accepted.status == 201 && accepted.json?["expires_in"] == 90, "\(accepted)")
        #expect(accepted.header("DPoP-Nonce") != nil)
        let replayed = try post("/oauth2/par", pushed + (try assertion()), proof: parProof)
        #expect(replayed.status == 400 && replayed.json?["error"]?.stringValue == "invalid_dpop_proof", "\(replayed)")
        let uri = try #require(accepted.json?["request_uri"]?.stringValue)

        // The front channel without request_uri is refused; with it, the person approves.
        let direct = try server.client().get("/oauth2/authorize?" + String(decoding: OpenIDProviderTests.form(pushed), as: UTF8.self))
        #expect(direct.status == 303 && direct.header("Location")?.contains("error=invalid_request") == true, "\(direct)")
        #expect(direct.header("Location")?.contains("iss=") == true)
        let (code, _) = try DPoPOAuthTests.code(server, clientId: client.id, owner: owner, bearer: session.bearer,
                                                query: [("client_id", client.id), ("request_uri", uri)])

        // The token endpoint demands the nonce too.
        let exchange = [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", "https://rp.example/cb"), ("code_verifier", verifier)]
        let noNonce = try post("/oauth2/token", exchange + (try assertion()), proof: key.proof(method: "POST", url: tokenURL, iat: Self.now))
        #expect(noNonce.status == 400 && noNonce.json?["error"]?.stringValue == "use_dpop_nonce", "\(noNonce)")
        let tokenNonce = try #require(noNonce.header("DPoP-Nonce"))
        let tokens = try post("/oauth2/token", exchange + (try assertion()),
                              proof: key.proof(method: "POST", url: tokenURL, iat: Self.now, nonce: tokenNonce))
        #expect(tokens.status == 200 && tokens.json?["token_type"]?.stringValue == "DPoP", "\(tokens)")
        let access = try #require(tokens.json?["access_token"]?.stringValue)
        let refresh = try #require(tokens.json?["refresh_token"]?.stringValue)

        // userinfo with the key's proof.
        let info = try DPoPOAuthTests.userinfo(server, authorization: "DPoP \(access)",
                                               proof: key.proof(method: "GET", url: server.origin + "/oauth2/userinfo", iat: Self.now, accessToken: access))
        #expect(info.status == 200 && info.json?["sub"]?.stringValue == session.userId, "\(info)")

        // Refreshes that do not rotate: no refresh_token, and the same token works again.
        for _ in 0..<2 {
            let n = try #require(try post("/oauth2/token", [("grant_type", "refresh_token"), ("refresh_token", refresh)] + (try assertion()),
                                          proof: key.proof(method: "POST", url: tokenURL, iat: Self.now)).header("DPoP-Nonce"))
            let refreshed = try post("/oauth2/token", [("grant_type", "refresh_token"), ("refresh_token", refresh)] + (try assertion()),
                                     proof: key.proof(method: "POST", url: tokenURL, iat: Self.now, nonce: n))
            #expect(refreshed.status == 200 && refreshed.json?["refresh_token"] == nil && refreshed.json?["access_token"] != nil, "\(refreshed)")
        }

        // A stolen refresh token, with the thief's own DPoP key but without the client's key: invalid_client.
        let thief = DPoPKey.generate()
        let stolen = try post("/oauth2/token", [("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", client.id)],
                              proof: thief.proof(method: "POST", url: tokenURL, iat: Self.now, nonce: tokenNonce))
        #expect(stolen.status == 401 && stolen.json?["error"]?.stringValue == "invalid_client", "\(stolen)")
    }
}
