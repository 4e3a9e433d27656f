import Crypto
import Foundation
import JSON
@testable import LatchkeyServer
import Storage
import Testing
import Tokens

/// A `--profile fapi2` client in `OAuthWorld` (in memory, stepped clock): its keys served as a JWKS
/// over loopback HTTP (ES256 `e1`, and one RSA key as `p1` for PS256 and `r1` for RS256), its DPoP
/// key, and the flow as the routes call it — PAR with `private_key_jwt` and a DPoP proof, the
/// authorization request by `request_uri`, the approval, the token endpoint.
struct FAPI2World {
    let w: OAuthWorld
    let keys: ClientKeySetsTests.JWKSServer
    static let es256 = ClientKeySetsTests.SigningKey(kid: "e1", alg: "ES256", key: .generateEC(.p256))
    static let ps256 = ClientKeySetsTests.SigningKey(kid: "p1", alg: "PS256", key: ClientKeySetsTests.rsa)
    static let rs256 = ClientKeySetsTests.SigningKey(kid: "r1", alg: "RS256", key: ClientKeySetsTests.rsa)
    let client: OAuthClientRecord
    let dpop = DPoPKey.generate()

    init() throws {
        w = try OAuthWorld { $0.developmentMode = true }
        keys = try ClientKeySetsTests.JWKSServer(keys: [Self.es256.jwk, Self.ps256.jwk, Self.rs256.jwk])
        var r = OAuthClientService.Registration(name: "Bank", redirectURIs: [OAuthWorld.redirectURI])
        r.jwksURI = keys.uri
        r.profile = .fapi2
        client = try w.clients.add(r, by: .named("admin")).client
    }

    func stop() { keys.stop() }

    var issuer: String { w.policy.issuer }
    var now: Int64 { w.base.runtime.unixTime }
    var nonce: String { w.provider.currentDPoPNonce() ?? "" }

    /// A client assertion (RFC 7523) for this client.
    func assertion(_ key: ClientKeySetsTests.SigningKey = FAPI2World.es256, aud: JSONValue? = nil) throws -> String {
        try key.sign(.object([("iss", .string(client.id)), ("sub", .string(client.id)), ("aud", aud ?? .string(issuer)),
                              ("jti", .string(UUID().uuidString)), ("iat", .number(Double(now))), ("exp", .number(Double(now + 60)))]))
    }

    /// `form` at `endpoint`, the client authenticated by `assertion` (a fresh ES256 one by default).
    func request(_ form: [(String, String)], at endpoint: OAuthEndpoint, assertion: String? = nil) throws -> AuthenticatedClientRequest {
        let all = form + [("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
                          ("client_assertion", try assertion ?? self.assertion())]
        return AuthenticatedClientRequest(client: try w.callers.authenticate(ClientRequest(form: OAuthParameters(all), basic: nil, address: "192.0.2.9"),
                                                                             at: endpoint),
                                          form: OAuthParameters(all))
    }

    /// Which proof a request carries: a fresh one with the current nonce, none, or this one.
    enum Proof { case current, none, given(DPoPPresentation) }

    /// A DPoP proof for `path`, with the current nonce unless `nonce` or `withoutNonce` says otherwise.
    func proof(_ path: String, method: String = "POST", key: DPoPKey? = nil, nonce: String? = nil, withoutNonce: Bool = false,
               accessToken: String? = nil, jti: String = Base64URL.encode(SecureRandom.bytes(16))) -> DPoPPresentation {
        let n: String? = withoutNonce ? nil : nonce ?? self.nonce
        return DPoPPresentation(proof: (key ?? dpop).proof(method: method, url: issuer + path, iat: now, jti: jti, accessToken: accessToken, nonce: n),
                                repeated: false, method: method, path: path)
    }

    /// The pushed request's parameters: PKCE S256, a state and a nonce.
    func pushedParameters(_ extra: [(String, String)] = [], dropping: Set<String> = []) -> [(String, String)] {
        let base = [("client_id", client.id), ("redirect_uri", OAuthWorld.redirectURI), ("response_type", "code"),
                    ("scope", "openid offline_access"), ("state", "st-1"), ("nonce", "n-1"),
                    ("code_challenge", OAuthWorld.challenge), ("code_challenge_method", "S256")]
        return base.filter { !dropping.contains($0.0) } + extra
    }

    /// `POST /oauth2/par`.
    func par(_ form: [(String, String)]? = nil, proof: Proof = .current, assertion: String? = nil) throws -> JSONValue {
        let p = choose(proof, "/oauth2/par")
        return try w.provider.pushed(try request(form ?? pushedParameters(), at: .par, assertion: assertion), dpop: p)
    }

    /// PAR, then the front channel by `request_uri`, then the person's approval: the code.
    func code(by person: OAuthWorld.Person) throws -> String {
        let uri = try #require(try par()["request_uri"]?.stringValue)
        return try w.approve(try w.requestId(w.authorize([("client_id", client.id), ("request_uri", uri)])), by: person)
    }

    /// `POST /oauth2/token` with `form`, authenticated, with `proof` (a current one by default).
    func token(_ form: [(String, String)], proof: Proof = .current, assertion: String? = nil) throws -> JSONValue {
        let p = choose(proof, "/oauth2/token")
        return try w.provider.token(TokenRequest(try request(form, at: .token, assertion: assertion), dpop: p))
    }

    func choose(_ proof: Proof, _ path: String) -> DPoPPresentation? {
        switch proof {
        case .current: self.proof(path)
        case .none: nil
        case .given(let p): p
        }
    }

    func exchange(_ code: String, proof: Proof = .current) throws -> JSONValue {
        try token([("grant_type", "authorization_code"), ("code", code), ("redirect_uri", OAuthWorld.redirectURI),
                   ("code_verifier", OAuthWorld.verifier)], proof: proof)
    }

    func refresh(_ token: String, proof: Proof = .current) throws -> JSONValue {
        try self.token([("grant_type", "refresh_token"), ("refresh_token", token)], proof: proof)
    }
}

/// The OAuth error `body` threw, or nil; any other error fails the test.
func oauthRefusal(_ body: () throws -> Any, sourceLocation: SourceLocation = #_sourceLocation) -> OAuthError? {
    do {
        _ = try body()
        return nil
    } catch let error as OAuthError {
        return error
    } catch {
        Issue.record("not an OAuth error: \(error)", sourceLocation: sourceLocation)
        return nil
    }
}
