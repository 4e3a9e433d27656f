import Crypto
import Foundation
import HTTP
import JSON
import LatchkeyServer
import Testing
import Tokens
import WebAuthn
import WebAuthnTesting

/// SPEC "HTTP contract", happy paths: a new account registers a passkey and signs in with it, for
/// every algorithm and attestation format the soft authenticator makes, over real HTTP and PostgreSQL.
@Suite("Passkey ceremonies (happy paths)")
struct CeremonyTests {
    static let fixture = Result { try TestServer(name: "ceremony") }
    var server: TestServer { get throws { try Self.fixture.get() } }

    static let algorithms: [COSEAlgorithm] = [.es256, .edDSA, .rs256]
    static let formats: [RegistrationFormat] = [.none, .packedSelf]

    @Test("register a new account, then sign in discoverably and username-first", arguments: algorithms, formats)
    func registerAndSignIn(algorithm: COSEAlgorithm, format: RegistrationFormat) throws {
        let server = try server
        let client = server.client()
        let authenticator = SoftAuthenticator(algorithm: algorithm)
        let username = server.username("alg\(algorithm.rawValue)")

        // Creation options: the bare W3C object.
        let optionsReply = try client.registrationOptions(username: username, displayName: "Display \(username)")
        #expect(optionsReply.status == 200)
        #expect(optionsReply.contentType?.hasPrefix("application/json") == true)
        let options = try #require(optionsReply.json)
        #expect(options["rp"]?["id"]?.stringValue == server.rpId)
        #expect(options["user"]?["name"]?.stringValue == username)
        #expect(options["user"]?["displayName"]?.stringValue == "Display \(username)")
        #expect(try challengeBytes(options).count >= 32)
        let algs = options["pubKeyCredParams"]?.arrayValue?.compactMap { $0["alg"]?.intValue } ?? []
        #expect(Set([-7, -8, -257]).isSubset(of: Set(algs)))
        #expect(options["authenticatorSelection"]?["residentKey"]?.stringValue == "required")
        #expect(options["excludeCredentials"]?.arrayValue?.isEmpty == true)
        #expect(options["attestation"]?.stringValue == "none")

        var builder = authenticator.registration(challenge: try challengeBytes(options), rpId: server.rpId, origin: server.origin)
        authenticator.userHandle = userHandle(options)
        builder.format = format
        let reply = try client.send("POST", "/v1/passkeys/registration/verify", body: builder.bytes())
        #expect(reply.status == 201, "\(reply)")
        let registered = try #require(reply.json)
        try expectSessionShape(registered, username: username, displayName: "Display \(username)", authenticator: authenticator)
        #expect(registered["passkey"]?["lastUsedAt"]?.isNull == true)
        let userId = try #require(registered["user"]?["id"]?.stringValue)

        // Discoverable sign-in: `{}` → options without allowCredentials.
        let (discoverableOptions, discoverable) = try client.login(authenticator)
        #expect(discoverableOptions["rpId"]?.stringValue == server.rpId)
        #expect(discoverableOptions["allowCredentials"]?.arrayValue?.isEmpty ?? true)
        #expect(discoverable.status == 200, "\(discoverable)")
        let session = try #require(discoverable.json)
        try expectSessionShape(session, username: username, displayName: "Display \(username)", authenticator: authenticator)
        #expect(session["user"]?["id"]?.stringValue == userId)
        #expect(session["passkey"]?["lastUsedAt"]?.stringValue != nil)

        // Username-first: the options list this account's passkey.
        let (namedOptions, named) = try client.login(authenticator, username: username)
        #expect(namedOptions["rpId"]?.stringValue == server.rpId)
        let allowed = namedOptions["allowCredentials"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
        #expect(allowed == [Base64URL.encode(authenticator.credentialId)])
        #expect(named.status == 200, "\(named)")
        #expect(named.json?["user"]?["id"]?.stringValue == userId)
    }

    @Test("a signed-in user adds a second passkey; excludeCredentials lists the first")
    func secondPasskey() throws {
        let server = try server
        let client = server.client()
        let first = SoftAuthenticator(algorithm: .es256), second = SoftAuthenticator(algorithm: .edDSA)
        let username = server.username("second")
        let session = try client.signUp(first, username: username)

        let (options, reply) = try client.register(second, authorization: session.bearer, approver: first, format: .packedSelf)
        #expect(options["user"]?["name"]?.stringValue == username)
        #expect(options["excludeCredentials"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == [Base64URL.encode(first.credentialId)])
        #expect(reply.status == 201, "\(reply)")
        #expect(reply.json?["user"]?["id"]?.stringValue == session.userId)
        #expect(reply.json?["passkey"]?["id"]?.stringValue == Base64URL.encode(second.credentialId))

        let list = try client.get("/v1/passkeys", authorization: session.bearer)
        #expect(list.status == 200)
        let ids = Set(list.json?["passkeys"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? [])
        #expect(ids == [Base64URL.encode(first.credentialId), Base64URL.encode(second.credentialId)])

        // Both sign in to the same account.
        #expect(try client.signIn(second).userId == session.userId)
        #expect(try client.signIn(first, username: username).userId == session.userId)

        // The same credential again for this user: credential_exists (409).
        let (_, again) = try client.register(second, authorization: session.bearer, approver: first)
        #expect(again.status == 409)
        #expect(again.code == "credential_exists")
    }

    @Test("an app backend's enrolment ticket lets its user register a passkey, once")
    func enrolmentTicket() throws {
        let server = try server
        let client = server.client()
        let username = server.username("ticket"), externalId = "ext-\(uniqueSuffix())"
        let ticketReply = try client.enrolmentTicket(externalId: externalId, username: username)
        #expect(ticketReply.status == 201, "\(ticketReply)")
        let ticket = try #require(ticketReply.json?["ticket"]?.stringValue)
        let userId = try #require(ticketReply.json?["userId"]?.stringValue)
        #expect(ticketReply.json?["expiresAt"]?.stringValue != nil)

        let authenticator = SoftAuthenticator(algorithm: .es256)
        let (options, reply) = try client.register(authenticator, authorization: "Ticket \(ticket)")
        #expect(options["user"]?["name"]?.stringValue == username)
        #expect(reply.status == 201, "\(reply)")
        #expect(reply.json?["user"]?["id"]?.stringValue == userId)
        #expect(reply.json?["user"]?["username"]?.stringValue == username)
        #expect(try client.signIn(authenticator, username: username).userId == userId)

        // Single use.
        let second = try client.post("/v1/passkeys/registration/options", .object([]), authorization: "Ticket \(ticket)")
        #expect(second.status == 401)
        #expect(second.code == "unauthorized")
        #expect(second.isProblem)
    }

    @Test("list, rename and revoke passkeys; someone else's is 404; a revoked one is credential_unknown")
    func passkeyManagement() throws {
        let server = try server
        let client = server.client()
        let mine = SoftAuthenticator(), theirs = SoftAuthenticator()
        let me = try client.signUp(mine, username: server.username("owner"))
        let other = try client.signUp(theirs, username: server.username("other"))
        let myId = Base64URL.encode(mine.credentialId), theirId = Base64URL.encode(theirs.credentialId)

        let list = try client.get("/v1/passkeys", authorization: me.bearer)
        #expect(list.status == 200)
        let passkeys = try #require(list.json?["passkeys"]?.arrayValue)
        #expect(passkeys.count == 1)
        try expectPasskeyShape(try #require(passkeys.first), authenticator: mine)
        #expect(try client.get("/v1/passkeys").status == 401)
        #expect(try client.get("/v1/passkeys", authorization: "Bearer not-a-token").code == "unauthorized")

        let renamed = try client.send("PATCH", "/v1/passkeys/\(myId)", body: JSONValue.object([("name", "Work laptop")]).serialized(),
                                      authorization: me.bearer)
        #expect(renamed.status == 200, "\(renamed)")
        #expect(renamed.json?["name"]?.stringValue == "Work laptop")
        #expect(try client.get("/v1/passkeys", authorization: me.bearer).json?["passkeys"]?.arrayValue?.first?["name"]?.stringValue
                == "Work laptop")

        // Someone else's passkey does not exist for me.
        let foreignRename = try client.send("PATCH", "/v1/passkeys/\(theirId)", body: JSONValue.object([("name", "mine now")]).serialized(),
                                            authorization: me.bearer)
        #expect(foreignRename.status == 404)
        #expect(foreignRename.code == "not_found")
        let foreignDelete = try client.revokePasskey(theirs.credentialId, authorization: me.bearer, approver: mine)
        #expect(foreignDelete.status == 404)
        #expect(foreignDelete.code == "not_found")
        #expect(try client.signIn(theirs).userId == other.userId)

        // The account's last way in is kept (409, before the step-up); with a recovery code it may go.
        expectProblem(try client.send("DELETE", "/v1/passkeys/\(myId)", authorization: me.bearer), 409, "last_passkey")
        try LastWayInTests.giveRecoveryCode(me.userId)
        // Without the step-up SPEC "Assurance" asks for, nothing happens.
        expectProblem(try client.send("DELETE", "/v1/passkeys/\(myId)", authorization: me.bearer), 403, "step_up_required")
        let deleted = try client.revokePasskey(mine.credentialId, authorization: me.bearer, approver: mine)
        // SPEC "Signal API": DELETE answers 200 with the remaining credentials' signals (none left here).
        #expect(deleted.status == 200, "\(deleted)")
        #expect(deleted.json?["signals"]?.arrayValue?.first?["options"]?["allAcceptedCredentialIds"] == .array([]))
        // The session that passkey began ended with it (SPEC "Sessions"): its token is refused at once.
        #expect(try client.get("/v1/passkeys", authorization: me.bearer).code == "unauthorized")
        #expect(try client.send("DELETE", "/v1/passkeys/\(myId)", authorization: me.bearer).status == 401)
        let (_, refused) = try client.login(mine)
        #expect(refused.status == 400)
        #expect(refused.code == "credential_unknown")
    }

    @Test("refresh rotates (form and JSON); reusing a rotated token revokes the whole family")
    func refreshRotation() throws {
        let server = try server
        let client = server.client()
        let session = try client.signUp(SoftAuthenticator(), username: server.username("refresh"))
        let first = session.refreshToken

        let formReply = try client.send("POST", "/v1/token",
                                        body: Array("grant_type=refresh_token&refresh_token=\(first)".utf8),
                                        contentType: "application/x-www-form-urlencoded")
        #expect(formReply.status == 200, "\(formReply)")
        let formTokens = try #require(formReply.json)
        try expectTokensShape(formTokens)
        let second = try #require(formTokens["refresh_token"]?.stringValue)
        #expect(second != first)
        // The new access token works.
        let access = try #require(formTokens["access_token"]?.stringValue)
        #expect(try client.get("/v1/passkeys", authorization: "Bearer \(access)").status == 200)

        let jsonReply = try client.post("/v1/token", .object([("grant_type", "refresh_token"), ("refresh_token", .string(second))]))
        #expect(jsonReply.status == 200, "\(jsonReply)")
        try expectTokensShape(try #require(jsonReply.json))
        let third = try #require(jsonReply.json?["refresh_token"]?.stringValue)

        // Reuse of a rotated token: refused, and the newest token of the family dies with it.
        let reuse = try client.post("/v1/token", .object([("grant_type", "refresh_token"), ("refresh_token", .string(first))]))
        #expect(reuse.status == 400)
        #expect(reuse.code == "invalid_grant")
        let newest = try client.post("/v1/token", .object([("grant_type", "refresh_token"), ("refresh_token", .string(third))]))
        #expect(newest.status == 400)
        #expect(newest.code == "invalid_grant")

        let unknown = try client.post("/v1/token", .object([("grant_type", "refresh_token"), ("refresh_token", "lkr_nope")]))
        #expect(unknown.code == "invalid_grant")
        let wrongGrant = try client.post("/v1/token", .object([("grant_type", "password"), ("refresh_token", .string(third))]))
        #expect(wrongGrant.status == 400)
        #expect(wrongGrant.code == "invalid_request")
    }

    @Test("logout revokes the refresh-token family")
    func logout() throws {
        let server = try server
        let client = server.client()
        let authenticator = SoftAuthenticator()
        _ = try client.signUp(authenticator, username: server.username("logout"))
        let session = try client.signIn(authenticator)
        #expect(try client.send("POST", "/v1/logout").status == 401)
        let out = try client.send("POST", "/v1/logout", authorization: session.bearer)
        #expect(out.status == 204)
        let refresh = try client.post("/v1/token", .object([("grant_type", "refresh_token"), ("refresh_token", .string(session.refreshToken))]))
        #expect(refresh.status == 400)
        #expect(refresh.code == "invalid_grant")
    }

    @Test("the JWKS verifies the access token (RFC 9068 claims)")
    func jwksVerifiesAccessToken() throws {
        let server = try server
        let client = server.client()
        let session = try client.signUp(SoftAuthenticator(), username: server.username("jwks"))
        let jwksReply = try client.get("/.well-known/jwks.json")
        #expect(jwksReply.status == 200)
        #expect(jwksReply.contentType?.hasPrefix("application/json") == true)
        let keys = try #require(jwksReply.json?["keys"]?.arrayValue)

        let headerBytes = try #require(Base64URL.decode(String(session.accessToken.split(separator: ".")[0])))
        let header = try #require(try JSONParser.parse(headerBytes).objectValue)
        let kid = try #require(header.first { $0.key == "kid" }?.value.stringValue)
        let jwk = try #require(keys.first { $0["kid"]?.stringValue == kid })
        #expect(jwk["kty"]?.stringValue == "EC")
        #expect(jwk["crv"]?.stringValue == "P-256")
        let x = try #require(jwk["x"]?.stringValue.flatMap(Base64URL.decode))
        let y = try #require(jwk["y"]?.stringValue.flatMap(Base64URL.decode))
        let key = try PublicKey.ec(curve: .p256, x: x, y: y)
        let claims = try JWT.verify(session.accessToken, keys: [kid: key], now: Int64(Date().timeIntervalSince1970))
        #expect(claims["sub"]?.stringValue == session.userId)
        #expect(claims["aud"]?.stringValue == server.rpId)
        #expect(claims["iss"]?.stringValue == server.configuration.issuer)
        for claim in ["exp", "iat", "jti", "client_id", "auth_time"] { #expect(claims[claim] != nil, "missing \(claim)") }
        let exp = try #require(claims["exp"]?.intValue), iat = try #require(claims["iat"]?.intValue)
        let lifetime = exp - iat
        #expect(lifetime > 0 && lifetime <= 300)

        // A token signed by a key not in the set does not verify.
        let forged = JWT.sign(claims: .object([("sub", .string(session.userId)), ("exp", 9_999_999_999)]), key: SigningKey.generate())
        #expect(throws: TokenError.self) { try JWT.verify(forged, keys: [kid: key], now: Int64(Date().timeIntervalSince1970)) }
        #expect(try client.get("/v1/passkeys", authorization: "Bearer \(forged)").status == 401)
    }

    @Test("healthz, readyz and Prometheus metrics")
    func operations() throws {
        let server = try server
        let client = server.client()
        let health = try client.get("/healthz")
        #expect(health.status == 200)
        #expect(health.json?["status"]?.stringValue == "ok")
        let ready = try client.get("/readyz")
        #expect(ready.status == 200)
        #expect(ready.json?["status"]?.stringValue == "ready")
        // One ceremony outcome so the metrics have something to say.
        _ = try client.send("POST", "/v1/passkeys/authentication/verify", body: Array("{}".utf8))
        let metrics = try client.get("/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.contentType?.hasPrefix("text/plain") == true)
        #expect(metrics.text.contains("# TYPE latchkey_http_requests_total counter"))
        #expect(metrics.text.contains("latchkey_http_requests_total{route=\"/healthz\",method=\"GET\",status=\"200\"}"))
        #expect(metrics.text.contains("# TYPE latchkey_http_request_duration_seconds histogram"))
        #expect(metrics.text.contains("latchkey_ceremonies_total{ceremony=\"authentication\",outcome=\"invalid_request\"}"))
        #expect(metrics.text.contains("latchkey_db_pool_connections{state=\"open\"}"))
        // Every non-comment line is `name{labels} value` or `name value`.
        for line in metrics.text.split(separator: "\n") where !line.hasPrefix("#") {
            let value = line.split(separator: " ").last.map(String.init) ?? ""
            #expect(Double(value) != nil || value == "+Inf", "bad sample line: \(line)")
        }
    }
}

// MARK: Shapes (SPEC "Shapes and decisions")

func expectSessionShape(_ json: JSONValue, username: String, displayName: String, authenticator: SoftAuthenticator,
                        sourceLocation: SourceLocation = #_sourceLocation) throws {
    // SPEC "Signal API": registration and login answers also carry `signals` (issue 12).
    #expect(json.objectValue?.map(\.key).sorted() == ["passkey", "signals", "tokens", "user"], sourceLocation: sourceLocation)
    let methods = json["signals"]?.arrayValue?.compactMap { $0["method"]?.stringValue }
    #expect(methods == ["signalAllAcceptedCredentials", "signalCurrentUserDetails"], sourceLocation: sourceLocation)
    let user = try #require(json["user"], sourceLocation: sourceLocation)
    #expect(user.objectValue?.map(\.key).sorted() == ["displayName", "id", "username"], sourceLocation: sourceLocation)
    #expect(user["username"]?.stringValue == username, sourceLocation: sourceLocation)
    #expect(user["displayName"]?.stringValue == displayName, sourceLocation: sourceLocation)
    #expect(user["id"]?.stringValue?.isEmpty == false, sourceLocation: sourceLocation)
    try expectPasskeyShape(try #require(json["passkey"], sourceLocation: sourceLocation), authenticator: authenticator,
                           sourceLocation: sourceLocation)
    try expectTokensShape(try #require(json["tokens"], sourceLocation: sourceLocation), sourceLocation: sourceLocation)
}

func expectPasskeyShape(_ passkey: JSONValue, authenticator: SoftAuthenticator, sourceLocation: SourceLocation = #_sourceLocation) throws {
    #expect(passkey.objectValue?.map(\.key).sorted()
            == ["aaguid", "backedUp", "backupEligible", "createdAt", "flagged", "id", "lastUsedAt", "name", "prfEnabled", "provider", "providerIcon", "transports"],
            sourceLocation: sourceLocation)
    // The zero AAGUID is in no list: no icon, but the member is there.
    if authenticator.aaguid.allSatisfy({ $0 == 0 }) { #expect(passkey["providerIcon"] == .null, sourceLocation: sourceLocation) }
    #expect(passkey["id"]?.stringValue == Base64URL.encode(authenticator.credentialId), sourceLocation: sourceLocation)
    #expect(passkey["name"]?.stringValue?.isEmpty == false, sourceLocation: sourceLocation)
    #expect(passkey["provider"]?.stringValue != nil || passkey["provider"]?.isNull == true, sourceLocation: sourceLocation)
    #expect(passkey["aaguid"]?.stringValue == "00000000-0000-0000-0000-000000000000", sourceLocation: sourceLocation)
    let created = passkey["createdAt"]?.stringValue ?? ""
    #expect(created.count == 20 && created.hasSuffix("Z") && created.contains("T"), "createdAt \(created)", sourceLocation: sourceLocation)
    #expect(passkey["lastUsedAt"]?.isNull == true || passkey["lastUsedAt"]?.stringValue != nil, sourceLocation: sourceLocation)
    #expect(passkey["backupEligible"]?.boolValue == authenticator.backupEligible, sourceLocation: sourceLocation)
    #expect(passkey["backedUp"]?.boolValue == authenticator.backedUp, sourceLocation: sourceLocation)
    #expect(passkey["transports"]?.arrayValue?.compactMap(\.stringValue) == ["internal", "hybrid"], sourceLocation: sourceLocation)
    #expect(passkey["flagged"]?.boolValue != nil, sourceLocation: sourceLocation)
    #expect(passkey["prfEnabled"]?.boolValue != nil, sourceLocation: sourceLocation)
}

func expectTokensShape(_ tokens: JSONValue, sourceLocation: SourceLocation = #_sourceLocation) throws {
    #expect(tokens.objectValue?.map(\.key).sorted() == ["access_token", "expires_in", "refresh_token", "token_type"],
            sourceLocation: sourceLocation)
    #expect(tokens["token_type"]?.stringValue == "Bearer", sourceLocation: sourceLocation)
    let expiresIn = try #require(tokens["expires_in"]?.intValue, sourceLocation: sourceLocation)
    #expect(expiresIn > 0 && expiresIn <= 300, sourceLocation: sourceLocation)
    #expect(tokens["access_token"]?.stringValue?.split(separator: ".").count == 3, sourceLocation: sourceLocation)
    #expect(tokens["refresh_token"]?.stringValue?.isEmpty == false, sourceLocation: sourceLocation)
}
