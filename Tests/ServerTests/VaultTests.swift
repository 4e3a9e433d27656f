import Crypto
import Foundation
import HTTP
import JSON
import PostgreSQL
import Storage
import Testing
import WebAuthnTesting
@testable import LatchkeyServer

/// What a browser does with the vault (SPEC "Portability"), in Swift, so the server's tests hold it
/// to the byte formats: KWK = HKDF-SHA-256(PRF output, salt empty, info "latchkey vault v1" ‖ user
/// handle ‖ credential id); wrappedKey = IV ‖ AES-256-GCM(data key, AAD "latchkey vault v1" ‖
/// credential id) ‖ tag; the recovery wrap under HKDF(recovery key, info "latchkey vault recovery v1")
/// with AAD "latchkey vault recovery v1".
enum VaultCrypto {
    static let label = Array("latchkey vault v1".utf8)
    static let recoveryLabel = Array("latchkey vault recovery v1".utf8)

    static func kwk(prf: [UInt8], userHandle: [UInt8], credentialId: [UInt8]) -> [UInt8] {
        HKDF.sha256(key: prf, salt: [], info: label + userHandle + credentialId)
    }

    static func recoveryKWK(_ recoveryKey: [UInt8]) -> [UInt8] { HKDF.sha256(key: recoveryKey, salt: [], info: recoveryLabel) }

    static func wrap(_ dataKey: [UInt8], key: [UInt8], aad: [UInt8], nonce: [UInt8] = SecureRandom.bytes(12)) throws -> [UInt8] {
        let sealed = try AESGCM.seal(dataKey, key: key, associatedData: aad, nonce: nonce)
        return sealed.nonce + sealed.ciphertext + sealed.tag
    }

    static func unwrap(_ wrapped: [UInt8], key: [UInt8], aad: [UInt8]) throws -> [UInt8] {
        try AESGCM.open(AESGCM.Sealed(nonce: Array(wrapped[0..<12]), ciphertext: Array(wrapped[12..<44]), tag: Array(wrapped[44...])),
                        key: key, associatedData: aad)
    }
}

/// SPEC "Portability" → "A vault the server cannot read (PRF)" over real HTTP and PostgreSQL: PRF
/// asked at registration and `prfEnabled` shown, the vault created once, wraps as gated changes
/// for live passkeys of the account only, a revoked passkey's wrap gone, the recovery wrap read by
/// the session a completed recovery began, one read or one write per route, every bad input a 4xx,
/// and nothing but the salt and ciphertext ever stored.
@Suite("Vault")
struct VaultTests {
    static let fixture = Result { try TestServer(name: "vault") { $0.recoveryDelay = 0 } }
    static let traced = Result { try TestServer(name: "vault-trips", tracing: true) { $0.recoveryDelay = 0 } }
    static let prf: JSONValue = .object([("prf", .object([("enabled", true)]))])

    struct Owner {
        let client: Client
        let session: Session
        let authenticator: SoftAuthenticator
        let userHandle: [UInt8]
        var bearer: String { session.bearer }
        var credentialId: [UInt8] { authenticator.credentialId }
    }

    func owner(_ server: TestServer, prf: Bool = true) throws -> Owner {
        let client = server.client(), authenticator = SoftAuthenticator()
        let (options, reply) = try client.register(authenticator, username: server.username("vault")) { b in
            if prf { b.clientExtensionResults = Self.prf }
        }
        #expect(reply.status == 201, "\(reply)")
        return Owner(client: client, session: Session(reply: try #require(reply.json)), authenticator: authenticator,
                     userHandle: try #require(userHandle(options)))
    }

    func body(_ name: String, _ bytes: [UInt8]) -> JSONValue { .object([(name, .string(Base64URL.encode(bytes)))]) }

    func wrapAction(_ id: [UInt8]) -> JSONValue { .object([("type", "latchkey.vault.wrap"), ("credentialId", .string(Base64URL.encode(id)))]) }
    static let recoveryAction: JSONValue = .object([("type", "latchkey.vault.recovery")])

    /// `PUT /v1/vault/wrapped/{id}` with a step-up by `approver` in the session of `bearer`.
    func putWrap(_ c: Client, _ bearer: String, approver: SoftAuthenticator, for id: [UInt8], _ wrapped: [UInt8]) throws -> Reply {
        let token = try c.stepUpToken(approver, authorization: bearer, action: wrapAction(id))
        return try c.send("PUT", "/v1/vault/wrapped/\(Base64URL.encode(id))", body: body("wrappedKey", wrapped).serialized(),
                          authorization: bearer, headers: [("Latchkey-Step-Up", token)])
    }

    func putRecovery(_ c: Client, _ bearer: String, approver: SoftAuthenticator, _ wrapped: [UInt8]) throws -> Reply {
        let token = try c.stepUpToken(approver, authorization: bearer, action: Self.recoveryAction)
        return try c.send("PUT", "/v1/vault/recovery", body: body("wrappedKey", wrapped).serialized(), authorization: bearer,
                          headers: [("Latchkey-Step-Up", token)])
    }

    /// The fixed vector Tests/Browser/latchkey-vault.test.mjs holds latchkey.js to (computed with
    /// Python's `cryptography`): the Swift side of the tests makes the same bytes, so the formats
    /// these tests store are the ones the browser module makes.
    @Test("the byte formats match the fixed vector latchkey.js is held to")
    func fixedVector() throws {
        func b(_ s: String) throws -> [UInt8] { try #require(Base64URL.decode(s)) }
        let prf = try b("YSKC2enbPGPVWz8qpXxzidiiCuTojPAPYIkbId9gx8k"), handle = try b("KjgQafJ82lXB5xkaMotUAZQ7VKN2rUXJIdWZJd6gCFw")
        let id = try b("01F9NYjkEDlZeKHE8Sn8LQ"), dataKey = try b("Gwc7BParBenbni1xfFAe0AzaxchdgS-4CjLEc2y-7DY")
        let recoveryKey = try b("4iGqc9V5Y_882mAtCYyv9peA0Fmv3OWIsiT9ycv11zQ")
        let kwk = VaultCrypto.kwk(prf: prf, userHandle: handle, credentialId: id)
        #expect(Base64URL.encode(kwk) == "-UQRUPiU4FxV3W_49_Nml7mnRjrvbLQyoTMuikm6rzs")
        #expect(Base64URL.encode(try VaultCrypto.wrap(dataKey, key: kwk, aad: VaultCrypto.label + id, nonce: Array(0..<12)))
                == "AAECAwQFBgcICQoLzadGCQUibJX4C8IwxKpqlxx_haRqBD_kJbVvTwicQRBrfLe14JCEToPH7Sqgt2C6")
        #expect(Base64URL.encode(try VaultCrypto.wrap(dataKey, key: VaultCrypto.recoveryKWK(recoveryKey), aad: VaultCrypto.recoveryLabel,
                                                      nonce: Array(12..<24)))
                == "DA0ODxAREhMUFRYXgGkjDQg982QPUw2lHecim--D39vLs17taTjlLIiKs-TjTr8Uu0hPRVquhDX9keWT")
    }

    @Test("registration options ask for PRF; prfEnabled is the registration's prf.enabled, in the answer, the list and the row")
    func prfAskedAndShown() throws {
        let server = try Self.fixture.get()
        let options = try server.client().registrationOptions(username: server.username("prf"))
        #expect(options.json?["extensions"] == .object([("credProps", true), ("prf", .object([]))]), "\(options)")
        let with = try owner(server), without = try owner(server, prf: false)
        #expect(with.session.passkey["prfEnabled"] == true && without.session.passkey["prfEnabled"] == false)
        #expect(try with.client.get("/v1/passkeys", authorization: with.bearer).json?["passkeys"]?.arrayValue?.first?["prfEnabled"] == true)
        #expect(try without.client.get("/v1/passkeys", authorization: without.bearer).json?["passkeys"]?.arrayValue?.first?["prfEnabled"] == false)
        // Only `enabled: true` counts; anything else is false.
        for results: JSONValue in [.object([("prf", .object([("enabled", "true")]))]), .object([("prf", true)]), .object([("prf", .object([]))])] {
            let (_, r) = try server.client().register(SoftAuthenticator(), username: server.username("prf")) { $0.clientExtensionResults = results }
            #expect(r.status == 201 && r.json?["passkey"]?["prfEnabled"] == false, "\(results): \(r)")
        }
        let row = try TestDatabase.connect().query("SELECT prf_enabled FROM credentials WHERE id = \(with.credentialId)")[0]
        #expect(try row.bool("prf_enabled"))
    }

    @Test("the vault story: created once, wrapped per passkey behind step-ups, a second passkey wrapped, the first revoked and its wrap gone, the recovery wrap read after a recovery")
    func story() throws {
        let server = try Self.fixture.get()
        let ana = try owner(server), ben = try owner(server)
        let c = ana.client
        let salt = SecureRandom.bytes(32), dataKey = SecureRandom.bytes(32), recoveryKey = SecureRandom.bytes(32)
        expectProblem(try c.get("/v1/vault", authorization: ana.bearer), 404, "not_found")
        let created = try c.send("PUT", "/v1/vault", body: body("prfSalt", salt).serialized(), authorization: ana.bearer)
        #expect(created.status == 201 && created.json == .object([("prfSalt", .string(Base64URL.encode(salt))), ("wrapped", .array([])),
                                                                  ("recovery", .null)]), "\(created)")
        expectProblem(try c.send("PUT", "/v1/vault", body: body("prfSalt", SecureRandom.bytes(32)).serialized(), authorization: ana.bearer),
                      409, "conflict")

        // The first passkey's wrap: the authenticator's PRF output stays in the "browser".
        let prfFirst = SecureRandom.bytes(32)
        let first = try VaultCrypto.wrap(dataKey, key: VaultCrypto.kwk(prf: prfFirst, userHandle: ana.userHandle, credentialId: ana.credentialId),
                                         aad: VaultCrypto.label + ana.credentialId)
        let path = "/v1/vault/wrapped/\(Base64URL.encode(ana.credentialId))"
        expectProblem(try c.send("PUT", path, body: body("wrappedKey", first).serialized(), authorization: ana.bearer), 403, "step_up_required")
        let otherId = try c.stepUpToken(ana.authenticator, authorization: ana.bearer, action: wrapAction(ben.credentialId))
        expectProblem(try c.send("PUT", path, body: body("wrappedKey", first).serialized(), authorization: ana.bearer,
                                 headers: [("Latchkey-Step-Up", otherId)]), 403, "step_up_required")
        let token = try c.stepUpToken(ana.authenticator, authorization: ana.bearer, action: wrapAction(ana.credentialId))
        let wrapped = try c.send("PUT", path, body: body("wrappedKey", first).serialized(), authorization: ana.bearer,
                                 headers: [("Latchkey-Step-Up", token)])
        #expect(wrapped.status == 204, "\(wrapped)")
        expectProblem(try c.send("PUT", path, body: body("wrappedKey", first).serialized(), authorization: ana.bearer,
                                 headers: [("Latchkey-Step-Up", token)]), 403, "step_up_required")
        // Another account's passkey is not this account's to wrap (the step-up names it, the change is 404).
        expectProblem(try putWrap(c, ana.bearer, approver: ana.authenticator, for: ben.credentialId, first), 404, "not_found")

        // The recovery wrap, under the vault recovery key made in the "browser".
        let recoveryWrap = try VaultCrypto.wrap(dataKey, key: VaultCrypto.recoveryKWK(recoveryKey), aad: VaultCrypto.recoveryLabel)
        let set = try putRecovery(c, ana.bearer, approver: ana.authenticator, recoveryWrap)
        #expect(set.status == 204, "\(set)")
        let read = try #require(try c.get("/v1/vault", authorization: ana.bearer).json)
        #expect(read["prfSalt"]?.stringValue == Base64URL.encode(salt))
        #expect(read["wrapped"] == .array([.object([("credentialId", .string(Base64URL.encode(ana.credentialId))),
                                                    ("wrappedKey", .string(Base64URL.encode(first))), ("alg", "A256GCM")])]), "\(read)")
        #expect(read["recovery"]?["wrappedKey"]?.stringValue == Base64URL.encode(recoveryWrap))
        let served = try #require(Base64URL.decode(read["wrapped"]?.arrayValue?.first?["wrappedKey"]?.stringValue ?? ""))
        #expect(try VaultCrypto.unwrap(served, key: VaultCrypto.kwk(prf: prfFirst, userHandle: ana.userHandle, credentialId: ana.credentialId),
                                       aad: VaultCrypto.label + ana.credentialId) == dataKey)

        // A second passkey: the data key, unwrapped with the first, is wrapped for it.
        let second = SoftAuthenticator()
        let (_, added) = try c.register(second, authorization: ana.bearer, approver: ana.authenticator) { $0.clientExtensionResults = Self.prf }
        #expect(added.status == 201, "\(added)")
        let prfSecond = SecureRandom.bytes(32)
        let secondWrap = try VaultCrypto.wrap(dataKey, key: VaultCrypto.kwk(prf: prfSecond, userHandle: ana.userHandle, credentialId: second.credentialId),
                                              aad: VaultCrypto.label + second.credentialId)
        #expect(try putWrap(c, ana.bearer, approver: second, for: second.credentialId, secondWrap).status == 204)
        #expect(try c.get("/v1/vault", authorization: ana.bearer).json?["wrapped"]?.arrayValue?.count == 2)

        // The first passkey revoked (from the second's session): its wrap goes with it.
        let bySecond = try c.signIn(second)
        let revoked = try c.revokePasskey(ana.credentialId, authorization: bySecond.bearer, approver: second)
        #expect(revoked.status == 200, "\(revoked)")
        let after = try #require(try c.get("/v1/vault", authorization: bySecond.bearer).json)
        #expect(after["wrapped"]?.arrayValue?.compactMap { $0["credentialId"]?.stringValue } == [Base64URL.encode(second.credentialId)])
        expectProblem(try putWrap(c, bySecond.bearer, approver: second, for: ana.credentialId, first), 404, "not_found")

        // Every passkey lost: a recovery code restores sign-in; the recovery token reads no vault.
        let codesToken = try c.stepUpToken(second, authorization: bySecond.bearer, action: .object([("type", "latchkey.recovery-codes.create")]))
        let codes = try #require(try c.post("/v1/recovery-codes", .object([]), authorization: bySecond.bearer,
                                            headers: [("Latchkey-Step-Up", codesToken)]).json?["codes"]?.arrayValue?.first?.stringValue)
        let username = try #require(ana.session.user["username"]?.stringValue)
        let recovery = try server.client().post("/v1/recovery/verify", .object([("username", .string(username)), ("recoveryCode", .string(codes))]))
        let recoveryToken = "Bearer " + (try #require(recovery.json?["recoveryToken"]?.stringValue, "\(recovery)"))
        expectProblem(try c.get("/v1/vault", authorization: recoveryToken), 403, "forbidden")
        expectProblem(try c.send("PUT", "/v1/vault/recovery", body: body("wrappedKey", recoveryWrap).serialized(), authorization: recoveryToken),
                      403, "forbidden")
        let third = SoftAuthenticator()
        let (_, recovered) = try c.register(third, authorization: recoveryToken) { $0.clientExtensionResults = Self.prf }
        #expect(recovered.status == 201, "\(recovered)")
        let recoveredSession = Session(reply: try #require(recovered.json))
        // The session the completed recovery began reads the recovery wrap, and the vault recovery key opens it.
        let vault = try #require(try c.get("/v1/vault", authorization: recoveredSession.bearer).json)
        let served2 = try #require(Base64URL.decode(vault["recovery"]?["wrappedKey"]?.stringValue ?? ""), "\(vault)")
        #expect(try VaultCrypto.unwrap(served2, key: VaultCrypto.recoveryKWK(recoveryKey), aad: VaultCrypto.recoveryLabel) == dataKey)
        let thirdWrap = try VaultCrypto.wrap(dataKey, key: VaultCrypto.kwk(prf: SecureRandom.bytes(32), userHandle: ana.userHandle,
                                                                         credentialId: third.credentialId), aad: VaultCrypto.label + third.credentialId)
        #expect(try putWrap(c, recoveredSession.bearer, approver: third, for: third.credentialId, thirdWrap).status == 204)
        let live = try #require(try c.get("/v1/passkeys", authorization: recoveredSession.bearer).json?["passkeys"]?.arrayValue)
            .compactMap { $0["id"]?.stringValue }
        let listed = try #require(try c.get("/v1/vault", authorization: recoveredSession.bearer).json?["wrapped"]?.arrayValue)
            .compactMap { $0["credentialId"]?.stringValue }
        #expect(Set(listed).isSubset(of: Set(live)) && listed.contains(Base64URL.encode(third.credentialId)), "\(listed) of \(live)")
    }

    @Test("each vault route is one read or one write")
    func roundTrips() throws {
        let server = try Self.traced.get()
        let ana = try owner(server)
        let c = ana.client
        // Creating: one write (the vault with its audit line), no read.
        _ = try c.send("PUT", "/v1/vault", body: body("prfSalt", SecureRandom.bytes(32)).serialized(), authorization: ana.bearer)
        let created = try #require(server.traces?.lastWork("PUT /v1/vault"))
        #expect(created.roundTrips.writes == 1 && created.roundTrips.reads <= 1 && created.roundTrips.control == 0, "\(created.statements)")
        // Each gated change: one write (redemption, wrap, audit), the step-up checked with no read of its own.
        var best: [String: RoundTripCounts] = [:]
        for _ in 0..<3 {
            #expect(try putWrap(c, ana.bearer, approver: ana.authenticator, for: ana.credentialId, SecureRandom.bytes(60)).status == 204)
            let w = try #require(server.traces?.lastWork("PUT /v1/vault/wrapped/{credentialId}")).roundTrips
            if best["wrap"].map({ w.total < $0.total }) ?? true { best["wrap"] = w }
            #expect(try putRecovery(c, ana.bearer, approver: ana.authenticator, SecureRandom.bytes(60)).status == 204)
            let r = try #require(server.traces?.lastWork("PUT /v1/vault/recovery")).roundTrips
            if best["recovery"].map({ r.total < $0.total }) ?? true { best["recovery"] = r }
        }
        #expect(best["wrap"] == RoundTripCounts(writes: 1), "\(String(describing: best["wrap"]))")
        #expect(best["recovery"] == RoundTripCounts(writes: 1), "\(String(describing: best["recovery"]))")
        // Reading: one read (the vault, its live wraps and the caller's session as it stands).
        let (read, trips, statements) = try server.fewestTrips("GET /v1/vault", "GET", "/v1/vault", body: nil, authorization: ana.bearer)
        #expect(read.status == 200 && read.json?["recovery"]?["wrappedKey"] != nil, "\(read)")
        #expect(trips == RoundTripCounts(reads: 1), "\(trips) \(statements)")
    }

    @Test("bad input on every vault route is a 4xx with SPEC's code: 400 before the step-up, 404 for ids that cannot be ids, never a 5xx")
    func badInput() throws {
        let server = try Self.fixture.get()
        let ana = try owner(server)
        let c = ana.client
        let bodies: [String] = ["", "[]", "{", "null", "\"x\"", "{}", "{\"prfSalt\":5}", "{\"prfSalt\":\"\\u0000\"}", "{\"wrappedKey\":null}",
                                "{\"wrappedKey\":\"\(Base64URL.encode(SecureRandom.bytes(59)))\"}",
                                "{\"wrappedKey\":\"\(Base64URL.encode(SecureRandom.bytes(61)))\"}",
                                "{\"wrappedKey\":\"\(Base64.encodeStandard(SecureRandom.bytes(60)))=\"}",
                                "{\"prfSalt\":\"\(Base64URL.encode(SecureRandom.bytes(31)))\"}",
                                "{\"prfSalt\":\"\(Base64URL.encode(SecureRandom.bytes(32)))\",\"x\":1}",
                                "{\"prfSalt\":\"\(String(repeating: "A", count: 5_000))\"}", String(repeating: "[", count: 5000)]
        for b in bodies {
            for path in ["/v1/vault", "/v1/vault/recovery", "/v1/vault/wrapped/\(Base64URL.encode(ana.credentialId))"] {
                let r = try c.send("PUT", path, body: Array(b.utf8), authorization: ana.bearer)
                // A valid wrappedKey on the creating route, or a valid salt on the wrapping ones, is still the wrong body.
                // An empty body carries no Content-Type: 415 or 400, `invalid_request` either way.
                #expect((r.status == 400 || (b.isEmpty && r.status == 415)) && r.code == "invalid_request" && r.isProblem,
                        "PUT \(path) \(b.prefix(60)): \(r)")
            }
        }
        // Ids that cannot be ids: the step-up is asked for first (SPEC "Assurance" order), then 404.
        let good = body("wrappedKey", SecureRandom.bytes(60)).serialized()
        for segment in ["%00", "a%00b", "%FF", String(repeating: "A", count: 3000), "AAAAAAAAAAAAAAAAAAAAA=", "%2E%2E"] {
            expectProblem(try c.send("PUT", "/v1/vault/wrapped/\(segment)", body: good, authorization: ana.bearer), 403, "step_up_required")
        }
        // An id that can be one but names no passkey: 404 once the step-up for it is there.
        expectProblem(try putWrap(c, ana.bearer, approver: ana.authenticator, for: [0, 0, 0], SecureRandom.bytes(60)), 404, "not_found")
        // No credentials, the admin key: 401 / 403 before anything.
        for (method, path) in [("GET", "/v1/vault"), ("PUT", "/v1/vault"), ("PUT", "/v1/vault/recovery"), ("PUT", "/v1/vault/wrapped/AAAA")] {
            let none = try c.send(method, path, body: method == "PUT" ? good : [])
            #expect(none.status == 401 && none.code == "unauthorized", "\(method) \(path): \(none)")
            let admin = try c.send(method, path, body: method == "PUT" ? good : [], authorization: "Bearer \(server.adminKey)")
            #expect([401, 403].contains(admin.status) && admin.isProblem, "\(method) \(path) with the admin key: \(admin)")
        }
    }

    @Test("every table and every request body: the server holds the salt and ciphertext only, never the PRF output, the data key, a key-wrapping key or the vault recovery key")
    func nothingButCiphertext() throws {
        let server = try Self.fixture.get()
        let ana = try owner(server)
        let c = ana.client
        var sent: [[UInt8]] = []
        func send(_ method: String, _ path: String, _ json: JSONValue, authorization: String, headers: [(String, String)] = []) throws -> Reply {
            let bytes = json.serialized()
            sent.append(bytes)
            return try c.send(method, path, body: bytes, authorization: authorization, headers: headers)
        }
        func stepUp(_ approver: SoftAuthenticator, _ action: JSONValue, bearer: String) throws -> String {
            let challenge = try #require(try send("POST", "/v1/step-up/challenges", .object([("method", "passkey"), ("action", action)]),
                                                  authorization: bearer).json)
            let assertion = try c.assertion(approver, options: try #require(challenge["publicKey"])).json()
            let verified = try send("POST", "/v1/step-up/verify", .object([("challengeId", challenge["challengeId"]!), ("credential", assertion)]),
                                    authorization: bearer)
            return try #require(verified.json?["access_token"]?.stringValue, "\(verified)")
        }
        let salt = SecureRandom.bytes(32), dataKey = SecureRandom.bytes(32), recoveryKey = SecureRandom.bytes(32), prfOutput = SecureRandom.bytes(32)
        let kwk = VaultCrypto.kwk(prf: prfOutput, userHandle: ana.userHandle, credentialId: ana.credentialId)
        let recoveryKWK = VaultCrypto.recoveryKWK(recoveryKey)
        let wrapped = try VaultCrypto.wrap(dataKey, key: kwk, aad: VaultCrypto.label + ana.credentialId)
        let recoveryWrap = try VaultCrypto.wrap(dataKey, key: recoveryKWK, aad: VaultCrypto.recoveryLabel)
        #expect(try send("PUT", "/v1/vault", body("prfSalt", salt), authorization: ana.bearer).status == 201)
        let wrapToken = try stepUp(ana.authenticator, wrapAction(ana.credentialId), bearer: ana.bearer)
        #expect(try send("PUT", "/v1/vault/wrapped/\(Base64URL.encode(ana.credentialId))", body("wrappedKey", wrapped), authorization: ana.bearer,
                         headers: [("Latchkey-Step-Up", wrapToken)]).status == 204)
        let recoveryToken = try stepUp(ana.authenticator, Self.recoveryAction, bearer: ana.bearer)
        #expect(try send("PUT", "/v1/vault/recovery", body("wrappedKey", recoveryWrap), authorization: ana.bearer,
                         headers: [("Latchkey-Step-Up", recoveryToken)]).status == 204)

        // The vault's own tables: exactly these columns, holding exactly the salt and the two ciphertexts.
        let db = try TestDatabase.connect()
        let columns = try db.query("""
            SELECT table_name || '.' || column_name AS c FROM information_schema.columns
            WHERE table_schema = current_schema() AND table_name IN ('vaults', 'vault_wrapped_keys') ORDER BY 1
            """).map { try $0.string("c") }
        #expect(columns == ["vault_wrapped_keys.credential_id", "vault_wrapped_keys.updated_at", "vault_wrapped_keys.user_id",
                            "vault_wrapped_keys.wrapped_key", "vaults.created_at", "vaults.prf_salt", "vaults.recovery_wrapped_key",
                            "vaults.user_id"])
        let vault = try db.query("SELECT prf_salt, recovery_wrapped_key FROM vaults WHERE user_id = \(ana.session.userId)")
        #expect(vault.count == 1)
        #expect(try vault[0].bytes("prf_salt") == salt)
        #expect(try vault[0].optionalBytes("recovery_wrapped_key") == recoveryWrap)
        let wraps = try db.query("SELECT credential_id, wrapped_key FROM vault_wrapped_keys WHERE user_id = \(ana.session.userId)")
        #expect(wraps.count == 1)
        #expect(try wraps[0].bytes("credential_id") == ana.credentialId)
        #expect(try wraps[0].bytes("wrapped_key") == wrapped)

        // Every row of every table, as text (bytea as hex), and every request body: none of the secrets, in any encoding.
        let secrets: [(String, [UInt8])] = [("PRF output", prfOutput), ("data key", dataKey), ("vault recovery key", recoveryKey),
                                            ("key-wrapping key", kwk), ("recovery key-wrapping key", recoveryKWK)]
        func spellings(_ bytes: [UInt8]) -> [String] {
            [bytes.map { String(format: "%02x", $0) }.joined(), Base64URL.encode(bytes), Base64.encodeStandard(bytes)]
        }
        let tables = try db.query("""
            SELECT table_name AS t FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'
            """).map { try $0.string("t") }
        #expect(tables.contains("vaults") && tables.contains("vault_wrapped_keys") && tables.contains("audit_log"), "\(tables)")
        var rows = 0
        for table in tables {
            for row in try db.query("SELECT t::text AS r FROM \(unsafeRaw: "\"" + table + "\"") t") {
                let text = try row.string("r").lowercased()
                rows += 1
                for (name, secret) in secrets {
                    for spelling in spellings(secret) where text.contains(spelling.lowercased()) {
                        Issue.record("the \(name) is stored in \(table): \(text.prefix(200))")
                    }
                }
            }
        }
        #expect(rows > 0)
        for body in sent {
            let text = String(decoding: body, as: UTF8.self)
            for (name, secret) in secrets {
                for spelling in spellings(secret) where text.contains(spelling) { Issue.record("a request body carried the \(name): \(text.prefix(200))") }
            }
        }
        // The ciphertext the server holds opens only with what it never had.
        #expect(try VaultCrypto.unwrap(wrapped, key: kwk, aad: VaultCrypto.label + ana.credentialId) == dataKey)
    }

    @Test("a held passkey's session: no recovery wrap, and its own step-up wraps nothing (recovery_pending); a not-held passkey's step-up in that session does")
    func heldSession() throws {
        let server = try TestServer(name: "vault-held") { $0.recoveryDelay = 3600 }
        defer { server.http.stop() }
        let c = server.client(), admin = "Bearer \(server.adminKey)", externalId = "ext-\(uniqueSuffix())"
        func ticket() throws -> String {
            let r = try c.post("/admin/v1/users/\(externalId)/enrolment-tickets", .object([("username", .string("held-\(externalId)")),
                                                                                       ("displayName", "Held")]), authorization: admin)
            return "Ticket " + (try #require(r.json?["ticket"]?.stringValue, "\(r)"))
        }
        // The account's first passkey (an app backend's ticket, no passkey before: not held), then a second one, held.
        let first = SoftAuthenticator(), second = SoftAuthenticator()
        let (_, a) = try c.register(first, authorization: try ticket()) { $0.clientExtensionResults = Self.prf }
        let (_, b) = try c.register(second, authorization: try ticket()) { $0.clientExtensionResults = Self.prf }
        let byFirst = Session(reply: try #require(a.json, "\(a)")), bySecond = Session(reply: try #require(b.json, "\(b)"))
        #expect(bySecond.passkey["heldUntil"]?.stringValue != nil && byFirst.passkey["heldUntil"] == nil, "\(bySecond.passkey)")
        #expect(try c.send("PUT", "/v1/vault", body: body("prfSalt", SecureRandom.bytes(32)).serialized(), authorization: byFirst.bearer).status == 201)
        #expect(try putRecovery(c, byFirst.bearer, approver: first, SecureRandom.bytes(60)).status == 204)
        #expect(try c.get("/v1/vault", authorization: byFirst.bearer).json?["recovery"]?["wrappedKey"] != nil)
        let held = try #require(try c.get("/v1/vault", authorization: bySecond.bearer).json)
        #expect(held["recovery"] == .null, "\(held)")
        // The held passkey approves nothing; the not-held one approves in the held passkey's session.
        let ownStepUp = try c.post("/v1/step-up/challenges", .object([("method", "passkey"), ("action", wrapAction(second.credentialId))]),
                                   authorization: bySecond.bearer)
        #expect(ownStepUp.status == 201, "\(ownStepUp)")
        let options = try #require(ownStepUp.json?["publicKey"]), challengeId = try #require(ownStepUp.json?["challengeId"])
        let assertion = try c.assertion(second, options: options).json()
        let verified = try c.post("/v1/step-up/verify", .object([("challengeId", challengeId), ("credential", assertion)]), authorization: bySecond.bearer)
        expectProblem(verified, 403, "recovery_pending")
        #expect(try putWrap(c, bySecond.bearer, approver: first, for: second.credentialId, SecureRandom.bytes(60)).status == 204)
    }
}
