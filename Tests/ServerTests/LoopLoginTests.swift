import Crypto
import Foundation
import HTTP
import JSON
@testable import LatchkeyServer
import PostgreSQL
import Storage
import Testing
import Tokens
import WebAuthn
import WebAuthnTesting

/// LATCHKEY_EVENT_LOOPS: a sign-in answered on an event loop is the sign-in answered on a worker —
/// the same answers, the same statements in the same round trips, the same refusals.
@Suite("Sign-ins on event loops")
struct LoopLoginTests {
    @Test("username-first and discoverable sign-ins: the same answers and statements on a loop as on a worker; an unknown username costs the same statements")
    func sameStatements() throws {
        let worker = try TestServer(name: "loop-login-w", tracing: true) { $0.eventLoops = 0 }
        let loop = try TestServer(name: "loop-login-l", tracing: true) { $0.eventLoops = 2 }
        defer { worker.http.stop(); loop.http.stop() }
        var seen: [String: [[String]]] = [:]
        for server in [worker, loop] {
            let owner = SoftAuthenticator()
            let name = server.username("loop")
            _ = try server.client().signUp(owner, username: name)
            // A request that opens a database connection (or makes the deployment's decoy secret)
            // costs those statements too: each figure is the cheapest of four tries, as in the
            // route-table test, so every loop's connections are open.
            func cheapest(_ route: String, _ request: () throws -> Reply) throws -> DatabaseWork {
                var works: [DatabaseWork] = []
                for _ in 0..<4 {
                    let reply = try request()
                    #expect(reply.status == 200, "\(reply)")
                    works.append(try #require(server.traces?.lastWork(route)))
                }
                return works.min { $0.roundTrips.total < $1.roundTrips.total }!
            }
            let options = try cheapest("POST /v1/passkeys/authentication/options") { try server.client().authenticationOptions(username: name) }
            let unknown = try cheapest("POST /v1/passkeys/authentication/options") {
                try server.client().authenticationOptions(username: server.username("nobody"))
            }
            let verify = try cheapest("POST /v1/passkeys/authentication/verify") {
                let (_, named) = try server.client().login(owner, username: name)
                #expect(named.json?["user"]?["username"]?.stringValue == name, "\(named)")
                return named
            }
            #expect(options.roundTrips.total == 1 && options.roundTrips.writes == 0, "\(options)")
            #expect(verify.roundTrips.total == 2 && verify.roundTrips.writes == 1, "\(verify)")
            #expect(unknown.statements == options.statements)
            let (_, discoverable) = try server.client().login(owner)
            #expect(discoverable.status == 200, "\(discoverable)")
            seen[server === worker ? "worker" : "loop"] = [options.statements, verify.statements]
        }
        #expect(seen["worker"] == seen["loop"])
    }

    @Test("on a loop: a used challenge, a stranger's passkey and a replayed DPoP proof are refused as on a worker")
    func refusals() throws {
        let server = try TestServer(name: "loop-refusals") { $0.eventLoops = 2 }
        defer { server.http.stop() }
        let owner = SoftAuthenticator()
        _ = try server.client().signUp(owner, username: server.username("loop-r"))
        // The same assertion twice: the challenge was used by the first.
        let answer = try server.client().authenticationOptions(username: nil)
        let body = try server.client().assertion(owner, options: try #require(answer.json)).bytes()
        #expect(try server.client().send("POST", "/v1/passkeys/authentication/verify", body: body).status == 200)
        let again = try server.client().send("POST", "/v1/passkeys/authentication/verify", body: body)
        #expect(again.status == 400 && again.code == "challenge_invalid", "\(again)")
        // A passkey this deployment never registered.
        let (_, stranger) = try server.client().login(SoftAuthenticator())
        #expect(stranger.code == "credential_unknown", "\(stranger)")
        // A DPoP proof binds the session; the same proof at a second sign-in starts nothing.
        let key = DPoPKey.generate()
        let proof = key.proof(method: "POST", url: server.origin + "/v1/passkeys/authentication/verify", iat: DPoPSessionTests.now)
        let bound = try DPoPSessionTests.login(server.client(), owner) { _ in proof }
        #expect(bound.status == 200 && bound.json?["tokens"]?["token_type"]?.stringValue == "DPoP", "\(bound)")
        DPoPSessionTests.refused(try DPoPSessionTests.login(server.client(), owner) { _ in proof }, "invalid_dpop_proof", "a replayed proof")
    }
}
