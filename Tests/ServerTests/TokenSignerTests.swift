import Crypto
import Foundation
import JSON
@testable import LatchkeyServer
import Synchronization
import Testing
import Tokens

/// A well-formed ES256 access token whose `kid` names no key Latchkey has (issue 13, defect 6).
func forgedToken(issuer: String, audience: String) -> String {
    let header: JSONValue = .object([("alg", "ES256"), ("typ", "at+jwt"), ("kid", .string(Base64URL.encode(SecureRandom.bytes(32))))])
    let now = Date().timeIntervalSince1970
    let claims: JSONValue = .object([("iss", .string(issuer)), ("aud", .string(audience)), ("sub", "someone"),
                                     ("iat", .number(now.rounded())), ("exp", .number(now.rounded() + 300))])
    return Base64URL.encode(header.serialized()) + "." + Base64URL.encode(claims.serialized()) + "."
        + Base64URL.encode(SecureRandom.bytes(64))
}

@Suite struct ForgedKidTests {
    /// Issue 13 defect 6: an unknown `kid` may reload the key set from PostgreSQL (parsing every
    /// private key) at most once per second per instance, however many threads ask.
    @Test("100 tokens with random kids on 4 threads: one key reload while the clock stands still, one more a second later")
    func forgedKidsAreRateBoundedPerInstance() throws {
        let clock = ManualClock()
        var runtime = Runtime.system
        runtime.uptime = clock.uptime
        let server = try TestServer(name: "forgedkid", runtime: runtime)
        let signer = server.services.signer
        let before = signer.keyReloads
        let statuses = onThreads(4) { _, start in
            let client = server.client()
            start()
            return (0..<25).map { _ in
                (try? client.get("/v1/passkeys", authorization: "Bearer " + forgedToken(issuer: server.origin, audience: server.rpId)))?.status ?? 0
            }
        }
        #expect(statuses.flatMap { $0 }.allSatisfy { $0 == 401 })
        #expect(signer.keyReloads - before <= 1)

        clock.advance(1.5)
        let client = server.client()
        for _ in 0..<10 {
            #expect(try client.get("/v1/passkeys", authorization: "Bearer " + forgedToken(issuer: server.origin, audience: server.rpId)).status == 401)
        }
        #expect(signer.keyReloads - before <= 2)
    }

    /// The bound must not cost the case the reload exists for: a key another instance just created.
    @Test("a token signed by a key another instance created after this one loaded is still accepted")
    func keyFromAnotherInstanceIsStillLearned() throws {
        let clock = ManualClock()
        var runtime = Runtime.system
        runtime.uptime = clock.uptime
        // A database of its own: adding a key to the shared table would retire keys other suites use.
        let scratch = try TestDatabase.Scratch()
        let server = try TestServer(name: "newkid", runtime: runtime) { $0.databaseURL = scratch.url }
        let signer = server.services.signer
        // A forged kid uses this second's reload.
        #expect(throws: (any Error).self) { try signer.verify(forgedToken(issuer: server.origin, audience: server.rpId), type: "at+jwt") }
        // Another instance rotates: a new signing key in the database that this instance has not loaded.
        let key = SigningKey.generate()
        try signer.source.add(key)
        let now = Date().timeIntervalSince1970.rounded()
        let token = JWT.sign(claims: .object([("iss", .string(server.origin)), ("aud", .string(server.rpId)), ("sub", "x"),
                                              ("iat", .number(now)), ("exp", .number(now + 300))]), key: key, type: "at+jwt")
        #expect((try? signer.verify(token, type: "at+jwt")) == nil)  // within the same second: not yet
        clock.advance(1.5)
        #expect((try? signer.verify(token, type: "at+jwt")) != nil)  // the next second's reload learns it
    }
}
