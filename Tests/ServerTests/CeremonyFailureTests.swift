import Crypto
import Foundation
import HTTP
import JSON
import LatchkeyServer
import Testing
import WebAuthn
import WebAuthnTesting

/// SPEC "Shapes and decisions": start from a valid ceremony, change one thing, expect one code.
@Suite("Ceremony failures")
struct CeremonyFailureTests {
    static let fixture = Result { try TestServer(name: "failures") }
    var server: TestServer { get throws { try Self.fixture.get() } }

    /// One account with one ES256 passkey, signed in.
    func account(_ client: Client, signCount: UInt32 = 0) throws -> (SoftAuthenticator, Session, String) {
        let authenticator = SoftAuthenticator(algorithm: .es256, signCount: signCount)
        let username = try server.username("acct")
        return (authenticator, try client.signUp(authenticator, username: username), username)
    }

    func expectProblem(_ reply: Reply, _ status: Int, _ code: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(reply.status == status, "\(reply)", sourceLocation: sourceLocation)
        #expect(reply.code == code, "\(reply)", sourceLocation: sourceLocation)
        #expect(reply.isProblem, "content-type \(reply.contentType ?? "none")", sourceLocation: sourceLocation)
        let json = reply.json
        #expect(json?["status"]?.intValue == status, sourceLocation: sourceLocation)
        #expect(json?["type"]?.stringValue != nil && json?["title"]?.stringValue != nil && json?["detail"]?.stringValue != nil,
                sourceLocation: sourceLocation)
    }

    // MARK: Challenges

    @Test("replaying a successful assertion → challenge_invalid; the same registration response again → 409 credential_exists naming the passkey, no tokens (issue 23)")
    func replay() throws {
        let client = try server.client()
        let authenticator = SoftAuthenticator()
        let options = try #require(try client.registrationOptions(username: try server.username("replay")).json)
        let registration = authenticator.registration(challenge: try challengeBytes(options), rpId: try server.rpId,
                                                      origin: try server.origin).bytes()
        authenticator.userHandle = userHandle(options)
        #expect(try client.send("POST", "/v1/passkeys/registration/verify", body: registration).status == 201)
        // A client whose answer was lost cannot tell; the retry says the passkey was saved.
        let again = try client.send("POST", "/v1/passkeys/registration/verify", body: registration)
        expectProblem(again, 409, "credential_exists")
        #expect(again.json?["passkey"]?["id"]?.stringValue == Base64URL.encode(authenticator.credentialId))
        #expect(again.json?["tokens"] == nil && !again.text.contains("access_token"), "a retried registration never mints tokens")
        // Another response for the same credential id (its challenge used up) is still challenge_invalid.
        var other = authenticator.registration(challenge: try challengeBytes(options), rpId: try server.rpId, origin: try server.origin)
        other.clientData.crossOrigin = nil  // clientDataJSON without the member: not the response that registered it
        expectProblem(try client.send("POST", "/v1/passkeys/registration/verify", body: other.bytes()), 400, "challenge_invalid")

        let loginOptions = try #require(try client.authenticationOptions().json)
        let assertion = try client.assertion(authenticator, options: loginOptions).bytes()
        #expect(try client.send("POST", "/v1/passkeys/authentication/verify", body: assertion).status == 200)
        expectProblem(try client.send("POST", "/v1/passkeys/authentication/verify", body: assertion), 400, "challenge_invalid")
    }

    @Test("a challenge of the other ceremony → challenge_invalid")
    func otherCeremonysChallenge() throws {
        let client = try server.client()
        let (authenticator, _, _) = try account(client)
        // Authentication options' challenge inside a registration.
        let loginOptions = try #require(try client.authenticationOptions().json)
        let registration = SoftAuthenticator().registration(challenge: try challengeBytes(loginOptions), rpId: try server.rpId,
                                                            origin: try server.origin)
        expectProblem(try client.send("POST", "/v1/passkeys/registration/verify", body: registration.bytes()), 400, "challenge_invalid")
        // Registration options' challenge inside an assertion.
        let registrationOptions = try #require(try client.registrationOptions(username: try server.username("cross")).json)
        let assertion = try client.assertion(authenticator, options: registrationOptions)
        expectProblem(try client.send("POST", "/v1/passkeys/authentication/verify", body: assertion.bytes()), 400, "challenge_invalid")
        // A challenge no server issued.
        var made = try client.assertion(authenticator, options: loginOptions)
        made.clientData.challenge = SecureRandomBytes.make(32)
        expectProblem(try client.send("POST", "/v1/passkeys/authentication/verify", body: made.bytes()), 400, "challenge_invalid")
    }

    @Test("a failed verification still uses the challenge up")
    func failureConsumesChallenge() throws {
        let client = try server.client()
        let (authenticator, _, _) = try account(client)
        let options = try #require(try client.authenticationOptions().json)
        var bad = try client.assertion(authenticator, options: options)
        bad.corruptSignature = true
        expectProblem(try client.send("POST", "/v1/passkeys/authentication/verify", body: bad.bytes()), 400, "signature_invalid")
        let good = try client.assertion(authenticator, options: options)
        expectProblem(try client.send("POST", "/v1/passkeys/authentication/verify", body: good.bytes()), 400, "challenge_invalid")
    }

    // MARK: One field broken

    enum Breakage: String, CaseIterable, Sendable {
        case wrongType, wrongOrigin, wrongRpId, userNotPresent, crossOrigin
        var code: String {
            switch self {
            case .wrongType: "invalid_request"
            case .wrongOrigin, .crossOrigin: "origin_not_allowed"
            case .wrongRpId: "rp_id_mismatch"
            case .userNotPresent: "user_presence_required"
            }
        }
    }

    @Test("registration with one field broken → its code", arguments: Breakage.allCases)
    func brokenRegistration(_ breakage: Breakage) throws {
        let client = try server.client()
        let authenticator = SoftAuthenticator()
        let (_, reply) = try client.register(authenticator, username: try server.username("breg")) { b in
            switch breakage {
            case .wrongType: b.clientData.type = "webauthn.get"
            case .wrongOrigin: b.clientData.origin = "https://evil.example"
            case .wrongRpId: b.rpId = "evil.example"
            case .userNotPresent: b.userPresent = false
            case .crossOrigin: b.clientData.crossOrigin = true; b.clientData.topOrigin = "https://evil.example"
            }
        }
        expectProblem(reply, 400, breakage.code)
    }

    @Test("assertion with one field broken → its code", arguments: Breakage.allCases)
    func brokenAssertion(_ breakage: Breakage) throws {
        let client = try server.client()
        let (authenticator, _, _) = try account(client)
        let (_, reply) = try client.login(authenticator) { b in
            switch breakage {
            case .wrongType: b.clientData.type = "webauthn.create"
            case .wrongOrigin: b.clientData.origin = "https://evil.example"
            case .wrongRpId: b.rpId = "evil.example"
            case .userNotPresent: b.userPresent = false
            case .crossOrigin: b.clientData.crossOrigin = true; b.clientData.topOrigin = "https://evil.example"
            }
        }
        expectProblem(reply, 400, breakage.code)
    }

    @Test("a flipped signature bit → signature_invalid; a corrupt packed attestation → attestation_invalid")
    func badSignatures() throws {
        let client = try server.client()
        let (authenticator, _, _) = try account(client)
        let (_, reply) = try client.login(authenticator) { $0.corruptSignature = true }
        expectProblem(reply, 400, "signature_invalid")
        let (_, registration) = try client.register(SoftAuthenticator(), username: try server.username("att"), format: .packedSelf) {
            $0.corruptAttestationSignature = true
        }
        expectProblem(registration, 400, "attestation_invalid")
    }

    @Test("an assertion from a passkey the server never saw → credential_unknown")
    func unknownCredential() throws {
        let client = try server.client()
        let (_, reply) = try client.login(SoftAuthenticator())
        expectProblem(reply, 400, "credential_unknown")
    }

    @Test("username-first: another account's passkey → credential_unknown")
    func credentialOfAnotherAccount() throws {
        let client = try server.client()
        let (mine, _, _) = try account(client)
        let (_, _, otherUsername) = try account(client)
        let (_, reply) = try client.login(mine, username: otherUsername)
        expectProblem(reply, 400, "credential_unknown")
    }

    @Test("discoverable login whose assertion has no userHandle → invalid_request, no signal (WebAuthn L3 §7.2 step 6)")
    func discoverableWithoutUserHandle() throws {
        let client = try server.client()
        let (authenticator, _, username) = try account(client)
        for handle: [UInt8]? in [nil, []] {
            let (_, reply) = try client.login(authenticator) { $0.userHandle = handle }
            expectProblem(reply, 400, "invalid_request")
            // Not credential_unknown: the passkey exists, so no signalUnknownCredential may tell the provider to drop it.
            #expect(reply.json?["signal"] == nil, "\(reply)")
        }
        // Username-first: the user was identified before the ceremony, so the handle stays optional.
        let (_, named) = try client.login(authenticator, username: username) { $0.userHandle = nil }
        #expect(named.status == 200, "\(named)")
        // And with the handle the passkey stored, discoverable login works.
        #expect(try client.login(authenticator).reply.status == 200)
    }

    @Test("a 64 KiB body of thousands of JSON members → 400 invalid_request, refused by the member cap (issue 13, defect 9)")
    func thousandsOfMembers() throws {
        let client = try server.client()
        let members = (0..<6000).map { "\"k\($0)\":0" }.joined(separator: ",")
        for path in ["/v1/passkeys/authentication/verify", "/v1/passkeys/registration/verify", "/v1/passkeys/authentication/options"] {
            let reply = try client.send("POST", path, body: Array("{\(members)}".utf8))
            expectProblem(reply, 400, "invalid_request")
            #expect(reply.json?["detail"]?.stringValue?.contains("more than 1024 members") == true, "\(reply)")
        }
    }

    @Test("a sign count that goes backwards → sign_count_regression, and the passkey is flagged")
    func signCountRegression() throws {
        let client = try server.client()
        let (authenticator, session, _) = try account(client, signCount: 10)
        let (_, first) = try client.login(authenticator)  // 11
        #expect(first.status == 200, "\(first)")
        #expect(first.json?["passkey"]?["flagged"]?.boolValue == false)
        let (_, regressed) = try client.login(authenticator) { $0.signCount = 5 }
        expectProblem(regressed, 400, "sign_count_regression")
        let (_, equal) = try client.login(authenticator) { $0.signCount = 11 }
        expectProblem(equal, 400, "sign_count_regression")
        let list = try client.get("/v1/passkeys", authorization: session.bearer)
        #expect(list.json?["passkeys"]?.arrayValue?.first?["flagged"]?.boolValue == true)
    }

    @Test("a credential without rawId → invalid_request (SPEC: a required member that is missing)")
    func missingRawId() throws {
        let client = try server.client()
        let (authenticator, _, _) = try account(client)
        let options = try #require(try client.authenticationOptions().json)
        let body = try client.assertion(authenticator, options: options).json().setting("rawId", nil)
        let reply = try client.send("POST", "/v1/passkeys/authentication/verify", body: body.serialized())
        expectProblem(reply, 400, "invalid_request")
    }

    // MARK: Options

    @Test("registration options for a taken username without a session → 409 conflict")
    func usernameTaken() throws {
        let client = try server.client()
        let (_, _, username) = try account(client)
        expectProblem(try client.registrationOptions(username: username), 409, "conflict")
        expectProblem(try client.post("/v1/passkeys/registration/options", .object([])), 400, "invalid_request")
    }

    @Test("username-first options for an unknown username: 200 with the same decoy on every call")
    func decoyAllowCredentials() throws {
        let client = try server.client()
        let unknown = try server.username("ghost")
        let first = try client.authenticationOptions(username: unknown)
        let second = try client.authenticationOptions(username: unknown)
        #expect(first.status == 200)
        #expect(second.status == 200)
        let decoy = try #require(first.json?["allowCredentials"]?.arrayValue)
        #expect(!decoy.isEmpty)
        #expect(decoy == second.json?["allowCredentials"]?.arrayValue)
        #expect(decoy.allSatisfy { $0["type"]?.stringValue == "public-key" && $0["id"]?.stringValue.flatMap(Base64URL.decode) != nil })
        #expect(first.json?["rpId"]?.stringValue == (try server.rpId))
        #expect(first.json?["challenge"] != second.json?["challenge"])
        // Another unknown name gets another decoy (derived from the name).
        let other = try client.authenticationOptions(username: try server.username("ghost"))
        #expect(other.json?["allowCredentials"]?.arrayValue != decoy)
    }

    @Test("username-first decoys look like real passkeys: transports in the order browsers report them, ids and counts of several shapes")
    func decoyShapes() throws {
        let client = try server.client()
        var lengths: Set<Int> = [], counts: Set<Int> = []
        for _ in 0..<24 {
            let decoy = try #require(try client.authenticationOptions(username: try server.username("ghost")).json?["allowCredentials"]?.arrayValue)
            counts.insert(decoy.count)
            for d in decoy {
                lengths.insert(try #require(d["id"]?.stringValue.flatMap(Base64URL.decode)).count)
                // WebAuthn L3 getTransports(): sorted lexicographically, as every browser-registered passkey stores them.
                let transports = d["transports"]?.arrayValue?.compactMap(\.stringValue) ?? []
                #expect(transports == transports.sorted(), "\(transports)")
            }
        }
        #expect(lengths.count > 1, "every decoy id has one length: \(lengths)")
        #expect(counts.count > 1 || lengths.count > 2, "every decoy has one credential: \(counts)")
    }

    // MARK: HTTP-level problems

    @Test("404, 405, 415 and 413 are problem+json")
    func httpProblems() throws {
        let client = try server.client()
        let notFound = try client.get("/v1/nope")
        #expect(notFound.status == 404)
        #expect(notFound.code == "not_found")
        #expect(notFound.isProblem)

        let wrongMethod = try client.get("/v1/passkeys/registration/options")
        #expect(wrongMethod.status == 405)
        #expect(wrongMethod.isProblem)
        #expect(wrongMethod.code != nil)
        #expect(wrongMethod.header("Allow")?.contains("POST") == true)

        let wrongType = try client.send("POST", "/v1/passkeys/authentication/options", body: Array("username=x".utf8), contentType: "text/plain")
        #expect(wrongType.status == 415)
        #expect(wrongType.isProblem)
        #expect(wrongType.code != nil)

        let big = JSONValue.object([("username", .string(String(repeating: "a", count: 70_000)))]).serialized()
        let tooLarge = try client.send("POST", "/v1/passkeys/authentication/options", body: big)
        #expect(tooLarge.status == 413)
        #expect(tooLarge.code == "payload_too_large")
        #expect(tooLarge.isProblem)

        let malformed = try client.send("POST", "/v1/passkeys/authentication/verify", body: Array("{\"id\":".utf8))
        expectProblem(malformed, 400, "invalid_request")
        // The server still answers on a fresh connection.
        #expect(try server.client().get("/healthz").status == 200)
    }

    @Test("admin routes: no key or a wrong key → 401, a user's token → 403, the key → 200")
    func adminAuthorization() throws {
        let client = try server.client()
        let (_, session, _) = try account(client)
        let adminKey = try server.adminKey
        expectProblem(try client.get("/admin/v1/origins"), 401, "unauthorized")
        expectProblem(try client.get("/admin/v1/origins", authorization: "Bearer wrong-\(adminKey)"), 401, "unauthorized")
        expectProblem(try client.get("/admin/v1/origins", authorization: session.bearer), 403, "forbidden")
        expectProblem(try client.post("/admin/v1/users/ext-\(uniqueSuffix())/enrolment-tickets",
                                      .object([("username", "nobody")])), 401, "unauthorized")
        let ok = try client.get("/admin/v1/origins", authorization: "Bearer \(adminKey)")
        #expect(ok.status == 200)
        #expect(ok.json?["origins"]?.arrayValue?.contains { $0["origin"]?.stringValue == (try? server.origin) } == true)
        let ticket = try client.post("/admin/v1/users/ext-\(uniqueSuffix())/enrolment-tickets",
                                     .object([("username", .string(try server.username("t")))]), authorization: session.bearer)
        expectProblem(ticket, 403, "forbidden")
    }
}

/// Registration and login under `LATCHKEY_USER_VERIFICATION=required`.
@Suite("User verification required")
struct UserVerificationRequiredTests {
    static let fixture = Result { try TestServer(name: "uvreq") { $0.userVerification = .required } }

    @Test("UV cleared → user_verification_required, in both ceremonies")
    func uvCleared() throws {
        let server = try Self.fixture.get()
        let client = server.client()
        let options = try #require(try client.registrationOptions(username: server.username("uv")).json)
        #expect(options["authenticatorSelection"]?["userVerification"]?.stringValue == "required")
        let (_, unverified) = try client.register(SoftAuthenticator(), username: server.username("uv")) { $0.userVerified = false }
        #expect(unverified.status == 400)
        #expect(unverified.code == "user_verification_required")

        let authenticator = SoftAuthenticator()
        _ = try client.signUp(authenticator, username: server.username("uv"))
        let (loginOptions, reply) = try client.login(authenticator) { $0.userVerified = false }
        #expect(loginOptions["userVerification"]?.stringValue == "required")
        #expect(reply.status == 400)
        #expect(reply.code == "user_verification_required")
        #expect(try client.login(authenticator).reply.status == 200)
    }
}

/// `LATCHKEY_SIGN_COUNT_POLICY=flag`: a regressed counter still signs in, flagged.
@Suite("Sign-count policy flag")
struct SignCountFlagPolicyTests {
    static let fixture = Result { try TestServer(name: "flagpolicy") { $0.signCountPolicy = .flag } }

    @Test("a regression signs in with \"flagged\": true")
    func flagged() throws {
        let server = try Self.fixture.get()
        let client = server.client()
        let authenticator = SoftAuthenticator(signCount: 20)
        let session = try client.signUp(authenticator, username: server.username("flag"))
        #expect(try client.signIn(authenticator).passkey["flagged"]?.boolValue == false)
        let (_, reply) = try client.login(authenticator) { $0.signCount = 3 }
        #expect(reply.status == 200, "\(reply)")
        #expect(reply.json?["passkey"]?["flagged"]?.boolValue == true)
        #expect(reply.json?["user"]?["id"]?.stringValue == session.userId)
        let list = try client.get("/v1/passkeys", authorization: session.bearer)
        #expect(list.json?["passkeys"]?.arrayValue?.first?["flagged"]?.boolValue == true)
    }

    /// Issue 9: the passkey assertion step exists once, so a step-up records a possible clone (and
    /// the backup state) exactly as a login does. Before, the step-up copy only moved the counter.
    @Test("a passkey step-up with a regressed counter is approved and flags the passkey")
    func stepUpRegressionFlags() throws {
        let server = try Self.fixture.get()
        let client = server.client()
        let authenticator = SoftAuthenticator(signCount: 40)
        authenticator.backupEligible = true  // a synced passkey, not backed up yet
        let session = try client.signUp(authenticator, username: server.username("flagstep"))
        #expect(try client.signIn(authenticator).passkey["flagged"]?.boolValue == false)  // counter 41

        let action: JSONValue = .object([("type", "transfer"), ("amount", "1.00")])
        let challenge = try client.post("/v1/step-up/challenges", .object([("method", "passkey"), ("action", action)]),
                                        authorization: session.bearer)
        #expect(challenge.status == 201, "\(challenge)")
        let c = try #require(challenge.json)
        var assertion = try client.assertion(authenticator, options: try #require(c["publicKey"]))
        assertion.signCount = 7
        authenticator.backedUp = true  // BS may change at any use; the step-up records it like a login
        let approved = try client.post("/v1/step-up/verify", .object([("challengeId", c["challengeId"]!), ("credential", assertion.json())]),
                                       authorization: session.bearer)
        #expect(approved.status == 200, "\(approved)")
        let passkey = try #require(try client.get("/v1/passkeys", authorization: session.bearer).json?["passkeys"]?.arrayValue?.first)
        #expect(passkey["flagged"]?.boolValue == true)
        #expect(passkey["backedUp"]?.boolValue == true)
    }
}

enum SecureRandomBytes {
    static func make(_ n: Int) -> [UInt8] { (0..<n).map { _ in UInt8.random(in: 0...255) } }
}
