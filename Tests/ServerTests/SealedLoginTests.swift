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
        // A server of its own: the round-trip counter is per route, and the suite's tests run in parallel.
        let server = try TestServer(name: "sealed-alike", runtime: ManualClock().runtime())   // no cache expires mid-count
        defer { server.http.stop() }
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
        let server = try TestServer(name: "sealed-trips", runtime: ManualClock().runtime())   // no cache expires mid-count
        defer { server.http.stop() }
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

    /// Services over `scratch` with `kek` and `runtime`, migrated and with signing keys.
    static func services(_ scratch: TestDatabase.Scratch, kek: KeyEncryptionKey?, runtime: Runtime = .system) throws -> (Services, Database) {
        var c = Configuration()
        c.rpId = "seal.latchkey.test"
        c.issuer = "https://seal.latchkey.test"
        c.databaseURL = scratch.url
        c.keyEncryptionKey = kek
        // LATCHKEY_DB_POOLER=transaction: through PgBouncer, as the ceremony suites run again in CI.
        c.databasePooler = ProcessInfo.processInfo.environment["LATCHKEY_DB_POOLER"].flatMap(PoolerMode.init(rawValue:)) ?? .none
        let database = Database(url: scratch.url, connections: 2, pooler: c.databasePooler)
        let services = Services(configuration: c, database: database, runtime: runtime, log: RequestLog(enabled: false))
        _ = try services.migrate()
        if kek != nil { try services.prepareSigningKeys() }
        return (services, database)
    }

    @Test("after keys rotate --new-key, the previous sealing key opens challenges for LATCHKEY_CHALLENGE_TTL, then no more")
    func previousKeyAfterRotation() throws {
        let scratch = try TestDatabase.Scratch()
        let (old, _) = KeyEncryptionTests.kek()
        let (new, _) = KeyEncryptionTests.kek()
        let (running, runningDB) = try Self.services(scratch, kek: old)
        defer { running.stop(); runningDB.shutdown() }
        // Issued by an instance still on the old KEK, before and after the rotation.
        let before = try try running.passkeys.authenticationOptions(username: nil).challenge
        _ = try SigningKeyStore(keys: runningDB.keys, kek: old).reencrypt(to: new)
        let after = try try running.passkeys.authenticationOptions(username: nil).challenge

        let clock = ManualClock()
        let (restarted, restartedDB) = try Self.services(scratch, kek: new, runtime: clock.runtime())
        defer { restarted.stop(); restartedDB.shutdown() }
        let seal = restarted.passkeys.seal
        let rpId = restarted.configuration.rpId
        func opens(_ challenge: [UInt8]) -> Bool {
            (try? seal.open(challenge, plaintextLength: SealedAuthentication.plaintextLength, rpId: rpId)) != nil
        }
        let own = try try restarted.passkeys.authenticationOptions(username: nil).challenge
        #expect(opens(before) && opens(after) && opens(own))
        #expect(Array(own[1..<CeremonySeal.headerSize]) == CeremonySeal.key(from: new).id)
        #expect(Array(before[1..<CeremonySeal.headerSize]) == CeremonySeal.key(from: old).id)
        clock.advance(Double(restarted.configuration.challengeTTL) + 1)
        #expect(!opens(before) && !opens(after), "the previous key is no longer accepted")
        #expect(opens(own))

        // A KEK the rotation did not come from knows nothing of the old key.
        let (other, _) = KeyEncryptionTests.kek()
        let stranger = CeremonySeal(kek: other, keys: restartedDB.keys, runtime: .system, challengeTTL: 300)
        #expect((try? stranger.open(before, plaintextLength: SealedAuthentication.plaintextLength, rpId: rpId)) == nil)
    }

    @Test("without a KEK (development mode) the sealing key is generated once and kept in the database, for every instance")
    func developmentKeyInTheDatabase() throws {
        let scratch = try TestDatabase.Scratch()
        let database = Database(url: scratch.url, connections: 2,
                                pooler: ProcessInfo.processInfo.environment["LATCHKEY_DB_POOLER"].flatMap(PoolerMode.init(rawValue:)) ?? .none)
        defer { database.shutdown() }
        _ = try database.migrate()
        let one = CeremonySeal(kek: nil, keys: database.keys, runtime: .system, challengeTTL: 300)
        let two = CeremonySeal(kek: nil, keys: database.keys, runtime: .system, challengeTTL: 300)
        let plaintext = Array(repeating: UInt8(7), count: SealedAuthentication.plaintextLength)
        let sealed = try one.seal(plaintext, rpId: "dev.latchkey.test")
        #expect(try two.open(sealed, plaintextLength: plaintext.count, rpId: "dev.latchkey.test") == plaintext)
        #expect((try? two.open(sealed, plaintextLength: plaintext.count, rpId: "other.latchkey.test")) == nil)
        let stored = try database.pool.query("SELECT value FROM server_secrets WHERE name = 'ceremony-seal'")
        #expect(try stored.map { try $0.bytes("value").count } == [32])
    }
}
