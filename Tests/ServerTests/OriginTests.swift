import Foundation
import HTTP
import JSON
import LatchkeyServer
import Storage
import Testing
import WebAuthnTesting

/// SPEC "Assurance" ("Outside dev mode"): an `http://` origin in the stored allowlist — written there
/// by a dev-mode instance on the same database — is ignored by an instance outside dev mode: a
/// ceremony from it is `origin_not_allowed`, it gets no CORS headers, and `serve` names it at start-up
/// (ServeConfigurationTests). A database of its own, so no other suite's allowlist changes.
@Suite("OriginTests: stored http:// origins outside dev mode", .serialized)
struct OriginTests {
    @Test("a stored http:// origin passes in dev mode and is origin_not_allowed outside it (ceremonies and CORS)")
    func httpOriginIgnoredOutsideDevMode() throws {
        let scratch = try TestDatabase.Scratch()
        // rpId localhost: an http://localhost origin can only ever work for it (ConfigurationRulesTests);
        // the scratch database keeps this suite's allowlist its own.
        let rpId = "localhost"
        let local = "http://localhost:\(Int.random(in: 20000...60000))"
        // The dev-mode instance seeds both origins (LATCHKEY_ORIGINS), as `scripts/run.sh` would.
        let dev = try TestServer(name: "origins-dev", rpIdOverride: rpId) { c in
            c.databaseURL = scratch.url
            c.developmentMode = true
            c.origins = ["https://\(rpId)", local]
        }
        defer { dev.services.stop(); dev.http.stop(); dev.database.shutdown() }
        let production = try TestServer(name: "origins-prod", rpIdOverride: rpId) { c in
            c.databaseURL = scratch.url
            c.developmentMode = false
        }
        defer { production.services.stop(); production.http.stop(); production.database.shutdown() }
        #expect(try production.services.database.config.origins().map(\.origin).contains(local), "the origin is stored")

        // Registration from the http:// origin: created in dev mode, refused outside it.
        let (_, inDev) = try dev.client().register(SoftAuthenticator(), username: dev.username("dev")) { $0.clientData.origin = local }
        #expect(inDev.status == 201, "\(inDev)")
        let (_, outside) = try production.client().register(SoftAuthenticator(), username: production.username("prod")) {
            $0.clientData.origin = local
        }
        #expect(outside.status == 400 && outside.code == "origin_not_allowed", "\(outside)")
        // The https:// origin is unaffected.
        #expect(try production.client().register(SoftAuthenticator(), username: production.username("https")).reply.status == 201)

        // Sign-in with the passkey registered in dev mode: from the http:// origin, refused outside dev mode.
        let authenticator = SoftAuthenticator()
        let (_, registered) = try dev.client().register(authenticator, username: dev.username("both"))
        #expect(registered.status == 201)
        let options = try #require(try production.client().authenticationOptions().json)
        let assertion = authenticator.assertion(challenge: try challengeBytes(options), rpId: rpId, origin: local)
        let login = try production.client().send("POST", "/v1/passkeys/authentication/verify", body: assertion.bytes())
        #expect(login.code == "origin_not_allowed", "\(login)")

        // CORS follows the same allowlist.
        func cors(_ server: TestServer) throws -> String? {
            try server.client().http.send(method: "POST", path: "/v1/passkeys/authentication/options",
                                          headers: [("Origin", local), ("Content-Type", "application/json")], body: Array("{}".utf8))
                .header("Access-Control-Allow-Origin")
        }
        #expect(try cors(dev) == local)
        #expect(try cors(production) == nil)

        #expect(try production.services.origins.ignoredOrigins() == [local])
        #expect(try dev.services.origins.ignoredOrigins().isEmpty)
        withExtendedLifetime(scratch) {}
    }
}
