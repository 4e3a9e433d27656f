import Crypto
import Foundation
import JSON
import LatchkeyServer
import PostgreSQL
import Storage
import Testing
import WebAuthn
import WebAuthnTesting

/// Issue 5 over real HTTP and PostgreSQL: device-key enrolment with proof of possession, step-up
/// challenges bound to user + key + action, verification, single-use action-scoped tokens and
/// receipts that `openssl` re-verifies. Keys are P-256 in both phone encodings; every signature is
/// made by OpenSSL (Crypto.PrivateKey), DER ECDSA-SHA256, as the Secure Enclave and Keystore do.
@Suite("Step-up with device keys")
struct StepUpTests {
    /// A short step-up TTL (LATCHKEY_STEP_UP_TTL), so tokens and challenges are short-lived here too.
    static let fixture = Result { try TestServer(name: "stepup") { $0.stepUpTTL = 30 } }

    static let transfer: JSONValue = .object([("type", "transfer"), ("amount", "200.00"), ("currency", "EUR"),
                                              ("to", "DE89370400440532013000")])
    static let otherTransfer = transfer.setting("amount", "2000.00")

    // MARK: Helpers

    /// A phone: a P-256 key and the encoding its platform sends.
    struct Phone {
        let key: PrivateKey
        let platform: String
        let deviceId: String
        init(platform: String, deviceId: String? = nil, key: PrivateKey = .generateEC(.p256)) {
            self.platform = platform
            self.deviceId = deviceId ?? "device-\(uniqueSuffix())"
            self.key = key
        }
        var publicKey: [UInt8] { platform == "ios" ? key.publicKey.x963Point! : key.publicKey.spkiDER }
        func sign(_ challenge: String) throws -> String {
            Base64URL.encode(try key.sign(try #require(Base64URL.decode(challenge)), algorithm: .ecdsa(.sha256)))
        }
    }

    struct Account {
        let client: Client
        let session: Session
        var authenticator = SoftAuthenticator()
        var bearer: String { session.bearer }
    }

    func account(_ server: TestServer) throws -> Account {
        let client = server.client()
        let authenticator = SoftAuthenticator()
        let session = try client.signUp(authenticator, username: server.username("stepup"))
        return Account(client: client, session: session, authenticator: authenticator)
    }

    /// SPEC "Trust chain": the gate a device-key enrolment needs — a user-verified passkey step-up
    /// for `{"type":"latchkey.device-key.enrol","deviceId":…}` — as a `Latchkey-Step-Up` token.
    func enrolmentApproval(_ a: Account, deviceId: String) throws -> String {
        try a.client.stepUpToken(a.authenticator, authorization: a.bearer,
                                 action: .object([("type", "latchkey.device-key.enrol"), ("deviceId", .string(deviceId))]))
    }

    func enrolmentChallenge(_ a: Account) throws -> JSONValue {
        let r = try a.client.send("POST", "/v1/device-keys/challenges", authorization: a.bearer)
        #expect(r.status == 201, "\(r)")
        return try #require(r.json)
    }

    @discardableResult
    func enrol(_ a: Account, _ phone: Phone, change: (JSONValue) -> JSONValue = { $0 }) throws -> Reply {
        let c = try enrolmentChallenge(a)
        let body: JSONValue = .object([
            ("deviceId", .string(phone.deviceId)), ("publicKey", .string(Base64URL.encode(phone.publicKey))),
            ("platform", .string(phone.platform)), ("name", "Test phone"), ("challengeId", c["challengeId"]!),
            ("signature", .string(try phone.sign(c["challenge"]!.stringValue!))),
        ])
        let approval = try enrolmentApproval(a, deviceId: phone.deviceId)
        return try a.client.post("/v1/device-keys", change(body), authorization: a.bearer, headers: [("Latchkey-Step-Up", approval)])
    }

    /// Posts an enrolment body with a fresh enrolment approval for its deviceId.
    func gatedEnrol(_ a: Account, _ body: JSONValue) throws -> Reply {
        let approval = try enrolmentApproval(a, deviceId: try #require(body["deviceId"]?.stringValue))
        return try a.client.post("/v1/device-keys", body, authorization: a.bearer, headers: [("Latchkey-Step-Up", approval)])
    }

    func enrolled(_ a: Account, _ phone: Phone) throws -> String {
        let r = try enrol(a, phone)
        #expect(r.status == 201, "\(r)")
        return try #require(r.json?["id"]?.stringValue)
    }

    func challenge(_ a: Account, keyId: String, action: JSONValue = StepUpTests.transfer) throws -> JSONValue {
        let r = try a.client.post("/v1/step-up/challenges", .object([("keyId", .string(keyId)), ("action", action)]), authorization: a.bearer)
        #expect(r.status == 201, "\(r)")
        return try #require(r.json)
    }

    func verify(_ a: Account, _ c: JSONValue, signature: String, extra: [(String, JSONValue)] = []) throws -> Reply {
        let body = JSONValue.object([("challengeId", c["challengeId"]!), ("signature", .string(signature))] + extra.map { (key: $0.0, value: $0.1) })
        return try a.client.post("/v1/step-up/verify", body, authorization: a.bearer)
    }

    func approve(_ a: Account, _ phone: Phone, keyId: String, action: JSONValue = StepUpTests.transfer) throws -> JSONValue {
        let c = try challenge(a, keyId: keyId, action: action)
        let r = try verify(a, c, signature: try phone.sign(c["challenge"]!.stringValue!))
        #expect(r.status == 200, "\(r)")
        return try #require(r.json)
    }

    func consume(_ a: Account, token: String, action: JSONValue) throws -> Reply {
        let hash = Base64URL.encode(Digest.sha256(action.canonicalized()))
        return try a.client.post("/v1/step-up/consume", .object([("actionHash", .string(hash))]), authorization: "Bearer \(token)")
    }

    static func claims(_ jwt: String) throws -> JSONValue {
        let parts = jwt.split(separator: ".")
        return try JSONParser.parse(try #require(Base64URL.decode(String(parts[1]))))
    }

    // MARK: Enrolment

    @Test("Enrol an iOS (X9.63) and an Android (SPKI) key, list them, revoke one")
    func enrolListRevoke() throws {
        let server = try Self.fixture.get()
        let a = try account(server)
        let ios = Phone(platform: "ios"), android = Phone(platform: "android")
        let r = try enrol(a, ios)
        #expect(r.status == 201, "\(r)")
        let json = try #require(r.json)
        #expect(json["deviceId"]?.stringValue == ios.deviceId && json["platform"] == "ios" && json["name"] == "Test phone")
        #expect(json["attested"] == false && json["createdAt"]?.stringValue != nil)
        let androidId = try enrolled(a, android)
        let list = try #require(try a.client.get("/v1/device-keys", authorization: a.bearer).json?["deviceKeys"]?.arrayValue)
        #expect(Set(list.compactMap { $0["deviceId"]?.stringValue }) == [ios.deviceId, android.deviceId])

        #expect(try a.client.send("DELETE", "/v1/device-keys/\(androidId)", authorization: a.bearer).status == 204)
        #expect(try a.client.send("DELETE", "/v1/device-keys/\(androidId)", authorization: a.bearer).code == "not_found")
        let after = try #require(try a.client.get("/v1/device-keys", authorization: a.bearer).json?["deviceKeys"]?.arrayValue)
        #expect(after.count == 1)
        // A revoked key → key_revoked from then on.
        let c = try a.client.post("/v1/step-up/challenges", .object([("keyId", .string(androidId)), ("action", Self.transfer)]),
                                  authorization: a.bearer)
        #expect(c.status == 400 && c.code == "key_revoked", "\(c)")
        // Someone else's key is not theirs to delete or use.
        let b = try account(server)
        let iosId = try #require(json["id"]?.stringValue)
        #expect(try b.client.send("DELETE", "/v1/device-keys/\(iosId)", authorization: b.bearer).code == "not_found")
        #expect(try b.client.post("/v1/step-up/challenges", .object([("keyId", .string(iosId)), ("action", Self.transfer)]),
                                  authorization: b.bearer).code == "not_found")
    }

    @Test("Bad encodings → invalid_request with the reason")
    func enrolBadEncodings() throws {
        let server = try Self.fixture.get()
        let a = try account(server)
        let phone = Phone(platform: "android")
        let cases: [(JSONValue, String)] = [
            (.string(Base64URL.encode([0x02] + phone.key.publicKey.x963Point![1...32])), "compressed"),
            (.string(Base64URL.encode(PrivateKey.generateRSA().publicKey.spkiDER)), "RSA"),
            (.string(Base64URL.encode(PrivateKey.generateEC(.p384).publicKey.spkiDER)), "P-384"),
            (.string(Base64URL.encode([0x04] + [UInt8](repeating: 1, count: 64))), "not a point on P-256"),
            (.string(Base64.encodeStandard(phone.publicKey) + "+/"), "base64url"),
            (.number(5), "base64url"),
        ]
        for (key, reason) in cases {
            let r = try enrol(a, phone) { $0.setting("publicKey", key) }
            #expect(r.status == 400 && r.code == "invalid_request", "\(r)")
            #expect(r.json?["detail"]?.stringValue?.contains(reason) == true, "\(reason): \(r)")
        }
        let raw = try enrol(a, phone) { body in
            let der = Base64URL.decode(body["signature"]!.stringValue!)!
            return body.setting("signature", .string(Base64URL.encode(try! ECDSASignature.rawFromDER(der, coordinateLength: 32))))
        }
        // SPEC: a present but wrong signature is signature_invalid (the reason names the encoding).
        #expect(raw.code == "signature_invalid" && raw.text.contains("raw r||s"), "\(raw)")
        for member in ["deviceId", "publicKey", "platform", "challengeId", "signature"] {
            let r = try enrol(a, phone) { $0.setting(member, nil) }
            #expect(r.code == "invalid_request" && r.text.contains(member), "\(member): \(r)")
        }
        #expect(try enrol(a, phone) { $0.setting("platform", "windows") }.code == "invalid_request")
        #expect(try a.client.post("/v1/device-keys", .object([]), authorization: nil).status == 401)
    }

    @Test("Proof of possession: wrong key, reused challenge, another user's challenge")
    func proofOfPossession() throws {
        let server = try Self.fixture.get()
        let a = try account(server), b = try account(server)
        let phone = Phone(platform: "ios"), thief = Phone(platform: "ios")
        // Signed by another key than the one enrolled.
        let wrong = try enrol(a, phone) { $0.setting("publicKey", .string(Base64URL.encode(thief.publicKey))) }
        #expect(wrong.code == "signature_invalid", "\(wrong)")
        // One challenge, one enrolment.
        let c = try enrolmentChallenge(a)
        let body: JSONValue = .object([("deviceId", .string(phone.deviceId)), ("publicKey", .string(Base64URL.encode(phone.publicKey))),
                                       ("platform", "ios"), ("challengeId", c["challengeId"]!),
                                       ("signature", .string(try phone.sign(c["challenge"]!.stringValue!)))])
        // B cannot use (or burn) A's challenge.
        #expect(try gatedEnrol(b, body).code == "challenge_invalid")
        #expect(try gatedEnrol(a, body).status == 201)
        #expect(try gatedEnrol(a, body).code == "challenge_invalid")
        // An enrolment signature is not a step-up approval (and a step-up challenge id is not an enrolment one).
        let keyId = try #require(try a.client.get("/v1/device-keys", authorization: a.bearer).json?["deviceKeys"]?.arrayValue?.first?["id"]?.stringValue)
        let s = try challenge(a, keyId: keyId)
        let misuse = body.setting("challengeId", s["challengeId"]!).setting("signature", .string(try phone.sign(s["challenge"]!.stringValue!)))
        #expect(try gatedEnrol(a, misuse).code == "challenge_invalid")
    }

    @Test("Re-enrolling a deviceId (biometry changed) replaces and revokes the old key")
    func reEnrolmentReplaces() throws {
        let server = try Self.fixture.get()
        let a = try account(server)
        let old = Phone(platform: "ios")
        let oldId = try enrolled(a, old)
        let pending = try challenge(a, keyId: oldId)
        // Same device id, new key (e.g. after .biometryCurrentSet invalidated the old one).
        let new = Phone(platform: "ios", deviceId: old.deviceId)
        let newId = try enrolled(a, new)
        #expect(newId != oldId)
        let list = try #require(try a.client.get("/v1/device-keys", authorization: a.bearer).json?["deviceKeys"]?.arrayValue)
        #expect(list.count == 1 && list[0]["id"]?.stringValue == newId)
        // The old key's pending challenge and new challenges: key_revoked.
        let r = try verify(a, pending, signature: try old.sign(pending["challenge"]!.stringValue!))
        #expect(r.code == "key_revoked", "\(r)")
        #expect(try a.client.post("/v1/step-up/challenges", .object([("keyId", .string(oldId)), ("action", Self.transfer)]),
                                  authorization: a.bearer).code == "key_revoked")
        _ = try approve(a, new, keyId: newId)
    }

    // MARK: Step-up

    @Test("Approve, get an action-scoped token, consume it exactly once for that action")
    func approveAndConsume() throws {
        let server = try Self.fixture.get()
        let a = try account(server)
        let phone = Phone(platform: "android")
        let keyId = try enrolled(a, phone)
        let c = try challenge(a, keyId: keyId)
        let challengeBytes = try #require(Base64URL.decode(c["challenge"]!.stringValue!))
        #expect(challengeBytes.count == 138 && Array(challengeBytes[0..<8]) == Array("LKSTEPUP".utf8))
        #expect(c["actionHash"]?.stringValue == Base64URL.encode(Digest.sha256(Self.transfer.canonicalized())))
        #expect(Array(challengeBytes[106...]) == Digest.sha256(Self.transfer.canonicalized()))
        #expect(Array(challengeBytes[42..<74]) == Digest.sha256(Array(a.session.userId.utf8)))
        #expect(c["expiresAt"]?.stringValue != nil)

        let r = try verify(a, c, signature: try phone.sign(c["challenge"]!.stringValue!))
        #expect(r.status == 200, "\(r)")
        let json = try #require(r.json)
        let token = try #require(json["access_token"]?.stringValue)
        #expect(json["token_type"] == "Bearer" && (json["expires_in"]?.intValue ?? 999) <= 120)
        #expect(json["actionHash"] == c["actionHash"]! && json["receiptId"]?.stringValue != nil)
        let claims = try Self.claims(token)
        #expect(claims["sub"]?.stringValue == a.session.userId)
        #expect(claims["action_hash"] == c["actionHash"]!)
        #expect(claims["jti"]?.stringValue != nil && claims["auth_time"]?.intValue != nil && claims["acr"]?.stringValue != nil)
        // Issue 10: this key sent no attestation, so nothing proved it is in hardware: `swk`, never `hwk`.
        #expect(claims["amr"]?.arrayValue == ["swk", "pop"] && claims["acr"]?.stringValue == "urn:latchkey:acr:device-key")
        let lifetime = (claims["exp"]?.intValue ?? 0) - (claims["iat"]?.intValue ?? 0)
        #expect(lifetime > 0 && lifetime <= 120)

        // A step-up token is not an access token, and an access token is not a step-up token.
        #expect(try a.client.get("/v1/device-keys", authorization: "Bearer \(token)").status == 401)
        #expect(try consume(a, token: a.session.accessToken, action: Self.transfer).status == 401)
        // Action B with a token for action A: refused, and the token stays good for A.
        let wrong = try consume(a, token: token, action: Self.otherTransfer)
        #expect(wrong.code == "action_mismatch", "\(wrong)")
        let ok = try consume(a, token: token, action: Self.transfer)
        #expect(ok.status == 200, "\(ok)")
        #expect(ok.json?["sub"]?.stringValue == a.session.userId && ok.json?["action"]?.canonicalized() == Self.transfer.canonicalized())
        let again = try consume(a, token: token, action: Self.transfer)
        #expect(again.status == 409 && again.code == "conflict", "\(again)")
        #expect(try consume(a, token: token, action: Self.otherTransfer).code == "action_mismatch")
        let malformed = try a.client.post("/v1/step-up/consume", .object([("actionHash", "nope")]), authorization: "Bearer \(token)")
        #expect(malformed.code == "invalid_request")
    }

    @Test("Wrong key, changed action, tampered challenge, replay → their codes")
    func refusals() throws {
        let server = try Self.fixture.get()
        let a = try account(server)
        let phone = Phone(platform: "ios"), second = Phone(platform: "android")
        let keyId = try enrolled(a, phone)
        _ = try enrolled(a, second)

        // Signed by the user's other device key: signature_invalid (and the challenge is used up).
        let c1 = try challenge(a, keyId: keyId)
        #expect(try verify(a, c1, signature: try second.sign(c1["challenge"]!.stringValue!)).code == "signature_invalid")
        #expect(try verify(a, c1, signature: try phone.sign(c1["challenge"]!.stringValue!)).code == "challenge_invalid")

        // The client claims another action than the one bound: action_mismatch.
        let c2 = try challenge(a, keyId: keyId)
        let changed = try verify(a, c2, signature: try phone.sign(c2["challenge"]!.stringValue!), extra: [("action", Self.otherTransfer)])
        #expect(changed.code == "action_mismatch", "\(changed)")

        // The phone signs challenge bytes whose action hash was swapped for another action's.
        let c3 = try challenge(a, keyId: keyId)
        var tampered = try #require(Base64URL.decode(c3["challenge"]!.stringValue!))
        tampered.replaceSubrange(106..<138, with: Digest.sha256(Self.otherTransfer.canonicalized()))
        #expect(try verify(a, c3, signature: try phone.sign(Base64URL.encode(tampered))).code == "signature_invalid")

        // Replay: a good signature, sent twice.
        let c4 = try challenge(a, keyId: keyId)
        let good = try phone.sign(c4["challenge"]!.stringValue!)
        #expect(try verify(a, c4, signature: good).status == 200)
        #expect(try verify(a, c4, signature: good).code == "challenge_invalid")

        // Bad encodings are refused before the challenge is touched; it still works afterwards.
        let c5 = try challenge(a, keyId: keyId)
        let badB64 = try verify(a, c5, signature: "***")
        #expect(badB64.code == "invalid_request" && badB64.text.contains("base64url"), "\(badB64)")
        let raw = try ECDSASignature.rawFromDER(try phone.key.sign(Base64URL.decode(c5["challenge"]!.stringValue!)!, algorithm: .ecdsa(.sha256)),
                                                coordinateLength: 32)
        #expect(try verify(a, c5, signature: Base64URL.encode(raw)).code == "signature_invalid")
        #expect(try verify(a, c5, signature: Base64URL.encode([0x01, 0x02, 0x03])).code == "signature_invalid")
        #expect(try a.client.post("/v1/step-up/verify", .object([("signature", .string(good))]), authorization: a.bearer).code == "invalid_request")
        #expect(try a.client.post("/v1/step-up/verify", .object([("challengeId", c5["challengeId"]!)]), authorization: a.bearer).code == "invalid_request")
        #expect(try verify(a, c5, signature: try phone.sign(c5["challenge"]!.stringValue!)).status == 200)

        // Challenge requests: missing or malformed action.
        for body: JSONValue in [.object([("keyId", .string(keyId))]), .object([("keyId", .string(keyId)), ("action", "pay")]),
                                .object([("action", Self.transfer)]), .object([("method", "sms"), ("action", Self.transfer)])] {
            #expect(try a.client.post("/v1/step-up/challenges", body, authorization: a.bearer).code == "invalid_request", "\(body.text)")
        }
    }

    @Test("Another user's challenge is challenge_invalid and does not burn it for its owner")
    func otherUsersChallenge() throws {
        let server = try Self.fixture.get()
        let a = try account(server), b = try account(server)
        let phone = Phone(platform: "ios")
        let keyId = try enrolled(a, phone)
        let c = try challenge(a, keyId: keyId)
        let signature = try phone.sign(c["challenge"]!.stringValue!)
        #expect(try verify(b, c, signature: signature).code == "challenge_invalid")
        #expect(try verify(a, c, signature: signature).status == 200)
    }

    @Test("An expired challenge (expired in the database) → challenge_invalid")
    func expired() throws {
        let server = try Self.fixture.get()
        let a = try account(server)
        let phone = Phone(platform: "android")
        let keyId = try enrolled(a, phone)
        let c = try challenge(a, keyId: keyId)
        let hash = try #require(Base64URL.decode(c["challengeId"]!.stringValue!))
        let n = try server.database.pool.execute("UPDATE challenges SET expires_at = now() - interval '1 second' WHERE hash = \(hash)")
        #expect(n == 1)
        let r = try verify(a, c, signature: try phone.sign(c["challenge"]!.stringValue!))
        #expect(r.code == "challenge_invalid" && r.text.contains("expired"), "\(r)")
    }

    @Test("A key revoked between challenge and verify → key_revoked")
    func revokedAfterChallenge() throws {
        let server = try Self.fixture.get()
        let a = try account(server)
        let phone = Phone(platform: "ios")
        let keyId = try enrolled(a, phone)
        let c = try challenge(a, keyId: keyId)
        #expect(try a.client.send("DELETE", "/v1/device-keys/\(keyId)", authorization: a.bearer).status == 204)
        let r = try verify(a, c, signature: try phone.sign(c["challenge"]!.stringValue!))
        #expect(r.status == 400 && r.code == "key_revoked", "\(r)")
    }

    @Test("16 concurrent verifies of one challenge → exactly one success")
    func sixteenVerifiesOneWins() throws {
        let server = try Self.fixture.get()
        let a = try account(server)
        let phone = Phone(platform: "android")
        let keyId = try enrolled(a, phone)
        let c = try challenge(a, keyId: keyId)
        let body = JSONValue.object([("challengeId", c["challengeId"]!), ("signature", .string(try phone.sign(c["challenge"]!.stringValue!)))]).serialized()
        let endpoint = server.endpoint, bearer = a.bearer
        let outcomes = onThreads(16) { _, start -> String in
            let client = Client(endpoint)
            do {
                _ = try client.get("/healthz")
                start()
                let r = try client.send("POST", "/v1/step-up/verify", body: body, authorization: bearer)
                return r.status == 200 ? "200" : "\(r.status) \(r.code ?? "?")"
            } catch {
                start()
                return "error: \(error)"
            }
        }
        #expect(outcomes.count == 16)
        #expect(outcomes.filter { $0 == "200" }.count == 1, "\(outcomes)")
        #expect(outcomes.filter { $0 == "400 challenge_invalid" }.count == 15, "\(outcomes)")
    }

    @Test("8 concurrent enrolments with one challenge, each with its own step-up → one 201; the others' step-ups stay unspent")
    func eightEnrolmentsOneWins() throws {
        let server = try Self.fixture.get()
        let a = try account(server)
        let phone = Phone(platform: "android")
        let c = try enrolmentChallenge(a)
        let body = JSONValue.object([
            ("deviceId", .string(phone.deviceId)), ("publicKey", .string(Base64URL.encode(phone.publicKey))),
            ("platform", .string(phone.platform)), ("challengeId", c["challengeId"]!),
            ("signature", .string(try phone.sign(c["challenge"]!.stringValue!))),
        ]).serialized()
        var approvals: [String] = []
        for _ in 0..<8 { approvals.append(try enrolmentApproval(a, deviceId: phone.deviceId)) }
        let endpoint = server.endpoint, bearer = a.bearer, gates = approvals
        let outcomes = onThreads(8) { i, start -> String in
            let client = Client(endpoint)
            start()
            guard let r = try? client.send("POST", "/v1/device-keys", body: body, authorization: bearer,
                                           headers: [("Latchkey-Step-Up", gates[i])]) else { return "error" }
            return r.status == 201 ? "201" : "\(r.status) \(r.code ?? "?")"
        }
        #expect(outcomes.filter { $0 == "201" }.count == 1, "\(outcomes)")
        #expect(outcomes.filter { $0 == "400 challenge_invalid" }.count == 7, "\(outcomes)")
        // A loser's step-up was not redeemed: it enrols with a fresh challenge.
        let winner = try #require(outcomes.firstIndex(of: "201"))
        let c2 = try enrolmentChallenge(a)
        let again = JSONValue.object([
            ("deviceId", .string(phone.deviceId)), ("publicKey", .string(Base64URL.encode(phone.publicKey))),
            ("platform", .string(phone.platform)), ("challengeId", c2["challengeId"]!),
            ("signature", .string(try phone.sign(c2["challenge"]!.stringValue!))),
        ])
        let replaced = try a.client.post("/v1/device-keys", again, authorization: a.bearer,
                                         headers: [("Latchkey-Step-Up", approvals[(winner + 1) % 8])])
        #expect(replaced.status == 201, "\(replaced)")
    }

    @Test("Passkey method: user verification required; the token is scoped like a device key's")
    func passkeyMethod() throws {
        let server = try Self.fixture.get()
        let client = server.client()
        let authenticator = SoftAuthenticator()
        let session = try client.signUp(authenticator, username: server.username("pk"))
        let a = Account(client: client, session: session)
        func passkeyChallenge() throws -> JSONValue {
            let r = try client.post("/v1/step-up/challenges", .object([("method", "passkey"), ("action", Self.transfer)]), authorization: a.bearer)
            #expect(r.status == 201, "\(r)")
            return try #require(r.json)
        }
        let c = try passkeyChallenge()
        let options = try #require(c["publicKey"])
        #expect(options["userVerification"] == "required" && options["rpId"]?.stringValue == server.rpId)
        #expect(options["challenge"] == c["challenge"]! && options["allowCredentials"]?.arrayValue?.count == 1)

        // Without UV: user_verification_required.
        var noUV = try client.assertion(authenticator, options: options)
        noUV.userVerified = false
        let refused = try client.post("/v1/step-up/verify", .object([("challengeId", c["challengeId"]!), ("credential", noUV.json())]),
                                      authorization: a.bearer)
        #expect(refused.code == "user_verification_required", "\(refused)")

        let c2 = try passkeyChallenge()
        let assertion = try client.assertion(authenticator, options: try #require(c2["publicKey"])).json()
        // A device-key signature for a passkey challenge is the wrong shape.
        let ok = try client.post("/v1/step-up/verify", .object([("challengeId", c2["challengeId"]!), ("credential", assertion)]),
                                 authorization: a.bearer)
        #expect(ok.status == 200, "\(ok)")
        let token = try #require(ok.json?["access_token"]?.stringValue)
        let claims = try Self.claims(token)
        #expect(claims["amr"]?.arrayValue?.contains("user") == true && claims["acr"]?.stringValue?.contains("passkey") == true)
        #expect(try consume(a, token: token, action: Self.otherTransfer).code == "action_mismatch")
        #expect(try consume(a, token: token, action: Self.transfer).status == 200)
        #expect(try consume(a, token: token, action: Self.transfer).code == "conflict")

        // The step-up challenge is no login challenge.
        let c3 = try passkeyChallenge()
        let login = try client.assertion(authenticator, options: try #require(c3["publicKey"])).bytes()
        #expect(try client.send("POST", "/v1/passkeys/authentication/verify", body: login).code == "challenge_invalid")
    }

    // MARK: Receipts

    @Test("Receipts hold what was approved and re-verify with the openssl command line (README)")
    func receiptVerifiesWithOpenSSL() throws {
        let server = try Self.fixture.get()
        let a = try account(server), b = try account(server)
        let phone = Phone(platform: "ios")
        let keyId = try enrolled(a, phone)
        let approval = try approve(a, phone, keyId: keyId)
        let id = try #require(approval["receiptId"]?.stringValue)
        #expect(try b.client.get("/v1/step-up/receipts/\(id)", authorization: b.bearer).code == "not_found")
        let r = try a.client.get("/v1/step-up/receipts/\(id)", authorization: a.bearer)
        #expect(r.status == 200, "\(r)")
        let receipt = try #require(r.json)
        #expect(receipt["action"]?.canonicalized() == Self.transfer.canonicalized() && receipt["keyId"]?.stringValue == keyId && receipt["method"] == "device-key")
        #expect(receipt["actionCanonical"]?.stringValue == String(decoding: Self.transfer.canonicalized(), as: UTF8.self))
        // The admin key is not a credential on public routes (issue 13, defect 5): an auditor reads the
        // receipt through the admin API, behind the admin listener.
        let adminOnPublic = try a.client.get("/v1/step-up/receipts/\(id)", authorization: "Bearer \(server.adminKey)")
        #expect(adminOnPublic.status == 401 && adminOnPublic.code == "unauthorized", "\(adminOnPublic)")
        let audited = try a.client.get("/admin/v1/step-up/receipts/\(id)", authorization: "Bearer \(server.adminKey)")
        #expect(audited.status == 200 && audited.json?["id"]?.stringValue == id, "\(audited)")
        #expect(try a.client.get("/admin/v1/step-up/receipts/\(id)", authorization: a.bearer).code == "forbidden")

        // The README's commands, run as written (jq + openssl), on the receipt as served.
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("receipt-\(uniqueSuffix())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data(r.body).write(to: dir.appendingPathComponent("receipt.json"))
        let script = """
            set -e
            b64url() { local s; s=$(tr '_-' '/+'); case $(( ${#s} % 4 )) in 2) s="$s==";; 3) s="$s=";; esac; printf '%s' "$s" | openssl base64 -d -A; }
            jq -r .publicKeyPEM receipt.json > key.pem
            jq -j .signedData receipt.json | b64url > signed.bin
            jq -j .signature receipt.json | b64url > sig.der
            openssl dgst -sha256 -verify key.pem -signature sig.der signed.bin
            jq -j .challenge receipt.json | b64url > challenge.bin
            jq -j .actionCanonical receipt.json | openssl dgst -sha256 -binary > action.sha256
            tail -c 32 challenge.bin | cmp - action.sha256 && echo "action bound"
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", script]
        process.currentDirectoryURL = dir
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try process.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(text)")
        #expect(text.contains("Verified OK") && text.contains("action bound"), "\(text)")
    }
}
