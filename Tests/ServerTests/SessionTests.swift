import Crypto
import Foundation
import HTTP
import JSON
@testable import LatchkeyServer
import PostgreSQLTesting
import Storage
import Testing
import WebAuthn
import WebAuthnTesting

/// SPEC "Sessions" over HTTP: sessions bound to how they began, dead everywhere once revoked.
@Suite("Sessions")
struct SessionTests {
    static let fixture = Result { try TestServer(name: "sessions") }

    static func claims(_ jwt: String) throws -> JSONValue {
        let parts = jwt.split(separator: ".")
        return try JSONParser.parse(try #require(Base64URL.decode(String(parts[1]))))
    }

    static func refresh(_ client: Client, _ token: String) throws -> Reply {
        try client.post("/v1/token", .object([("grant_type", "refresh_token"), ("refresh_token", .string(token))]))
    }

    /// A second instance on the same database that accepts the first one's tokens (same rpId and
    /// issuer); with `listen` false, LISTEN is unavailable (transaction pooler, no listen URL).
    static func anotherInstance(of a: TestServer, listen: Bool) throws -> TestServer {
        try TestServer(name: "sessions-b") { c in
            c.rpId = a.rpId
            c.origins = [a.origin]
            c.issuer = a.origin
            if listen {
                if c.databasePooler == .transaction { c.databasePooler = .none }
            } else {
                c.databasePooler = .transaction
                c.databaseListenURL = nil
            }
        }
    }

    @Test("revoke a passkey: its sessions' refresh tokens are invalid_grant and their access tokens unauthorized on another instance, with and without LISTEN",
          arguments: [true, false])
    func revokingAPasskeyEndsItsSessionsEverywhere(listen: Bool) throws {
        let a = try Self.fixture.get()
        let b = try Self.anotherInstance(of: a, listen: listen)
        if listen {
            #expect(waitFor(seconds: 10, every: 0.02) { b.services.isListeningForRevocations })
        } else {
            #expect(!b.services.isListeningForRevocations)
            #expect(b.services.isRevocationFeedStale, "LISTEN is unavailable: the database decides every token on B")
        }
        let onA = a.client()
        let onB = Client(Endpoint(port: b.port, rpId: a.rpId, origin: a.origin, adminKey: nil))
        let x = SoftAuthenticator(), y = SoftAuthenticator()
        let registered = try onA.signUp(x, username: a.username("revoke"))   // session 1: x's registration
        let signedIn = try onA.signIn(x)                                        // session 2: x's login
        let (_, second) = try onA.register(y, authorization: registered.bearer, approver: x)  // session 3: y's registration
        #expect(second.status == 201, "\(second)")
        let bySecond = Session(reply: try #require(second.json))
        let ended = [registered, signedIn]
        for s in ended + [bySecond] { #expect(try onB.get("/v1/sessions", authorization: s.bearer).status == 200) }

        let revoked = try onA.revokePasskey(x.credentialId, authorization: bySecond.bearer, approver: y)
        #expect(revoked.status == 200, "\(revoked)")
        // Refresh tokens: the database says so, at once, on any instance.
        for s in ended { #expect(try Self.refresh(onB, s.refreshToken).code == "invalid_grant") }
        // Access tokens: refused by B once its feed (NOTIFY) brings the revocation, or at once when
        // it has no feed (the database decides). The bound itself is RevocationBoundTests'; here the
        // time it took is printed, not asserted.
        let arrived = try propagation("revoked sessions on B (listen: \(listen))") {
            try ended.allSatisfy { try onB.get("/v1/sessions", authorization: $0.bearer).status == 401 }
        }
        #expect(arrived != nil, "B still accepts a revoked session's access token (listen: \(listen))")
        #expect(try onB.get("/v1/sessions", authorization: ended[0].bearer).code == "unauthorized")
        // On A at once, and the other passkey's session lives on both.
        for s in ended { #expect(try onA.get("/v1/passkeys", authorization: s.bearer).code == "unauthorized") }
        #expect(try onB.get("/v1/passkeys", authorization: bySecond.bearer).status == 200)
        #expect(try Self.refresh(onB, bySecond.refreshToken).status == 200)
        b.services.stop()
    }

    @Test("auth_time is the authentication's and stays put across refreshes; the session list says so")
    func authTimeStaysPut() throws {
        let server = try Self.fixture.get()
        let client = server.client()
        let session = try client.signUp(SoftAuthenticator(), username: server.username("authtime"))
        let first = try Self.claims(session.accessToken)
        let authTime = try #require(first["auth_time"]?.doubleValue)
        Thread.sleep(forTimeInterval: 1.1)  // so that a refresh's own time differs from the authentication's
        var refreshToken = session.refreshToken
        var access = session.accessToken
        for _ in 0..<2 {
            let r = try Self.refresh(client, refreshToken)
            #expect(r.status == 200, "\(r)")
            refreshToken = try #require(r.json?["refresh_token"]?.stringValue)
            access = try #require(r.json?["access_token"]?.stringValue)
            let claims = try Self.claims(access)
            #expect(claims["auth_time"]?.doubleValue == authTime)
            #expect(try #require(claims["iat"]?.doubleValue) > authTime)
            #expect(claims["sid"] == first["sid"]!)
        }
        let listed = try #require(try client.get("/v1/sessions", authorization: "Bearer \(access)").json?["sessions"]?.arrayValue)
        let current = try #require(listed.first { $0["current"] == .bool(true) })
        #expect(current["authTime"]?.stringValue == iso(authTime))
        #expect(current["lastUsedAt"]?.stringValue != current["authTime"]?.stringValue, "a refresh is a use")
    }

    func iso(_ seconds: Double) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime]
        let text = f.string(from: Date(timeIntervalSince1970: seconds))
        return text
    }

    @Test("GET /v1/sessions lists the live ones with the current marked; DELETE ends one; someone else's or unknown is 404; logout ends the current")
    func listAndEnd() throws {
        let server = try Self.fixture.get()
        let client = server.client()
        let mine = SoftAuthenticator()
        let first = try client.signUp(mine, username: server.username("list"))
        let current = try client.signIn(mine)
        let other = try client.signUp(SoftAuthenticator(), username: server.username("other"))
        #expect(try client.get("/v1/sessions").code == "unauthorized")

        let reply = try client.get("/v1/sessions", authorization: current.bearer)
        #expect(reply.status == 200, "\(reply)")
        let sessions = try #require(reply.json?["sessions"]?.arrayValue)
        #expect(sessions.count == 2)
        let sid = try #require(try Self.claims(current.accessToken)["sid"]?.stringValue)
        let firstId = try #require(try Self.claims(first.accessToken)["sid"]?.stringValue)
        #expect(Set(sessions.compactMap { $0["id"]?.stringValue }) == [sid, firstId])
        for s in sessions {
            #expect(s["method"] == "passkey")
            #expect(s["credentialId"]?.stringValue == Base64URL.encode(mine.credentialId))
            for key in ["createdAt", "lastUsedAt", "authTime"] { #expect(s[key]?.stringValue != nil, "\(key)") }
            #expect(s["current"] == .bool(s["id"]?.stringValue == sid))
        }

        let otherId = try #require(try Self.claims(other.accessToken)["sid"]?.stringValue)
        let foreign = try client.send("DELETE", "/v1/sessions/\(otherId)", authorization: current.bearer)
        #expect(foreign.status == 404 && foreign.code == "not_found", "\(foreign)")
        #expect(try client.get("/v1/sessions", authorization: other.bearer).status == 200, "someone else's session lives on")
        #expect(try client.send("DELETE", "/v1/sessions/nope", authorization: current.bearer).code == "not_found")

        #expect(try client.send("DELETE", "/v1/sessions/\(firstId)", authorization: current.bearer).status == 204)
        #expect(try client.send("DELETE", "/v1/sessions/\(firstId)", authorization: current.bearer).code == "not_found")
        #expect(try client.get("/v1/sessions", authorization: first.bearer).code == "unauthorized")
        #expect(try Self.refresh(client, first.refreshToken).code == "invalid_grant")
        let left = try #require(try client.get("/v1/sessions", authorization: current.bearer).json?["sessions"]?.arrayValue)
        #expect(left.compactMap { $0["id"]?.stringValue } == [sid])

        #expect(try client.send("POST", "/v1/logout", authorization: current.bearer).status == 204)
        #expect(try client.get("/v1/sessions", authorization: current.bearer).code == "unauthorized")
        #expect(try Self.refresh(client, current.refreshToken).code == "invalid_grant")
    }
}

/// Issue 10 point 7 over HTTP: two assertions carrying one counter, sent together, never both pass
/// under `reject`; under `flag` both pass and the passkey ends flagged.
@Suite("Counter races")
struct CounterRaceTests {
    static let reject = Result { try TestServer(name: "race-reject") }
    static let flag = Result { try TestServer(name: "race-flag") { $0.signCountPolicy = .flag } }

    /// Sends the two prepared requests from two threads at once; returns their outcomes.
    static func together(_ endpoint: Endpoint, _ requests: [(path: String, body: [UInt8], authorization: String?)]) -> [String] {
        onThreads(requests.count) { i, start -> String in
            let client = Client(endpoint)
            do {
                _ = try client.get("/healthz")
                start()
                let r = try client.send("POST", requests[i].path, body: requests[i].body, authorization: requests[i].authorization)
                return r.status == 200 ? "200" : (r.code ?? "\(r.status)")
            } catch {
                start()
                return "error: \(error)"
            }
        }
    }

    static func flagged(_ client: Client, _ bearer: String) throws -> Bool {
        let passkeys = try client.get("/v1/passkeys", authorization: bearer).json?["passkeys"]?.arrayValue
        guard let flagged = passkeys?.first?["flagged"]?.boolValue else { throw TestSetupError("no passkey listed") }
        return flagged
    }

    /// Two logins, both assertions built first with counter `count`.
    static func loginPair(_ client: Client, _ authenticator: SoftAuthenticator, count: UInt32) throws -> [(path: String, body: [UInt8], authorization: String?)] {
        try (0..<2).map { _ in
            var builder = try client.assertion(authenticator, options: try #require(try client.authenticationOptions().json))
            builder.signCount = count
            return ("/v1/passkeys/authentication/verify", builder.bytes(), nil)
        }
    }

    /// Two passkey step-ups, both assertions built first with counter `count`.
    static func stepUpPair(_ client: Client, _ authenticator: SoftAuthenticator, bearer: String,
                           count: UInt32) throws -> [(path: String, body: [UInt8], authorization: String?)] {
        try (0..<2).map { _ in
            let c = try #require(try client.post("/v1/step-up/challenges", .object([
                ("method", "passkey"), ("action", .object([("type", "transfer"), ("amount", "1.00")])),
            ]), authorization: bearer).json)
            var builder = try client.assertion(authenticator, options: try #require(c["publicKey"]))
            builder.signCount = count
            return ("/v1/step-up/verify", JSONValue.object([("challengeId", c["challengeId"]!), ("credential", builder.json())]).serialized(),
                    bearer)
        }
    }

    @Test("16 rounds of two concurrent logins with one counter: never both succeed under reject")
    func loginsUnderReject() throws {
        let server = try Self.reject.get()
        let client = server.client()
        let authenticator = SoftAuthenticator(signCount: 1)
        let session = try client.signUp(authenticator, username: server.username("race"))
        for round in 0..<16 {
            let outcomes = Self.together(server.endpoint, try Self.loginPair(client, authenticator, count: UInt32(round + 2)))
            #expect(outcomes.sorted() == ["200", "sign_count_regression"], "round \(round): \(outcomes)")
        }
        #expect(try Self.flagged(client, session.bearer), "the refused assertions flag the passkey")
    }

    @Test("16 rounds of two concurrent passkey step-ups with one counter: never both succeed under reject")
    func passkeyStepUpsUnderReject() throws {
        let server = try Self.reject.get()
        let client = server.client()
        let authenticator = SoftAuthenticator(signCount: 1)
        let session = try client.signUp(authenticator, username: server.username("race-stepup"))
        for round in 0..<16 {
            let pair = try Self.stepUpPair(client, authenticator, bearer: session.bearer, count: UInt32(round + 2))
            let outcomes = Self.together(server.endpoint, pair)
            #expect(outcomes.sorted() == ["200", "sign_count_regression"], "round \(round): \(outcomes)")
        }
        #expect(try Self.flagged(client, session.bearer))
    }

    @Test("under flag, two concurrent logins and step-ups with one counter both succeed and the passkey ends flagged")
    func underFlagBothSucceed() throws {
        let server = try Self.flag.get()
        let client = server.client()
        let authenticator = SoftAuthenticator(signCount: 1)
        let session = try client.signUp(authenticator, username: server.username("race-flag"))
        #expect(try !Self.flagged(client, session.bearer))
        var count: UInt32 = 2
        for round in 0..<8 {
            let logins = Self.together(server.endpoint, try Self.loginPair(client, authenticator, count: count))
            #expect(logins == ["200", "200"], "round \(round): \(logins)")
            count += 1
            let stepUps = Self.together(server.endpoint, try Self.stepUpPair(client, authenticator, bearer: session.bearer, count: count))
            #expect(stepUps == ["200", "200"], "round \(round): \(stepUps)")
            count += 1
        }
        #expect(try Self.flagged(client, session.bearer))
    }
}
