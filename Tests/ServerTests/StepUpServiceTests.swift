import Crypto
import DeviceKeys
import Foundation
import JSON
@testable import LatchkeyServer
import Storage
import Testing
import Tokens
import WebAuthnTesting

/// SPEC "Step-up": `StepUpService`'s decisions over the in-memory stores (`StepUpWorld`), on a
/// manual clock: no socket, no PostgreSQL. StepUpTests keeps the same behaviour over HTTP and
/// PostgreSQL.
@Suite("Step-up service, in memory")
struct StepUpServiceTests {
    @Test("a device-key challenge binds user, key and action, for the step-up TTL")
    func challengeBinds() throws {
        let w = try StepUpWorld()
        let ana = w.person("ana")
        let phone = StepUpWorld.Phone()
        let keyId = try w.enrolled(ana, phone, passkey: w.passkey(ana))
        let before = w.tables.challengeCount

        let c = try w.challenge(ana, keyId: keyId)
        let bytes = try #require(c["challenge"]?.stringValue.flatMap(Base64URL.decode))
        let parsed = try StepUpChallenge(parsing: bytes)
        let action = try StepUpAction(StepUpWorld.transfer)
        #expect(parsed.method == .deviceKey)
        #expect(parsed.binds(userId: ana.id, keyBinding: phone.publicKey, action: action))
        #expect(!parsed.binds(userId: "user-bob", keyBinding: phone.publicKey, action: action))
        #expect(c["actionHash"]?.stringValue == Base64URL.encode(action.hash))
        #expect(c["expiresAt"]?.stringValue == iso8601(w.clock.now().addingTimeInterval(60)))
        #expect(c["publicKey"] == nil)
        #expect(w.tables.challengeCount == before + 1)
    }

    @Test("a challenge is refused for another user's key, an unknown or revoked key, a bad body, an account with no passkey")
    func challengeRefusals() throws {
        let w = try StepUpWorld()
        let ana = w.person("ana"), bob = w.person("bob")
        let phone = StepUpWorld.Phone()
        let keyId = try w.enrolled(ana, phone, passkey: w.passkey(ana))
        expectRefusal(.notFound) { try w.challenge(bob, keyId: keyId) }
        expectRefusal(.notFound) { try w.challenge(ana, keyId: Base64URL.encode([UInt8](repeating: 7, count: 16))) }
        expectRefusal(.invalidRequest) { try w.challenge(ana, keyId: "not an id") }
        expectRefusal(.invalidRequest) { try w.stepUp.createChallenge(userId: ana.id, body: .object([("keyId", .string(keyId))])) }
        expectRefusal(.invalidRequest) { try w.stepUp.createChallenge(userId: ana.id, body: .object([("action", StepUpWorld.transfer)])) }
        expectRefusal(.credentialUnknown) {
            try w.stepUp.createChallenge(userId: bob.id, body: .object([("method", "passkey"), ("action", StepUpWorld.transfer)]))
        }
        try w.deviceKeys.revokeDeviceKey(userId: ana.id, id: keyId)
        expectRefusal(.keyRevoked) { try w.challenge(ana, keyId: keyId) }
        // The OP cookie may ask for its one action type alone.
        expectRefusal(.unauthorized) {
            try w.stepUp.createChallenge(userId: ana.id, body: .object([("method", "passkey"), ("action", StepUpWorld.transfer)]),
                                         onlyActionType: GatedActionType.oauthAuthorization)
        }
    }

    @Test("a good device-key signature: a token for that action, a receipt with its audit line and event, the key's last use")
    func verifyByDeviceKey() throws {
        let w = try StepUpWorld()
        let ana = w.person("ana")
        let phone = StepUpWorld.Phone()
        let keyId = try w.enrolled(ana, phone, passkey: w.passkey(ana))
        w.clock.advance(5)
        let answer = try w.approve(ana, phone, keyId: keyId)

        let token = try #require(answer["access_token"]?.stringValue)
        let claims = try w.signer.stepUpClaims(token)
        #expect(claims.subject == ana.id && claims.sessionId == ana.sessionId)
        #expect(claims.actionHash == (try StepUpAction(StepUpWorld.transfer)).hash)
        #expect(claims.acr == AuthenticationClaims.deviceKey.acr)
        #expect(claims.expiresAt - claims.issuedAt == 60)
        #expect(answer["expires_in"]?.intValue == 60)

        let receiptId = try #require(answer["receiptId"]?.stringValue)
        #expect(claims.receiptId == receiptId)
        let receipt = try #require(try w.store.receipt(id: receiptId))
        #expect(receipt.keyId == keyId && receipt.method == .deviceKey && receipt.tokenJTI == claims.jwtId)
        #expect(receipt.publicKey == phone.publicKey && receipt.consumedAt == nil)
        // What was signed is what the receipt keeps: it verifies offline.
        #expect(phone.key.publicKey.verify(signature: receipt.signature, message: receipt.signedData, algorithm: .ecdsa(.sha256)))
        #expect(w.tables.audit.last?.action == AuditAction.stepUpApproved.rawValue)
        #expect(w.tables.events.last?.type == .stepUpApproved && w.tables.events.last?.data["receiptId"]?.stringValue == receiptId)
        #expect(try w.store.deviceKey(id: keyId)?.lastUsedAt == w.clock.now())
        // The owner reads the receipt; nobody else.
        #expect(try w.stepUp.receipt(id: receiptId, userId: ana.id).keyId == keyId)
        expectRefusal(.notFound) { try w.stepUp.receipt(id: receiptId, userId: "user-bob") }
    }

    @Test("a signature by another key, a replayed challenge, an expired one: refused, and each challenge is used once")
    func verifyRefusals() throws {
        let w = try StepUpWorld()
        let ana = w.person("ana")
        let phone = StepUpWorld.Phone(), thief = StepUpWorld.Phone()
        let keyId = try w.enrolled(ana, phone, passkey: w.passkey(ana))

        // Wrong key: signature_invalid, and the challenge is gone (the right signature comes too late).
        let c = try w.challenge(ana, keyId: keyId)
        expectRefusal(.signatureInvalid) { try w.verify(ana, c, signature: try thief.sign(c["challenge"])) }
        expectRefusal(.challengeInvalid) { try w.verify(ana, c, signature: try phone.sign(c["challenge"])) }

        // Replay: the first verify wins, the same body again is challenge_invalid.
        let d = try w.challenge(ana, keyId: keyId)
        let signature = try phone.sign(d["challenge"])
        _ = try w.verify(ana, d, signature: signature)
        expectRefusal(.challengeInvalid) { try w.verify(ana, d, signature: signature) }

        // Another user cannot use (or burn) ana's challenge.
        let e = try w.challenge(ana, keyId: keyId)
        expectRefusal(.challengeInvalid) { try w.verify(w.person("bob"), e, signature: try phone.sign(e["challenge"])) }
        _ = try w.verify(ana, e, signature: try phone.sign(e["challenge"]))

        // Expired: the store's clock decides (the step-up TTL is 60 s).
        let f = try w.challenge(ana, keyId: keyId)
        w.clock.advance(60)
        expectRefusal(.challengeInvalid) { try w.verify(ana, f, signature: try phone.sign(f["challenge"])) }
        let g = try w.challenge(ana, keyId: keyId)
        w.clock.advance(59)
        _ = try w.verify(ana, g, signature: try phone.sign(g["challenge"]))
    }

    @Test("a key revoked after its challenge: key_revoked, no receipt, no audit line")
    func revokedKey() throws {
        let w = try StepUpWorld()
        let ana = w.person("ana")
        let phone = StepUpWorld.Phone()
        let keyId = try w.enrolled(ana, phone, passkey: w.passkey(ana))
        let c = try w.challenge(ana, keyId: keyId)
        try w.deviceKeys.revokeDeviceKey(userId: ana.id, id: keyId)
        let audit = w.tables.audit.count
        expectRefusal(.keyRevoked) { try w.verify(ana, c, signature: try phone.sign(c["challenge"])) }
        #expect(w.tables.audit.count == audit)
        #expect(!w.tables.events.contains { $0.type == .stepUpApproved && $0.data["keyId"]?.stringValue == keyId })
    }

    @Test("a revocation landing between the key read and the receipt still wins (the store's write checks the key)")
    func revocationBetweenReadAndWrite() throws {
        let w = try StepUpWorld()
        let ana = w.person("ana")
        let phone = StepUpWorld.Phone()
        let keyId = try w.enrolled(ana, phone, passkey: w.passkey(ana))
        let key = try #require(try w.store.deviceKey(id: keyId))
        // The approval as the service builds it, written after the key was revoked.
        try w.deviceKeys.revokeDeviceKey(userId: ana.id, id: keyId)
        let receipt = StepUpReceiptRecord(id: "r1", userId: ana.id, method: .deviceKey, keyId: keyId, publicKey: key.publicKey,
                                          challenge: [1], signedData: [1], signature: [1], action: "{}", actionHash: [UInt8](repeating: 0, count: 32),
                                          keyBinding: "", tokenJTI: "j1", tokenExpiresAt: w.clock.now(), createdAt: w.clock.now())
        #expect(try !w.store.insertReceipt(receipt, liveDeviceKeyId: keyId, appAttestCounter: nil, credentialUse: nil, audit: [], events: []))
        #expect(try w.store.receipt(id: "r1") == nil)
    }

    @Test("the approval's one write keeps its compare-and-sets: an App Attest counter or a passkey counter not above the stored one writes nothing")
    func receiptCompareAndSet() throws {
        let w = try StepUpWorld()
        let ana = w.person("ana")
        let phone = StepUpWorld.Phone()
        let keyId = try w.enrolled(ana, phone, passkey: w.passkey(ana))
        func receipt(_ n: Int, method: StepUpMethod = .deviceKey, keyId: String) -> StepUpReceiptRecord {
            StepUpReceiptRecord(id: "r\(n)", userId: ana.id, method: method, keyId: keyId, publicKey: [1], challenge: [1], signedData: [1],
                                signature: [1], action: "{}", actionHash: [UInt8](repeating: 0, count: 32), keyBinding: "",
                                tokenJTI: "j\(n)", tokenExpiresAt: w.clock.now(), createdAt: w.clock.now())
        }
        // Two approvals that read the same counter: the one stored first wins, the other writes nothing.
        #expect(try w.store.insertReceipt(receipt(1, keyId: keyId), liveDeviceKeyId: keyId, appAttestCounter: 7, credentialUse: nil,
                                          audit: [], events: []))
        #expect(try !w.store.insertReceipt(receipt(2, keyId: keyId), liveDeviceKeyId: keyId, appAttestCounter: 7, credentialUse: nil,
                                           audit: [], events: []))
        #expect(try w.store.receipt(id: "r2") == nil && w.store.deviceKey(id: keyId)?.appAttestCounter == 7)

        let authenticator = w.passkey(ana, SoftAuthenticator(signCount: 4))
        let credentialId = Base64URL.encode(authenticator.credentialId)
        func use(_ count: Int64) -> CredentialUse {
            CredentialUse(credentialId: authenticator.credentialId, userId: ana.id, signCount: count, backedUp: false, cloneWarning: false,
                          onRegression: .reject)
        }
        #expect(try w.store.insertReceipt(receipt(3, method: .passkey, keyId: credentialId), liveDeviceKeyId: nil, appAttestCounter: nil,
                                          credentialUse: use(5), audit: [], events: []))
        #expect(throws: StorageError.conflict(.signCountRegression)) {
            try w.store.insertReceipt(receipt(4, method: .passkey, keyId: credentialId), liveDeviceKeyId: nil, appAttestCounter: nil,
                                      credentialUse: use(5), audit: [], events: [])
        }
        #expect(throws: StorageError.notFound) {
            try w.store.insertReceipt(receipt(5, method: .passkey, keyId: "AAAA"), liveDeviceKeyId: nil, appAttestCounter: nil,
                                      credentialUse: CredentialUse(credentialId: [0, 0, 0], userId: ana.id, signCount: 9, backedUp: false,
                                                                   cloneWarning: false, onRegression: .reject), audit: [], events: [])
        }
        #expect(try w.store.receipt(id: "r4") == nil && w.tables.passkeyRow(id: authenticator.credentialId)?.record.signCount == 5)
    }

    @Test("the action the client claims must be the bound one: action_mismatch, and the challenge is used up")
    func claimedActionMismatch() throws {
        let w = try StepUpWorld()
        let ana = w.person("ana")
        let phone = StepUpWorld.Phone()
        let keyId = try w.enrolled(ana, phone, passkey: w.passkey(ana))
        let c = try w.challenge(ana, keyId: keyId)
        let other = StepUpWorld.transfer.setting("amount", "2000.00")
        expectRefusal(.actionMismatch) { try w.verify(ana, c, signature: try phone.sign(c["challenge"]), claimed: other) }
        expectRefusal(.challengeInvalid) { try w.verify(ana, c, signature: try phone.sign(c["challenge"]), claimed: StepUpWorld.transfer) }
        let d = try w.challenge(ana, keyId: keyId)
        _ = try w.verify(ana, d, signature: try phone.sign(d["challenge"]), claimed: StepUpWorld.transfer)
    }

    @Test("a token is redeemed once, for its own action; its session's end and its key's revocation end it")
    func redemptionOnce() throws {
        let w = try StepUpWorld()
        let ana = w.person("ana")
        let phone = StepUpWorld.Phone()
        let keyId = try w.enrolled(ana, phone, passkey: w.passkey(ana))
        let action = StepUpWorld.transfer

        let answer = try w.approve(ana, phone, keyId: keyId)
        let receiptId = try #require(answer["receiptId"]?.stringValue)
        // Another action's hash: action_mismatch, and the token stays unused.
        expectRefusal(.actionMismatch) { try w.consume(answer["access_token"], action: action.setting("amount", "1.00")) }
        let consumed = try w.consume(answer["access_token"], action: action)
        #expect(consumed["sub"]?.stringValue == ana.id && consumed["receiptId"]?.stringValue == receiptId)
        #expect(consumed["action"]?.canonicalized() == action.canonicalized())
        #expect(try w.store.receipt(id: receiptId)?.consumedAt == w.clock.now())
        expectRefusal(.conflict) { try w.consume(answer["access_token"], action: action) }

        // A token whose session ended.
        let second = try w.approve(ana, phone, keyId: keyId)
        w.revocations.insert([ana.sessionId])
        expectRefusal(.unauthorized) { try w.consume(second["access_token"], action: action) }

        // A token whose key was revoked before it was used is as good as unknown.
        let bob = w.person("bob")
        let bobPhone = StepUpWorld.Phone()
        let bobKey = try w.enrolled(bob, bobPhone, passkey: w.passkey(bob))
        let third = try w.approve(bob, bobPhone, keyId: bobKey)
        try w.deviceKeys.revokeDeviceKey(userId: bob.id, id: bobKey)
        expectRefusal(.unauthorized) { try w.consume(third["access_token"], action: action) }

        // An expired token (no leeway) and a forged one.
        let carol = w.person("carol")
        let carolPhone = StepUpWorld.Phone()
        let carolKey = try w.enrolled(carol, carolPhone, passkey: w.passkey(carol))
        let fourth = try w.approve(carol, carolPhone, keyId: carolKey)
        w.clock.advance(61)
        expectRefusal(.unauthorized) { try w.consume(fourth["access_token"], action: action) }
        expectRefusal(.unauthorized) { try w.consume(.string("e30.e30.AA"), action: action) }
    }

    @Test("a passkey approves with user verification: hwk-free passkey acr, the counter stored, the receipt")
    func verifyByPasskey() throws {
        let w = try StepUpWorld()
        let ana = w.person("ana")
        let authenticator = SoftAuthenticator(signCount: 1)
        w.passkey(ana, authenticator)
        let answer = try w.approveWithPasskey(ana, authenticator, action: StepUpWorld.transfer)
        let claims = try w.signer.stepUpClaims(try #require(answer["access_token"]?.stringValue))
        #expect(claims.acr == AuthenticationClaims.passkeyVerified.acr)
        let receiptId = try #require(answer["receiptId"]?.stringValue)
        let receipt = try #require(try w.store.receipt(id: receiptId))
        #expect(receipt.method == .passkey && receipt.keyId == Base64URL.encode(authenticator.credentialId))
        #expect(receipt.clientDataJSON != nil && receipt.authenticatorData != nil)
        #expect(w.tables.passkeyRow(id: authenticator.credentialId)?.record.signCount == Int64(authenticator.signCount))
        // The token approves a change gated on a user-verified passkey, for exactly that action.
        let action = try StepUpAction(StepUpWorld.transfer)
        let checked = try w.stepUp.checkedStepUp(try #require(answer["access_token"]?.stringValue), userId: ana.id, action: action,
                                                 changes: "transfers", session: ana.sessionId)
        #expect(checked.receiptId == receipt.id)
        expectRefusal(.stepUpRequired) {
            try w.stepUp.checkedStepUp(answer["access_token"]!.stringValue!, userId: ana.id,
                                       action: try StepUpAction(StepUpWorld.transfer.setting("amount", "9")), changes: "transfers")
        }
        expectRefusal(.stepUpRequired) {
            try w.stepUp.checkedStepUp(answer["access_token"]!.stringValue!, userId: "user-bob", action: action, changes: "transfers")
        }
    }

    @Test("passkey refusals: no user verification, a counter that went back (flagged), a revoked or held passkey, another's passkey")
    func passkeyRefusals() throws {
        let w = try StepUpWorld()
        let ana = w.person("ana"), bob = w.person("bob")
        let authenticator = SoftAuthenticator(signCount: 10)
        w.passkey(ana, authenticator)
        expectRefusal(.userVerificationRequired) {
            try w.approveWithPasskey(ana, authenticator, action: StepUpWorld.transfer) { $0.userVerified = false }
        }
        // A counter not above the stored one: refused under `reject`, and the passkey flagged with its audit line.
        expectRefusal(.signCountRegression) {
            try w.approveWithPasskey(ana, authenticator, action: StepUpWorld.transfer) { $0.signCount = 10 }
        }
        #expect(w.tables.passkeyRow(id: authenticator.credentialId)?.record.flagged == true)
        #expect(w.tables.audit.last?.action == AuditAction.passkeyFlagged.rawValue)
        #expect(w.tables.events.last?.type == .passkeyCloneSuspected)

        // Bob's passkey cannot answer ana's challenge (it is not among those the challenge binds).
        let bobs = w.passkey(bob)
        expectRefusal(.credentialUnknown) { try w.approveWithPasskey(ana, bobs, action: StepUpWorld.transfer) }

        // A held passkey approves nothing until its hold ends.
        let carol = w.person("carol")
        let held = w.passkey(carol, approvesFrom: w.clock.now().addingTimeInterval(3600))
        expectRefusal(.recoveryPending) { try w.approveWithPasskey(carol, held, action: StepUpWorld.transfer) }
        w.clock.advance(3601)
        _ = try w.approveWithPasskey(carol, held, action: StepUpWorld.transfer)

        // Revoked after the challenge: no such passkey.
        let c = StepUpRenderer.challenge(try w.stepUp.createChallenge(userId: ana.id, body: .object([("method", "passkey"), ("action", StepUpWorld.transfer)])))
        w.tables.revokePasskey(id: authenticator.credentialId)
        let bytes = try #require(c["publicKey"]?["challenge"]?.stringValue.flatMap(Base64URL.decode))
        let credential = authenticator.assertion(challenge: bytes, rpId: "localhost", origin: StepUpWorld.origin).json()
        expectRefusal(.credentialUnknown) {
            try w.stepUp.verify(userId: ana.id, sessionId: ana.sessionId, body: .object([("challengeId", c["challengeId"]!), ("credential", credential)]))
        }
    }

    @Test("a passkey step-up's token is redeemed once, and dies with the passkey that made it")
    func passkeyTokenDiesWithItsPasskey() throws {
        let w = try StepUpWorld()
        let ana = w.person("ana")
        let authenticator = w.passkey(ana)
        let first = try w.approveWithPasskey(ana, authenticator, action: StepUpWorld.transfer)
        _ = try w.consume(first["access_token"], action: StepUpWorld.transfer)
        expectRefusal(.conflict) { try w.consume(first["access_token"], action: StepUpWorld.transfer) }
        let second = try w.approveWithPasskey(ana, authenticator, action: StepUpWorld.transfer)
        w.tables.revokePasskey(id: authenticator.credentialId)
        expectRefusal(.unauthorized) { try w.consume(second["access_token"], action: StepUpWorld.transfer) }
    }

    @Test("a device-key token does not approve what needs a user-verified passkey, unless the rule allows device keys")
    func deviceKeyTokenWhereAPasskeyIsNeeded() throws {
        let w = try StepUpWorld()
        let ana = w.person("ana")
        let phone = StepUpWorld.Phone()
        let keyId = try w.enrolled(ana, phone, passkey: w.passkey(ana))
        let token = try #require(try w.approve(ana, phone, keyId: keyId)["access_token"]?.stringValue)
        let action = try StepUpAction(StepUpWorld.transfer)
        expectRefusal(.stepUpRequired) { try w.stepUp.checkedStepUp(token, userId: ana.id, action: action, changes: "transfers") }
        _ = try w.stepUp.checkedStepUp(token, userId: ana.id, action: action, changes: "transfers", deviceKeyAllowed: true)
        expectRefusal(.stepUpRequired) {
            try w.stepUp.checkedStepUp(token, userId: ana.id, action: action, changes: "transfers", deviceKeyAllowed: true, session: "session-other")
        }
    }
}
