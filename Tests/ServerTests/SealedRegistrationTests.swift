import Crypto
import Foundation
import HTTP
import JSON
import PostgreSQL
import Storage
import Testing
import WebAuthn
import WebAuthnTesting
@testable import LatchkeyServer

/// SPEC "Rules that must hold" → Challenges and "Performance targets": registration options write
/// nothing (the ceremony state, with a ticket or step-up the options checked, is sealed into the
/// challenge), and the verify is one read and one write that records the challenge used — with the
/// passkey, the ticket's use and the step-up's redemption, or alone when the verify fails.
@Suite("Sealed registration challenges")
struct SealedRegistrationTests {
    static let fixture = Result { try TestServer(name: "sealed-reg") }

    /// Rows in `challenges` for this server's rpId, and in `used_challenges` (shared by every server of the database).
    static func rows(_ server: TestServer) throws -> (challenges: Int, used: Int) {
        let row = try server.database.pool.query("""
            SELECT (SELECT count(*)::int FROM challenges WHERE rp_id = \(server.rpId)) AS c, (SELECT count(*)::int FROM used_challenges) AS u
            """)[0]
        return (try row.int("c"), try row.int("u"))
    }

    /// Whether the registration challenge of `options` is recorded used.
    static func used(_ server: TestServer, _ options: JSONValue) throws -> Bool {
        let id = try server.services.passkeys.openRegistration(try challengeBytes(options)).id
        return try server.database.pool.query("SELECT EXISTS (SELECT 1 FROM used_challenges WHERE id = \(id)) AS u")[0].bool("u")
    }

    /// The verify body `authenticator` makes for `options`.
    static func response(_ server: TestServer, _ authenticator: SoftAuthenticator, _ options: JSONValue,
                         change: (inout RegistrationBuilder) -> Void = { _ in }) throws -> [UInt8] {
        authenticator.userHandle = userHandle(options)
        var builder = authenticator.registration(challenge: try challengeBytes(options), rpId: server.rpId, origin: server.origin)
        change(&builder)
        return builder.bytes()
    }

    static func verify(_ client: Client, _ body: [UInt8], headers: [(String, String)] = []) throws -> Reply {
        try client.send("POST", "/v1/passkeys/registration/verify", body: body, headers: headers)
    }

    @Test("the sealed state reads back as written, for every purpose; its challenge stays far under 1 kB with the longest names")
    func layout() throws {
        let long = String(repeating: "𝔘", count: 64)  // 64 characters of 4 bytes: the longest name SPEC allows
        let cases: [SealedRegistration] = [
            SealedRegistration(userVerification: .preferred, purpose: .signUp, conditional: false, conformanceAlgorithms: false, account: "a",
                               newAccount: .init(userHandle: SecureRandom.bytes(32), username: "ann", displayName: "ann"),
                               ticketHash: nil, stepUp: nil, expiresAt: Date(timeIntervalSince1970: 1_800_000_000.123), random: SecureRandom.bytes(32)),
            SealedRegistration(userVerification: .required, purpose: .signUp, conditional: false, conformanceAlgorithms: true, account: "b",
                               newAccount: .init(userHandle: SecureRandom.bytes(32), username: long, displayName: long),
                               ticketHash: nil, stepUp: nil, expiresAt: Date(timeIntervalSince1970: 1_800_000_000), random: SecureRandom.bytes(32)),
            SealedRegistration(userVerification: .discouraged, purpose: .held, conditional: true, conformanceAlgorithms: false,
                               account: "c", newAccount: nil, ticketHash: SecureRandom.bytes(32), stepUp: nil,
                               expiresAt: Date(timeIntervalSince1970: 1_800_000_000), random: SecureRandom.bytes(32)),
            SealedRegistration(userVerification: .required, purpose: .addToAccount, conditional: false, conformanceAlgorithms: false,
                               account: "d", newAccount: nil, ticketHash: nil, stepUp: .init(jti: "jti-1", actionHash: SecureRandom.bytes(32)),
                               expiresAt: Date(timeIntervalSince1970: 1_800_000_000), random: SecureRandom.bytes(32)),
            SealedRegistration(userVerification: .required, purpose: .recovery(id: "rec_x"), conditional: false, conformanceAlgorithms: false,
                               account: "e", newAccount: nil, ticketHash: nil, stepUp: nil,
                               expiresAt: Date(timeIntervalSince1970: 1_800_000_000), random: SecureRandom.bytes(32)),
        ]
        var longest = cases[1]
        longest.newAccount?.displayName = String(repeating: "𝔙", count: 64)
        for state in cases + [longest] {
            let plaintext = try #require(state.plaintext())
            #expect(try SealedRegistration(plaintext: plaintext) == state)
        }
        let challenge = try #require(longest.plaintext()).count + CeremonySeal.overhead
        #expect(challenge < 700, "\(challenge) bytes")
        // The default display name (the username) is not sealed twice.
        #expect(try #require(cases[0].plaintext()).count < 200)
        // A sign-in's plaintext is of another kind.
        let signIn = try #require(SealedAuthentication(userVerification: .required, account: nil, context: nil, expiresAt: Date(),
                                                       random: SecureRandom.bytes(32)).plaintext())
        #expect(throws: ServiceError.self) { try SealedRegistration(plaintext: signIn) }
        var trailing = try #require(cases[3].plaintext())
        trailing.append(0)
        #expect(throws: ServiceError.self) { try SealedRegistration(plaintext: trailing) }
    }

    @Test("options write nothing: a new account, a session with its step-up, a ticket")
    func optionsWriteNothing() throws {
        // A server of its own: the suite's other tests make challenges on the shared one meanwhile.
        let server = try TestServer(name: "sealed-reg-nothing")
        defer { server.http.stop() }
        let client = server.client()
        let first = SoftAuthenticator()
        let session = try client.signUp(first, username: server.username("owner"))
        let token = try client.stepUpToken(first, authorization: session.bearer, action: Client.passkeyAddition)
        let ticket = try #require(try client.enrolmentTicket(externalId: "ext-\(uniqueSuffix())", username: server.username("tk")).json?["ticket"]?
            .stringValue)
        let before = try Self.rows(server)
        #expect(try client.registrationOptions(username: server.username("new")).status == 200)
        let withStepUp = try client.post("/v1/passkeys/registration/options", .object([]), authorization: session.bearer,
                                         headers: [("Latchkey-Step-Up", token)])
        #expect(withStepUp.status == 200, "\(withStepUp)")
        let withTicket = try client.post("/v1/passkeys/registration/options", .object([]), authorization: "Ticket \(ticket)")
        #expect(withTicket.status == 200, "\(withTicket)")
        let after = try Self.rows(server)
        #expect(after.challenges == before.challenges)
        // The step-up is not redeemed and the ticket not used by the options.
        let jti = try #require(stepUpJTI(token))
        #expect(try server.database.pool.query("SELECT consumed_at IS NULL AS open FROM step_up_receipts WHERE token_jti = \(jti)")[0].bool("open"))
        #expect(try server.database.pool.query("SELECT used_at IS NULL AS open FROM enrolment_tickets WHERE hash = \(OpaqueSecret.hash(ticket))")[0]
            .bool("open"))
    }

    @Test("options for an existing account are one read: the caller (session with its step-up, ticket) and the account together")
    func optionsForAnAccountAreOneRead() throws {
        let server = try TestServer(name: "sealed-reg-one-read", tracing: true)
        defer { server.http.stop() }
        let client = server.client()
        let first = SoftAuthenticator()
        let session = try client.signUp(first, username: server.username("owner"))
        let token = try client.stepUpToken(first, authorization: session.bearer, action: Client.passkeyAddition)
        let ticket = try #require(try client.enrolmentTicket(externalId: "ext-\(uniqueSuffix())", username: server.username("tk")).json?["ticket"]?
            .stringValue)
        func measured(_ headers: [(String, String)], authorization: String) throws -> (Reply, RoundTripCounts, [String]) {
            try server.fewestTrips("POST /v1/passkeys/registration/options", "POST", "/v1/passkeys/registration/options", body: .object([]),
                                   authorization: authorization, headers: headers)
        }
        let (withStepUp, stepUpTrips, stepUpStatements) = try measured([("Latchkey-Step-Up", token)], authorization: session.bearer)
        #expect(withStepUp.status == 200, "\(withStepUp)")
        #expect(stepUpTrips == RoundTripCounts(reads: 1), "a session with its step-up: \(stepUpTrips) \(stepUpStatements)")
        #expect(excluded(withStepUp.json) == 1, "the preloaded account's passkey is excluded: \(withStepUp)")
        let (withTicket, ticketTrips, ticketStatements) = try measured([], authorization: "Ticket \(ticket)")
        #expect(withTicket.status == 200, "\(withTicket)")
        #expect(ticketTrips == RoundTripCounts(reads: 1), "a ticket: \(ticketTrips) \(ticketStatements)")
        // A step-up already redeemed is refused after the same one read, before any ceremony opens.
        let options = try #require(withStepUp.json)
        #expect(try Self.verify(client, try Self.response(server, SoftAuthenticator(), options)).status == 201)
        let (redeemed, redeemedTrips, _) = try measured([("Latchkey-Step-Up", token)], authorization: session.bearer)
        expectProblem(redeemed, 403, "step_up_required")
        #expect(redeemedTrips == RoundTripCounts(reads: 1), "\(redeemedTrips)")
        // A ticket that does not exist reads nothing of an account and is 401.
        let (unknown, unknownTrips, _) = try measured([], authorization: "Ticket \(String(repeating: "A", count: 43))")
        #expect(unknown.status == 401, "\(unknown)")
        #expect(unknownTrips == RoundTripCounts(reads: 1), "\(unknownTrips)")
    }

    /// How many credentials registration options exclude.
    func excluded(_ options: JSONValue?) -> Int? { options?["excludeCredentials"]?.arrayValue?.count }

    @Test("a verify is one read and one write; a replay is the saved-retry answer, another response to it challenge_invalid")
    func verifyRoundTrips() throws {
        // A server of its own: the round-trip counter is per route, and the suite's tests run in parallel.
        // Its clock stands still, so the origin allowlist read once stays fresh (it is re-read every
        // second). Other suites' admin changes on the same database still invalidate it now and then
        // (the change feed), so three registrations are counted and the cheapest must be exact.
        let server = try TestServer(name: "sealed-reg-trips", runtime: ManualClock().runtime())
        defer { server.http.stop() }
        let client = server.client()
        _ = try client.signUp(SoftAuthenticator(), username: server.username("warm"))  // the sealing key, the origins
        var optionTrips: [Int] = [], verifyTrips: [Int] = []
        var first: (options: JSONValue, body: [UInt8], reply: Reply)? = nil
        for _ in 0..<3 {
            var options: JSONValue = .null
            optionTrips.append(try SealedLoginTests.trips(server, "POST /v1/passkeys/registration/options") {
                options = try #require(try client.registrationOptions(username: server.username("trips")).json)
            })
            let body = try Self.response(server, SoftAuthenticator(), options)
            var reply: Reply? = nil
            verifyTrips.append(try SealedLoginTests.trips(server, "POST /v1/passkeys/registration/verify") {
                reply = try Self.verify(client, body, headers: [("Accept-Language", "de")])
            })
            #expect(reply?.status == 201, "\(String(describing: reply))")
            if first == nil, let reply { first = (options, body, reply) }
        }
        #expect(optionTrips.min() == 1, "the username's one read: \(optionTrips)")
        #expect(verifyTrips.min() == 2, "the read and the statement: \(verifyTrips)")
        let (options, body, registered) = try #require(first)
        let reply: Reply? = registered
        // The language memo rode in the same statement (a new account: in its row).
        let userId = try #require(reply?.json?["user"]?["id"]?.stringValue)
        #expect(try server.database.pool.query("SELECT language FROM users WHERE id = \(userId)")[0].optionalString("language") == "de")
        #expect(accepted(reply?.json)?.count == 1, "\(String(describing: reply))")
        // The same response again: it was saved (RegistrationRetry); one read, nothing written.
        var again: Reply? = nil
        let replayTrips = try SealedLoginTests.trips(server, "POST /v1/passkeys/registration/verify") { again = try Self.verify(client, body) }
        expectProblem(try #require(again), 409, "credential_exists")
        #expect(replayTrips == 1, "\(replayTrips)")
        // Another response to the used challenge.
        let other = try Self.response(server, SoftAuthenticator(), options)
        expectProblem(try Self.verify(client, other), 400, "challenge_invalid")
    }

    @Test("a failed verify uses the challenge up: after the signature check too (a username taken meanwhile)")
    func failuresUseTheChallenge() throws {
        let server = try Self.fixture.get()
        let client = server.client()
        // A check of the response fails: the challenge is recorded used, a good response then refused.
        let options = try #require(try client.registrationOptions(username: server.username("fail")).json)
        let bad = try Self.response(server, SoftAuthenticator(), options) { $0.clientData.origin = "https://evil.example" }
        expectProblem(try Self.verify(client, bad), 400, "origin_not_allowed")
        #expect(try Self.used(server, options))
        expectProblem(try Self.verify(client, try Self.response(server, SoftAuthenticator(), options)), 400, "challenge_invalid")

        // Two sign-ups for one username: both options answer; the second verify is refused after its
        // attestation verified, and its challenge is used all the same.
        let name = server.username("twice")
        let one = try #require(try client.registrationOptions(username: name).json)
        let two = try #require(try client.registrationOptions(username: name).json)
        #expect(try Self.verify(client, try Self.response(server, SoftAuthenticator(), one)).status == 201)
        let late = try Self.response(server, SoftAuthenticator(), two)
        expectProblem(try Self.verify(client, late), 409, "conflict")
        #expect(try Self.used(server, two))
        expectProblem(try Self.verify(client, late), 400, "challenge_invalid")
    }

    @Test("a challenge sealed for a sign-in, for another relying party, altered, or past its expiry → challenge_invalid")
    func sealRefusals() throws {
        let clock = ManualClock()
        let server = try TestServer(name: "sealed-reg-clock", runtime: clock.runtime())
        defer { server.http.stop() }
        let other = try Self.fixture.get()
        let client = server.client()

        let signIn = try #require(try client.authenticationOptions().json)
        expectProblem(try Self.verify(client, try Self.response(server, SoftAuthenticator(), signIn)), 400, "challenge_invalid")
        let foreign = try #require(try other.client().registrationOptions(username: other.username("foreign")).json)
        expectProblem(try Self.verify(client, try Self.response(server, SoftAuthenticator(), foreign)), 400, "challenge_invalid")
        var altered = try #require(try client.registrationOptions(username: server.username("altered")).json)
        var bytes = try challengeBytes(altered)
        bytes[bytes.count - 20] ^= 1
        altered = .object((altered.objectValue ?? []).map { $0.key == "challenge" ? ($0.key, .string(Base64URL.encode(bytes))) : $0 })
        expectProblem(try Self.verify(client, try Self.response(server, SoftAuthenticator(), altered)), 400, "challenge_invalid")
        // A registration challenge is not a sign-in's either.
        let registration = try #require(try client.registrationOptions(username: server.username("cross")).json)
        let assertion = SoftAuthenticator().assertion(challenge: try challengeBytes(registration), rpId: server.rpId, origin: server.origin)
        expectProblem(try client.send("POST", "/v1/passkeys/authentication/verify", body: assertion.bytes()), 400, "challenge_invalid")

        let options = try #require(try client.registrationOptions(username: server.username("late")).json)
        clock.advance(Double(server.configuration.challengeTTL) + 1)
        let late = try Self.verify(client, try Self.response(server, SoftAuthenticator(), options))
        expectProblem(late, 400, "challenge_invalid")
        #expect(late.text.contains("expired"), "\(late)")
        #expect(try !Self.used(server, options), "an expired challenge is refused before anything is written")
    }

    @Test("a step-up sent with options is redeemed by the verify; a second ceremony carrying it is refused, its challenge used")
    func stepUpRedeemedByTheVerify() throws {
        let server = try Self.fixture.get()
        let client = server.client()
        let first = SoftAuthenticator()
        let session = try client.signUp(first, username: server.username("stepup"))
        let token = try client.stepUpToken(first, authorization: session.bearer, action: Client.passkeyAddition)
        func options() throws -> Reply {
            try client.post("/v1/passkeys/registration/options", .object([]), authorization: session.bearer, headers: [("Latchkey-Step-Up", token)])
        }
        let a = try #require(try options().json)
        let b = try #require(try options().json)
        let added = try Self.verify(client, try Self.response(server, SoftAuthenticator(), a))
        #expect(added.status == 201, "\(added)")
        #expect(added.json?["passkey"]?["heldUntil"] == nil, "a step-up's passkey is not held: \(added)")
        #expect(accepted(added.json)?.count == 2, "\(added)")
        let jti = try #require(stepUpJTI(token))
        #expect(try server.database.pool.query("SELECT consumed_at IS NOT NULL AS used FROM step_up_receipts WHERE token_jti = \(jti)")[0].bool("used"))
        let second = try Self.verify(client, try Self.response(server, SoftAuthenticator(), b))
        expectProblem(second, 403, "step_up_required")
        #expect(try Self.used(server, b))
        // The options check it now: a redeemed step-up opens no ceremony.
        expectProblem(try options(), 403, "step_up_required")
        let listed = try client.get("/v1/passkeys", authorization: session.bearer)
        #expect(listed.json?["passkeys"]?.arrayValue?.count == 2, "\(listed)")
    }

    @Test("a ticket is used once: two ceremonies begun with it, the second verify refused and its challenge used")
    func ticketUsedOnce() throws {
        let server = try Self.fixture.get()
        let client = server.client()
        let ticket = try #require(try client.enrolmentTicket(externalId: "ext-\(uniqueSuffix())", username: server.username("once")).json?["ticket"]?
            .stringValue)
        func options() throws -> Reply { try client.post("/v1/passkeys/registration/options", .object([]), authorization: "Ticket \(ticket)") }
        let a = try #require(try options().json)
        let b = try #require(try options().json)
        #expect(try Self.verify(client, try Self.response(server, SoftAuthenticator(), a)).status == 201)
        #expect(try server.database.pool.query("SELECT used_at IS NOT NULL AS used FROM enrolment_tickets WHERE hash = \(OpaqueSecret.hash(ticket))")[0]
            .bool("used"))
        expectProblem(try Self.verify(client, try Self.response(server, SoftAuthenticator(), b)), 400, "challenge_invalid")
        #expect(try Self.used(server, b))
        expectProblem(try options(), 401, "unauthorized")
    }

    /// The Signal API's `allAcceptedCredentialIds` of a signed-in answer.
    func accepted(_ answer: JSONValue?) -> [JSONValue]? {
        answer?["signals"]?.arrayValue?.first?["options"]?["allAcceptedCredentialIds"]?.arrayValue
    }

    /// The `jti` of a step-up token (a JWT).
    func stepUpJTI(_ token: String) -> String? {
        let parts = token.split(separator: ".")
        guard parts.count == 3, let payload = Base64URL.decode(String(parts[1])), let claims = try? JSONParser.parse(payload) else { return nil }
        return claims["jti"]?.stringValue
    }
}
