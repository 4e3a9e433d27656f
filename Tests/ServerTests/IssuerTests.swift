import Foundation
import LatchkeyServer
import Testing
import WebAuthnTesting

/// Issue 13, defect 10: the token issuer is a property of the deployment, the same on every
/// instance: `LATCHKEY_ISSUER`, else the first configured web origin in dev mode, else
/// `https://<rpId>` — never the listen port.
@Suite("The issuer is the deployment's")
struct IssuerTests {
    static func issuer(_ env: [String: String]) throws -> String { try Configuration.fromEnvironment(env).issuer }

    @Test("LATCHKEY_ISSUER wins; else https://<rpId>, or in dev mode the first configured web origin")
    func derivation() throws {
        // Outside dev mode the issuer's origin is one of LATCHKEY_ORIGINS (ConfigurationRulesTests).
        #expect(try Self.issuer(["LATCHKEY_ISSUER": "https://id.example", "LATCHKEY_RP_ID": "example.com",
                                 "LATCHKEY_ORIGINS": "https://example.com,https://id.example"]) == "https://id.example")
        #expect(try Self.issuer(["LATCHKEY_RP_ID": "example.com", "LATCHKEY_LISTEN": "127.0.0.1:8081",
                                 "LATCHKEY_ORIGINS": "https://example.com"]) == "https://example.com")
        let dev = ["LATCHKEY_DEV": "1", "LATCHKEY_RP_ID": "localhost",
                   "LATCHKEY_ORIGINS": "android:apk-key-hash:xT5ZucZJ9N7oq3j3awG8J8pjl3bDJJ1tIJe6Wd6QRYY,http://localhost:8080"]
        #expect(try Self.issuer(dev) == "http://localhost:8080")
    }

    @Test("instances on other ports of one deployment derive the same issuer", arguments: [false, true])
    func samePerPort(_ development: Bool) throws {
        var env = ["LATCHKEY_RP_ID": "localhost", "LATCHKEY_ORIGINS": "https://localhost"]
        if development { env["LATCHKEY_DEV"] = "1"; env["LATCHKEY_ORIGINS"] = "http://localhost:8080" }
        let issuers = try ["127.0.0.1:8081", "127.0.0.1:8082", "0.0.0.0:9000"].map { listen in
            var e = env
            e["LATCHKEY_LISTEN"] = listen
            return try Self.issuer(e)
        }
        #expect(Set(issuers).count == 1, "\(issuers)")
        #expect(!issuers[0].contains("8081") && !issuers[0].contains("9000"))
        // Dev mode without LATCHKEY_ORIGINS: the seeded origin follows the port, the issuer does not.
        var bare = ["LATCHKEY_DEV": "1", "LATCHKEY_RP_ID": "localhost", "LATCHKEY_LISTEN": "127.0.0.1:8081"]
        let first = try Self.issuer(bare)
        bare["LATCHKEY_LISTEN"] = "127.0.0.1:8082"
        #expect(try Self.issuer(bare) == first)
    }

    @Test("two servers on one database, listening on 8081 and 8082 behind one origin, accept each other's access tokens")
    func twoInstancesShareTokens() throws {
        let rpId = "issuer-\(uniqueSuffix()).latchkey.test"
        let origin = "https://\(rpId)"
        func instance(_ listen: String) throws -> TestServer {
            try TestServer(name: "issuer") { c in
                // The configuration each instance would read from its environment: the same
                // deployment (rpId, origins), another LATCHKEY_LISTEN, no LATCHKEY_ISSUER.
                let derived = try! Configuration.fromEnvironment([
                    "LATCHKEY_DEV": "1", "LATCHKEY_RP_ID": rpId, "LATCHKEY_ORIGINS": origin, "LATCHKEY_LISTEN": listen,
                ])
                c.rpId = derived.rpId
                c.origins = derived.origins
                c.listenHost = derived.listenHost
                c.listenPort = derived.listenPort
                c.developmentMode = derived.developmentMode
                c.issuer = derived.issuer
            }
        }
        let a = try instance("127.0.0.1:8081"), b = try instance("127.0.0.1:8082")
        let endpoint = { (s: TestServer) in Endpoint(port: s.port, rpId: rpId, origin: origin, adminKey: nil) }
        let onA = Client(endpoint(a)), onB = Client(endpoint(b))
        let authenticator = SoftAuthenticator()
        let session = try onA.signUp(authenticator, username: "issuer-\(uniqueSuffix())")
        let fromA = try onB.get("/v1/passkeys", authorization: session.bearer)
        #expect(fromA.status == 200, "a token of the instance on 8081 on the one on 8082: \(fromA)")
        let signedInOnB = try onB.signIn(authenticator)
        let fromB = try onA.get("/v1/passkeys", authorization: signedInOnB.bearer)
        #expect(fromB.status == 200, "a token of the instance on 8082 on the one on 8081: \(fromB)")
    }
}
