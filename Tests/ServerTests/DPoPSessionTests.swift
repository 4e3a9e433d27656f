import Crypto
import Foundation
import HTTP
import JSON
@testable import LatchkeyServer
import PostgreSQL
import Storage
import Testing
import Tokens
import WebAuthnTesting

/// SPEC "Sender-constrained tokens (DPoP)" for first-party sessions (RFC 9449): a proof on the
/// passkey verify or `/v1/token` binds the session to its key; every `/v1` and `/admin/v1` route
/// then needs `Authorization: DPoP` with a proof by that key; every refusal is 401 `unauthorized`
/// with `WWW-Authenticate: DPoP error=…`; a proof is accepted once, on every instance.
@Suite("DPoP for first-party sessions")
struct DPoPSessionTests {
    static var now: Int64 { Int64(Date().timeIntervalSince1970) }

    /// A passkey login whose verify carries `proof`.
    static func login(_ client: Client, _ authenticator: SoftAuthenticator, proof: (String) -> String?) throws -> Reply {
        let answer = try client.authenticationOptions(username: nil)
        let options = try #require(answer.json, "\(answer)")
        let body = try client.assertion(authenticator, options: options).bytes()
        let url = client.endpoint.origin + "/v1/passkeys/authentication/verify"
        return try client.send("POST", "/v1/passkeys/authentication/verify", body: body, headers: proof(url).map { [("DPoP", $0)] } ?? [])
    }

    static func sessions(_ server: TestServer, _ authorization: String, proof: String?) throws -> Reply {
        try server.client().send("GET", "/v1/sessions", authorization: authorization, headers: proof.map { [("DPoP", $0)] } ?? [])
    }

    static func refresh(_ server: TestServer, _ token: String, proof: String?) throws -> Reply {
        try server.client().send("POST", "/v1/token", body: JSONValue.object([("grant_type", "refresh_token"), ("refresh_token", .string(token))]).serialized(),
                                 headers: proof.map { [("DPoP", $0)] } ?? [])
    }

    /// A refusal as SPEC's HTTP contract says: 401 `unauthorized`, problem+json, the DPoP error.
    static func refused(_ reply: Reply, _ error: String, _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(reply.status == 401 && reply.code == "unauthorized" && reply.isProblem, "\(comment?.description ?? "") \(reply)",
                sourceLocation: sourceLocation)
        #expect(reply.header("WWW-Authenticate")?.hasPrefix("DPoP error=\"\(error)\"") == true,
                "\(comment?.description ?? ""): \(reply.header("WWW-Authenticate") ?? "none")", sourceLocation: sourceLocation)
    }

    @Test("a login with a proof binds the session; the stolen access and refresh tokens are refused without the key, a proof once on every instance")
    func boundSession() throws {
        let a = try TestServer(name: "dpop-session")
        let b = try TestServer(name: "dpop-session-b", rpIdOverride: a.rpId)
        defer { a.http.stop(); b.http.stop() }
        let owner = SoftAuthenticator()
        _ = try a.client().signUp(owner, username: a.username("dpop"))
        let key = DPoPKey.generate(), thief = DPoPKey.generate(.edDSA)
        let sessionsURL = a.origin + "/v1/sessions", tokenURL = a.origin + "/v1/token"

        let signedIn = try Self.login(a.client(), owner) { key.proof(method: "POST", url: $0, iat: Self.now) }
        #expect(signedIn.status == 200 && signedIn.json?["tokens"]?["token_type"]?.stringValue == "DPoP", "\(signedIn)")
        #expect(signedIn.header("DPoP-Nonce")?.count == 22)
        let access = try #require(signedIn.json?["tokens"]?["access_token"]?.stringValue)
        let refresh = try #require(signedIn.json?["tokens"]?["refresh_token"]?.stringValue)
        #expect(JWT.unverifiedClaims(access)?["cnf"]?["jkt"]?.stringValue == key.jkt)

        // The stolen access token: as Bearer, as DPoP without a proof, with the thief's own proof.
        Self.refused(try Self.sessions(a, "Bearer \(access)", proof: nil), "invalid_token", "as Bearer")
        Self.refused(try Self.sessions(a, "DPoP \(access)", proof: nil), "invalid_dpop_proof", "no proof")
        Self.refused(try Self.sessions(a, "DPoP \(access)", proof: thief.proof(method: "GET", url: sessionsURL, iat: Self.now, accessToken: access)),
                     "invalid_dpop_proof", "the thief's key")
        // The key's holder; the same proof again, on the other instance, is a replay.
        let proof = key.proof(method: "GET", url: sessionsURL, iat: Self.now, accessToken: access)
        let owned = try Self.sessions(a, "DPoP \(access)", proof: proof)
        #expect(owned.status == 200 && owned.json?["sessions"]?.arrayValue?.isEmpty == false, "\(owned)")
        #expect(owned.header("DPoP-Nonce") != nil)
        Self.refused(try Self.sessions(b, "DPoP \(access)", proof: proof), "invalid_dpop_proof", "replayed on the second instance")
        // The admin API checks the same way (a user token there is then 403, not 401).
        Self.refused(try a.client().send("GET", "/admin/v1/me", authorization: "Bearer \(access)"), "invalid_token", "admin as Bearer")
        // And a CIBA approval, whose caller is read with the request it names.
        Self.refused(try a.client().send("POST", "/v1/ciba/requests/\(UUID().uuidString.lowercased())/approve", authorization: "Bearer \(access)"),
                     "invalid_token", "CIBA approve as Bearer")

        // The stolen refresh token: without a proof, or with the thief's key; neither uses it up.
        Self.refused(try Self.refresh(a, refresh, proof: nil), "invalid_dpop_proof", "refresh without a proof")
        Self.refused(try Self.refresh(b, refresh, proof: thief.proof(method: "POST", url: tokenURL, iat: Self.now)), "invalid_dpop_proof",
                     "refresh with the thief's key")
        let refreshProof = key.proof(method: "POST", url: tokenURL, iat: Self.now)
        let refreshed = try Self.refresh(b, refresh, proof: refreshProof)
        #expect(refreshed.status == 200 && refreshed.json?["token_type"]?.stringValue == "DPoP", "\(refreshed)")
        let next = try #require(refreshed.json?["refresh_token"]?.stringValue)
        let nextAccess = try #require(refreshed.json?["access_token"]?.stringValue)
        #expect(JWT.unverifiedClaims(nextAccess)?["cnf"]?["jkt"]?.stringValue == key.jkt)
        // That proof is spent on every instance, even with the new refresh token, which it left usable.
        Self.refused(try Self.refresh(a, next, proof: refreshProof), "invalid_dpop_proof", "a refresh proof replayed")
        let fresh = try Self.refresh(a, next, proof: key.proof(method: "POST", url: tokenURL, iat: Self.now))
        #expect(fresh.status == 200, "\(fresh)")
    }

    @Test("a bound session's proof rides in the route's one write: a rename is one write, its proof again changes nothing; a read's proof is its one write")
    func proofInTheRoutesWrite() throws {
        let server = try TestServer(name: "dpop-one-write", tracing: true)
        defer { server.http.stop() }
        let owner = SoftAuthenticator()
        _ = try server.client().signUp(owner, username: server.username("dpop-w"))
        let key = DPoPKey.generate()
        let signedIn = try Self.login(server.client(), owner) { key.proof(method: "POST", url: $0, iat: Self.now) }
        let access = try #require(signedIn.json?["tokens"]?["access_token"]?.stringValue)
        let path = "/v1/passkeys/\(Base64URL.encode(owner.credentialId))"
        func rename(_ name: String, _ proof: String) throws -> Reply {
            try server.client().send("PATCH", path, body: JSONValue.object([("name", .string(name))]).serialized(),
                                     authorization: "DPoP \(access)", headers: [("DPoP", proof)])
        }
        let proof = key.proof(method: "PATCH", url: server.origin + path, iat: Self.now, accessToken: access)
        let renamed = try rename("Laptop", proof)
        #expect(renamed.status == 200, "\(renamed)")
        let work = try #require(server.traces?.lastWork("PATCH /v1/passkeys/{id}"))
        #expect(work.roundTrips.writes == 1 && work.statements.contains { $0.contains("dpop_carried") }, "\(work.statements)")
        // The same proof again: refused, and the change it carried was not made.
        Self.refused(try rename("Stolen", proof), "invalid_dpop_proof", "the rename's proof replayed")
        let listProof = key.proof(method: "GET", url: server.origin + "/v1/passkeys", iat: Self.now, accessToken: access)
        let listed = try server.client().send("GET", "/v1/passkeys", authorization: "DPoP \(access)", headers: [("DPoP", listProof)])
        #expect(listed.json?["passkeys"]?.arrayValue?.first?["name"]?.stringValue == "Laptop", "\(listed)")
        // A read-only route: the proof is its one write, and again it is refused.
        let read = try #require(server.traces?.lastWork("GET /v1/passkeys"))
        #expect(read.roundTrips.writes == 1, "\(read.statements)")
        Self.refused(try server.client().send("GET", "/v1/passkeys", authorization: "DPoP \(access)", headers: [("DPoP", listProof)]),
                     "invalid_dpop_proof", "the list's proof replayed")
    }

    @Test("a sign-up with a proof binds its session as a sign-in does; that proof at another sign-up starts nothing and writes no account")
    func boundSignUp() throws {
        let server = try TestServer(name: "dpop-sign-up")
        defer { server.http.stop() }
        let client = server.client()
        let key = DPoPKey.generate()
        func signUp(_ username: String, proof: String?) throws -> Reply {
            let options = try #require(try client.registrationOptions(username: username).json)
            let authenticator = SoftAuthenticator()
            authenticator.userHandle = userHandle(options)
            let builder = authenticator.registration(challenge: try challengeBytes(options), rpId: server.rpId, origin: server.origin)
            return try client.send("POST", "/v1/passkeys/registration/verify", body: builder.bytes(), headers: proof.map { [("DPoP", $0)] } ?? [])
        }
        func accounts(_ username: String) throws -> Int {
            try server.database.pool.query("SELECT count(*)::int AS n FROM users WHERE username = \(username)")[0].int("n")
        }
        let proof = key.proof(method: "POST", url: server.origin + "/v1/passkeys/registration/verify", iat: Self.now)
        let signedUp = try signUp(server.username("dpop-up"), proof: proof)
        #expect(signedUp.status == 201 && signedUp.json?["tokens"]?["token_type"]?.stringValue == "DPoP", "\(signedUp)")
        let access = try #require(signedUp.json?["tokens"]?["access_token"]?.stringValue)
        #expect(JWT.unverifiedClaims(access)?["cnf"]?["jkt"]?.stringValue == key.jkt)
        Self.refused(try Self.sessions(server, "Bearer \(access)", proof: nil), "invalid_token", "the sign-up's token as Bearer")
        let owned = try Self.sessions(server, "DPoP \(access)",
                                      proof: key.proof(method: "GET", url: server.origin + "/v1/sessions", iat: Self.now, accessToken: access))
        #expect(owned.status == 200, "\(owned)")
        // The same proof at a second sign-up: refused, and nothing of that registration is stored.
        let second = server.username("dpop-up")
        Self.refused(try signUp(second, proof: proof), "invalid_dpop_proof", "the sign-up's proof replayed")
        #expect(try accounts(second) == 0)
        let plain = try signUp(second, proof: nil)
        #expect(plain.status == 201 && plain.json?["tokens"]?["token_type"]?.stringValue == "Bearer", "\(plain)")
        #expect(try accounts(second) == 1)
    }

    @Test("without a proof a session stays Bearer, as before; a Bearer session's token is refused under the DPoP scheme; a refresh with a proof binds it")
    func bearerSession() throws {
        let server = try TestServer(name: "dpop-bearer")
        defer { server.http.stop() }
        let owner = SoftAuthenticator()
        _ = try server.client().signUp(owner, username: server.username("dpop"))
        let plain = try Self.login(server.client(), owner) { _ in nil }
        #expect(plain.status == 200 && plain.json?["tokens"]?["token_type"]?.stringValue == "Bearer" && plain.header("DPoP-Nonce") == nil, "\(plain)")
        let access = try #require(plain.json?["tokens"]?["access_token"]?.stringValue)
        #expect(JWT.unverifiedClaims(access)?["cnf"] == nil)
        #expect(try Self.sessions(server, "Bearer \(access)", proof: nil).status == 200)
        let key = DPoPKey.generate()
        Self.refused(try Self.sessions(server, "DPoP \(access)",
                                       proof: key.proof(method: "GET", url: server.origin + "/v1/sessions", iat: Self.now, accessToken: access)),
                     "invalid_token", "an unbound token under the DPoP scheme")
        // The first refresh with a proof binds the session; from then on the key is needed.
        let refresh = try #require(plain.json?["tokens"]?["refresh_token"]?.stringValue)
        let bound = try Self.refresh(server, refresh, proof: key.proof(method: "POST", url: server.origin + "/v1/token", iat: Self.now))
        #expect(bound.status == 200 && bound.json?["token_type"]?.stringValue == "DPoP", "\(bound)")
        let next = try #require(bound.json?["refresh_token"]?.stringValue)
        Self.refused(try Self.refresh(server, next, proof: nil), "invalid_dpop_proof", "a bound session's refresh without a proof")
    }

    @Test("every malformed proof on a /v1 route is 401 with invalid_dpop_proof, never a 5xx")
    func malformedProofs() throws {
        let server = try TestServer(name: "dpop-bad")
        defer { server.http.stop() }
        let owner = SoftAuthenticator()
        _ = try server.client().signUp(owner, username: server.username("dpop"))
        let key = DPoPKey.generate()
        let signedIn = try Self.login(server.client(), owner) { key.proof(method: "POST", url: $0, iat: Self.now) }
        let access = try #require(signedIn.json?["tokens"]?["access_token"]?.stringValue, "\(signedIn)")
        let url = server.origin + "/v1/sessions"
        let header: JSONValue = .object([("typ", "dpop+jwt"), ("alg", "ES256"), ("jwk", key.jwk)])
        func claims(without: String? = nil, _ changes: [(String, JSONValue)] = []) -> JSONValue {
            var members: [(key: String, value: JSONValue)] = [("jti", .string(Base64URL.encode(SecureRandom.bytes(16)))), ("htm", "GET"),
                                                               ("htu", .string(url)), ("iat", .number(Double(Self.now))),
                                                               ("ath", .string(DPoP.ath(access)))]
            members.removeAll { $0.key == without }
            for (name, value) in changes {
                if let i = members.firstIndex(where: { $0.key == name }) { members[i].value = value } else { members.append((name, value)) }
            }
            return .object(members)
        }
        func with(_ name: String, _ value: JSONValue) -> JSONValue {
            .object((header.objectMembers ?? []).filter { $0.key != name } + [(key: name, value: value)])
        }
        var privateJWK = key.jwk.objectMembers ?? []
        privateJWK.append((key: "d", value: .string(Base64URL.encode(SecureRandom.bytes(32)))))
        let reused = key.sign(header: header, claims: claims())
        #expect(try Self.sessions(server, "DPoP \(access)", proof: reused).status == 200)
        let cases: [(String, String)] = [
            ("not a JWS", "not-a-jwt"),
            ("no jti", key.sign(header: header, claims: claims(without: "jti"))),
            ("no htm", key.sign(header: header, claims: claims(without: "htm"))),
            ("no htu", key.sign(header: header, claims: claims(without: "htu"))),
            ("no iat", key.sign(header: header, claims: claims(without: "iat"))),
            ("no ath", key.sign(header: header, claims: claims(without: "ath"))),
            ("no typ", key.sign(header: .object((header.objectMembers ?? []).filter { $0.key != "typ" }), claims: claims())),
            ("no jwk", key.sign(header: .object((header.objectMembers ?? []).filter { $0.key != "jwk" }), claims: claims())),
            ("typ JWT", key.sign(header: with("typ", "JWT"), claims: claims())),
            ("iat a string", key.sign(header: header, claims: claims([("iat", .string(String(Self.now)))]))),
            ("htm a number", key.sign(header: header, claims: claims([("htm", .number(1))]))),
            ("jti a number", key.sign(header: header, claims: claims([("jti", .number(7))]))),
            ("another method", key.sign(header: header, claims: claims([("htm", "POST")]))),
            ("iat in the future", key.sign(header: header, claims: claims([("iat", .number(Double(Self.now + 300)))]))),
            ("iat in the past", key.sign(header: header, claims: claims([("iat", .number(Double(Self.now - 300)))]))),
            ("another htu", key.sign(header: header, claims: claims([("htu", .string(server.origin + "/v1/passkeys"))]))),
            ("another host", key.sign(header: header, claims: claims([("htu", "https://evil.example/v1/sessions")]))),
            ("reused jti", reused),
            ("ath for another token", key.sign(header: header, claims: claims([("ath", .string(DPoP.ath("another")))]))),
            ("alg HS256", key.sign(header: with("alg", "HS256"), claims: claims())),
            ("alg none", key.sign(header: with("alg", "none"), claims: claims())),
            ("a private key in jwk", key.sign(header: with("jwk", .object(privateJWK)), claims: claims())),
            ("another key's jwk", key.sign(header: with("jwk", DPoPKey.generate().jwk), claims: claims())),
            ("a bad signature", String(key.sign(header: header, claims: claims()).dropLast(4)) + "AAAA"),
        ]
        for (name, proof) in cases {
            Self.refused(try Self.sessions(server, "DPoP \(access)", proof: proof), "invalid_dpop_proof", Comment(rawValue: name))
        }
        // Two DPoP headers.
        let twice = try server.client().send("GET", "/v1/sessions", authorization: "DPoP \(access)",
                                             headers: [("DPoP", key.proof(method: "GET", url: url, iat: Self.now, accessToken: access)),
                                                       ("DPoP", key.proof(method: "GET", url: url, iat: Self.now, accessToken: access))])
        Self.refused(twice, "invalid_dpop_proof", "two DPoP headers")
        // A bad proof at the login's verify is refused before the ceremony, as 401.
        Self.refused(try Self.login(server.client(), owner) { key.proof(method: "GET", url: $0, iat: Self.now) }, "invalid_dpop_proof", "login")
    }

    @Test("a Latchkey-Step-Up counts only beside the access token of the session that asked for it")
    func stepUpStaysInItsSession() throws {
        let server = try TestServer(name: "dpop-stepup")
        defer { server.http.stop() }
        let owner = SoftAuthenticator()
        let first = try server.client().signUp(owner, username: server.username("dpop"))
        let second = try server.client().signIn(owner)
        // Creating recovery codes is a gated change: its step-up made in the first session,
        // presented with the second session's token, is refused; beside the first it is accepted.
        let action: JSONValue = .object([("type", "latchkey.recovery-codes.create")])
        let stepUp = try OpenIDProviderTests.passkeyStepUp(server.client(), bearer: first.bearer, authenticator: owner, action: action)
        let elsewhere = try server.client().post("/v1/recovery-codes", .object([]), authorization: second.bearer,
                                                 headers: [("Latchkey-Step-Up", stepUp)])
        #expect(elsewhere.status == 403 && elsewhere.code == "step_up_required", "\(elsewhere)")
        #expect(elsewhere.text.contains("another session"), "\(elsewhere)")
        let own = try server.client().post("/v1/recovery-codes", .object([]), authorization: first.bearer, headers: [("Latchkey-Step-Up", stepUp)])
        #expect(own.status == 201 || own.status == 200, "\(own)")
    }

    @Test("htu may name the issuer and the allowlisted web origins: https ones, and in development mode the console's http://localhost admin listener")
    func proofOrigins() {
        var c = Configuration()
        c.issuer = "https://example.com"
        c.origins = ["https://example.com", "https://admin.example.com", "http://localhost:8081", "android:apk-key-hash:AAAA"]
        #expect(OAuthPolicy(c).dpopOrigins == ["https://example.com", "https://admin.example.com"])
        c.developmentMode = true
        c.issuer = "http://localhost:8080"
        c.origins = ["http://localhost:8080", "http://localhost:8081"]
        #expect(OAuthPolicy(c).dpopOrigins == ["http://localhost:8080", "http://localhost:8081"])
    }

    @Test("CORS: a browser may send DPoP and read DPoP-Nonce and WWW-Authenticate on /v1")
    func cors() throws {
        let server = try TestServer(name: "dpop-cors")
        defer { server.http.stop() }
        let preflight = try server.client().send("OPTIONS", "/v1/sessions",
                                                 headers: [("Origin", server.origin), ("Access-Control-Request-Method", "GET"),
                                                           ("Access-Control-Request-Headers", "authorization, dpop")])
        #expect(preflight.header("Access-Control-Allow-Headers")?.contains("DPoP") == true, "\(preflight)")
        let refused = try server.client().send("GET", "/v1/sessions", authorization: "DPoP x", headers: [("Origin", server.origin)])
        #expect(refused.status == 401 && refused.header("WWW-Authenticate")?.hasPrefix("DPoP ") == true, "\(refused)")
        let exposed = refused.header("Access-Control-Expose-Headers") ?? ""
        #expect(exposed.contains("DPoP-Nonce") && exposed.contains("WWW-Authenticate"), "\(refused.headers)")
    }
}
