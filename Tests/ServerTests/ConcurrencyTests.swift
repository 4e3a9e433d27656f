import Crypto
import Foundation
import HTTP
import JSON
import LatchkeyServer
import Testing
import WebAuthn
import WebAuthnTesting

/// SPEC "Rules that must hold": a challenge is used exactly once even under concurrent submits.
@Suite("Concurrent submits")
struct ConcurrencyTests {
    static let fixture = Result { try TestServer(name: "concurrency") }

    @Test("16 threads submit one assertion at once: exactly one 200, the rest challenge_invalid")
    func sixteenSubmitsOneWins() throws {
        let server = try Self.fixture.get()
        let setup = server.client()
        let authenticator = SoftAuthenticator()
        let username = server.username("race")
        _ = try setup.signUp(authenticator, username: username)
        let options = try #require(try setup.authenticationOptions(username: username).json)
        let body = try setup.assertion(authenticator, options: options).bytes()
        let endpoint = server.endpoint

        let outcomes = onThreads(16) { _, start -> String in
            let client = Client(endpoint)
            do {
                _ = try client.get("/healthz")  // connected before the race starts
                start()
                let reply = try client.send("POST", "/v1/passkeys/authentication/verify", body: body)
                return reply.status == 200 ? "200" : "\(reply.status) \(reply.code ?? "?")"
            } catch {
                start()
                return "error: \(error)"
            }
        }
        #expect(outcomes.count == 16)
        #expect(outcomes.filter { $0 == "200" }.count == 1, "\(outcomes)")
        #expect(outcomes.filter { $0 == "400 challenge_invalid" }.count == 15, "\(outcomes)")
    }
}
