import Crypto
import Foundation
import HTTP
import JSON
import PostgreSQL
import Storage
import Testing
import WebAuthnTesting
@testable import LatchkeyServer

/// SPEC "Rules that must hold" → Challenges and "Performance targets" → a login is one commit:
/// sign-in options write nothing (the ceremony state is sealed into the challenge), the same
/// statements run whether or not a username exists, and the verify's one statement records the
/// challenge used.
@Suite("Sealed sign-in challenges")
struct SealedLoginTests {
    static let fixture = Result { try TestServer(name: "sealed") }

    /// Rows in `challenges` for this server's rpId.
    static func challengeRows(_ server: TestServer) throws -> Int {
        try server.database.pool.query("SELECT count(*)::int AS n FROM challenges WHERE rp_id = \(server.rpId)")[0].int("n")
    }

    /// The round trips `route` made during `body` (`latchkey_db_round_trips_total`).
    static func trips(_ server: TestServer, _ route: String, _ body: () throws -> Void) throws -> Int {
        let before = try OAuthRoundTripTests.roundTrips(server)[route] ?? 0
        try body()
        return (try OAuthRoundTripTests.roundTrips(server)[route] ?? 0) - before
    }

    @Test("options write nothing: discoverable, username-first (known and unknown) and OP-bound")
    func optionsWriteNothing() throws {
        let server = try Self.fixture.get()
        let client = server.client()
        let username = server.username("nothing")
        _ = try client.signUp(SoftAuthenticator(), username: username)
        let rows = try Self.challengeRows(server)
        for name in [nil, username, server.username("nobody")] {
            let reply = try client.authenticationOptions(username: name)
            #expect(reply.status == 200, "\(reply)")
            #expect(try challengeBytes(try #require(reply.json)).count == SealedAuthentication.challengeLength)
        }
        _ = try server.services.passkeys.authenticationOptions(boundTo: SecureRandom.bytes(32))
        #expect(try Self.challengeRows(server) == rows)
    }

    @Test("a known and an unknown username: the same statements, one read, challenges of one length and layout, decoys for the unknown")
    func knownAndUnknownLookAlike() throws {
        let server = try Self.fixture.get()
        let client = server.client()
        let known = server.username("known")
        _ = try client.signUp(SoftAuthenticator(), username: known)
        let route = "POST /v1/passkeys/authentication/options"
        // Warm what each process keeps (the decoy secret, the sealing key), then measure each twice.
        _ = try client.authenticationOptions(username: server.username("warm"))
        var challenges: [String: [[UInt8]]] = [:]
        var counts: [String: [Int]] = [:]
        for _ in 0..<2 {
            for (label, name) in [("known", known), ("unknown", server.username("unknown"))] {
                var reply: Reply? = nil
                counts[label, default: []].append(try Self.trips(server, route) { reply = try client.authenticationOptions(username: name) })
                let options = try #require(reply?.json)
                #expect(options["allowCredentials"]?.arrayValue?.isEmpty == false, "\(label): \(options)")
                challenges[label, default: []].append(try challengeBytes(options))
            }
        }
        #expect(counts["known"] == [1, 1], "the username-first read is one statement: \(counts)")
        #expect(counts["known"] == counts["unknown"], "\(counts)")
        let all = challenges.values.flatMap { $0 }
        #expect(Set(all.map(\.count)) == [SealedAuthentication.challengeLength])
        // One layout: version and key id in the clear, the same for every challenge; the rest sealed.
        #expect(Set(all.map { Array($0.prefix(CeremonySeal.headerSize)) }).count == 1)
        #expect(Set(all).count == all.count, "every challenge is fresh")
    }

    @Test("a verify is two round trips (BEGIN with the read, the statement with COMMIT); a replay is challenge_invalid")
    func verifyRoundTrips() throws {
        let server = try Self.fixture.get()
        let client = server.client()
        let authenticator = SoftAuthenticator()
        let username = server.username("trips")
        _ = try client.signUp(authenticator, username: username)
        _ = try client.signIn(authenticator, username: username)  // warm
        let options = try #require(try client.authenticationOptions(username: username).json)
        let body = try client.assertion(authenticator, options: options).bytes()
        var reply: Reply? = nil
        let trips = try Self.trips(server, "POST /v1/passkeys/authentication/verify") {
            reply = try client.send("POST", "/v1/passkeys/authentication/verify", body: body, headers: [("Accept-Language", "de")])
        }
        #expect(reply?.status == 200, "\(String(describing: reply))")
        #expect(trips == 2, "\(trips)")
        // The language memo rode in the same statement.
        let userId = try #require(reply?.json?["user"]?["id"]?.stringValue)
        #expect(try server.database.pool.query("SELECT language FROM users WHERE id = \(userId)")[0].optionalString("language") == "de")
        let again = try client.send("POST", "/v1/passkeys/authentication/verify", body: body)
        #expect(again.status == 400 && again.code == "challenge_invalid", "\(again)")
    }

    @Test("a challenge altered, sealed for another relying party, or past its expiry → challenge_invalid")
    func sealRefusals() throws {
        let clock = ManualClock()
        let server = try TestServer(name: "sealed-clock", runtime: clock.runtime())
        defer { server.http.stop() }
        let other = try Self.fixture.get()
        let client = server.client()
        let authenticator = SoftAuthenticator()
        let username = server.username("refused")
        _ = try client.signUp(authenticator, username: username)

        var altered = try challengeBytes(try #require(try client.authenticationOptions().json))
        altered[altered.count - 20] ^= 1
        var builder = authenticator.assertion(challenge: altered, rpId: server.rpId, origin: server.origin)
        expectProblem(try client.send("POST", "/v1/passkeys/authentication/verify", body: builder.bytes()), 400, "challenge_invalid")

        // Sealed by another deployment (same KEK, another rpId): its associated data differs.
        let foreign = try challengeBytes(try #require(try other.client().authenticationOptions().json))
        builder = authenticator.assertion(challenge: foreign, rpId: server.rpId, origin: server.origin)
        expectProblem(try client.send("POST", "/v1/passkeys/authentication/verify", body: builder.bytes()), 400, "challenge_invalid")

        let options = try #require(try client.authenticationOptions(username: username).json)
        clock.advance(Double(server.configuration.challengeTTL) + 1)
        let late = try client.send("POST", "/v1/passkeys/authentication/verify", body: try client.assertion(authenticator, options: options).bytes())
        expectProblem(late, 400, "challenge_invalid")
        #expect(late.text.contains("expired"), "\(late)")
    }

    @Test("two logins carrying one counter at once (two challenges): one 200, one sign_count_regression")
    func signCountRace() throws {
        let server = try Self.fixture.get()
        let setup = server.client()
        let authenticator = SoftAuthenticator(signCount: 5)
        let username = server.username("counter")
        _ = try setup.signUp(authenticator, username: username)
        let bodies = try (0..<2).map { _ in
            var builder = try setup.assertion(authenticator, options: try #require(try setup.authenticationOptions(username: username).json))
            builder.signCount = 9
            return builder.bytes()
        }
        let endpoint = server.endpoint
        let outcomes = onThreads(2) { i, start -> String in
            let client = Client(endpoint)
            do {
                _ = try client.get("/healthz")
                start()
                let reply = try client.send("POST", "/v1/passkeys/authentication/verify", body: bodies[i])
                return reply.status == 200 ? "200" : "\(reply.status) \(reply.code ?? "?")"
            } catch {
                start()
                return "error: \(error)"
            }
        }
        #expect(outcomes.sorted() == ["200", "400 sign_count_regression"], "\(outcomes)")
    }
}
