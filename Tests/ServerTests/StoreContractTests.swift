import Crypto
import DeviceKeys
import Foundation
import JSON
@testable import LatchkeyServer
import Storage
import Testing
import WebAuthnTesting

/// The in-memory stores the service tests use are held to the PostgreSQL ones: one script of store
/// calls — challenges used once and by their own user and ceremony, an approval's compare-and-sets,
/// an enrolment through its gate, a token redeemed once while its key is live, revocations — run
/// against `PostgresStepUpStore`/`PostgresDeviceKeyStore` on the real server and against
/// `InMemoryStepUpStore`/`InMemoryDeviceKeyStore`, and both transcripts must be the expected one.
@Suite("Step-up and device-key stores: in memory as in PostgreSQL")
struct StoreContractTests {
    /// What each call of the script answered (ids left out: they differ between runs).
    static let expected = [
        "challenge: other user nil", "challenge: other ceremony nil", "challenge: step-up expired=false", "challenge: again nil",
        "challenge: enrolment expired=false", "challenge: zero ttl expired=true",
        "receipt by passkey: true", "receipt by passkey, same counter: conflict(signCountRegression)", "receipt by unknown passkey: notFound",
        "enrol: wrong action nil", "enrol: other user nil", "enrol: replaced=nil", "enrol: gate again nil", "enrol again: replaced=old",
        "list: 1 new", "old key revoked: true",
        "receipt by device key: true", "receipt by device key, same counter: false", "receipt by revoked key: false", "counter: 3",
        "redeem: other action alreadyUsed", "redeem: consumed", "redeem: again alreadyUsed", "redeem: unknown jti unknown",
        "redeem: other user unknown", "revoke: other user false", "revoke: true", "revoke: again false",
        "redeem: revoked key unknown", "receipt: stored, consumed=true",
    ]

    @Test("the in-memory stores answer the script as PostgreSQL does")
    func sameTranscript() throws {
        let server = try StepUpTests.fixture.get()
        let client = server.client()
        let authenticator = SoftAuthenticator()
        let session = try client.signUp(authenticator, username: server.username("stores"))
        let other = try client.signUp(SoftAuthenticator(), username: server.username("stores-other"))
        let db = server.database
        let credential = try #require(try db.accounts.credentials(userId: session.userId).first)
        let user = try #require(try db.accounts.credentialForLogin(id: credential.id)?.1)

        let postgres = try Self.script(PostgresStepUpStore(deviceKeys: db.deviceKeys, challenges: db.challenges),
                                       PostgresDeviceKeyStore(deviceKeys: db.deviceKeys, challenges: db.challenges),
                                       userId: session.userId, otherUserId: other.userId, passkey: credential)
        #expect(postgres == Self.expected)

        let clock = ManualClock(start: Date(timeIntervalSince1970: 1_900_000_000))
        let tables = InMemoryDeviceTables(now: clock.now)
        tables.addPasskey(credential, user: user)
        let memory = try Self.script(InMemoryStepUpStore(tables: tables), InMemoryDeviceKeyStore(tables: tables),
                                     userId: session.userId, otherUserId: other.userId, passkey: credential)
        #expect(memory == postgres)
    }

    static func script(_ stepUp: some StepUpStore, _ keys: some DeviceKeyStore, userId: String, otherUserId: String,
                       passkey: CredentialRecord) throws -> [String] {
        var out: [String] = []
        func unique() -> String { uniqueSuffix() + uniqueSuffix() }
        func hash() -> [UInt8] { Digest32.random() }
        func outcome<T>(_ body: () throws -> T) -> String {
            do { return "\(try body())" }
            catch StorageError.conflict(.signCountRegression) { return "conflict(signCountRegression)" }
            catch StorageError.notFound { return "notFound" }
            catch { return "\(error)" }
        }
        let state: [UInt8] = [1, 2, 3]

        // Challenges: used once, by their own user and ceremony; expiry on the store's clock.
        let h = hash()
        try stepUp.insertChallenge(hash: h, userId: userId, rpId: "localhost", state: state, ttlSeconds: 60)
        out.append("challenge: other user \(try stepUp.consumeChallenge(hash: h, userId: otherUserId).map { _ in "found" } ?? "nil")")
        out.append("challenge: other ceremony \(try keys.consumeChallenge(hash: h, userId: userId).map { _ in "found" } ?? "nil")")
        let got = try #require(try stepUp.consumeChallenge(hash: h, userId: userId))
        #expect(got.kind == .stepUp && got.state == state && got.userId == userId && got.rpId == "localhost")
        out.append("challenge: step-up expired=\(got.expired)")
        out.append("challenge: again \(try stepUp.consumeChallenge(hash: h, userId: userId).map { _ in "found" } ?? "nil")")
        let e = hash()
        try keys.insertChallenge(hash: e, userId: userId, rpId: "localhost", state: state, ttlSeconds: 60)
        out.append("challenge: enrolment expired=\(try #require(try keys.consumeChallenge(hash: e, userId: userId)).expired)")
        let z = hash()
        try stepUp.insertChallenge(hash: z, userId: userId, rpId: "localhost", state: state, ttlSeconds: 0)
        out.append("challenge: zero ttl expired=\(try #require(try stepUp.consumeChallenge(hash: z, userId: userId)).expired)")

        // An approval by the passkey: its counter compared and stored with the receipt.
        let action = try StepUpAction.deviceKeyEnrolment(deviceId: "device-\(unique())")
        let credentialId = Base64URL.encode(passkey.id)
        func receipt(_ jti: String, method: StepUpMethod, keyId: String, actionHash: [UInt8]) -> StepUpReceiptRecord {
            StepUpReceiptRecord(id: unique(), userId: userId, method: method, keyId: keyId, publicKey: [1], challenge: [2], signedData: [3],
                                signature: [4], action: String(decoding: action.canonical, as: UTF8.self), actionHash: actionHash,
                                keyBinding: "binding", tokenJTI: jti, tokenExpiresAt: Date(timeIntervalSince1970: 1_900_000_060),
                                createdAt: Date(timeIntervalSince1970: 1_900_000_000))
        }
        func use(_ count: Int64, id: [UInt8] = passkey.id) -> CredentialUse {
            CredentialUse(credentialId: id, userId: userId, signCount: count, backedUp: false, cloneWarning: false, onRegression: .reject)
        }
        let gateJTI = unique()
        let next = passkey.signCount + 10
        out.append("receipt by passkey: " + outcome {
            try stepUp.insertReceipt(receipt(gateJTI, method: .passkey, keyId: credentialId, actionHash: action.hash), liveDeviceKeyId: nil,
                                     appAttestCounter: nil, credentialUse: use(next), audit: [], events: [])
        })
        out.append("receipt by passkey, same counter: " + outcome {
            try stepUp.insertReceipt(receipt(unique(), method: .passkey, keyId: credentialId, actionHash: action.hash), liveDeviceKeyId: nil,
                                     appAttestCounter: nil, credentialUse: use(next), audit: [], events: [])
        })
        out.append("receipt by unknown passkey: " + outcome {
            try stepUp.insertReceipt(receipt(unique(), method: .passkey, keyId: "AAAA", actionHash: action.hash), liveDeviceKeyId: nil,
                                     appAttestCounter: nil, credentialUse: use(1, id: [0, 0, 0]), audit: [], events: [])
        })

        // Enrolment through that approval: for its own action and user, once; re-enrolment replaces.
        let deviceId = try #require(action.value["deviceId"]?.stringValue)
        func key(_ id: String, user: String = userId) -> NewDeviceKey {
            NewDeviceKey(id: id, userId: user, deviceId: deviceId, platform: .android, name: "Phone", publicKey: [0x30, 1], attested: false,
                         attestation: nil, appAttestCounter: 1)
        }
        let template = AuditTemplate(actor: nil, action: "device_key.enrolled")
        func enrol(_ key: NewDeviceKey, _ gate: EnrolmentGate) throws -> String {
            try keys.enrol(key, gate: gate, audit: template, enrolled: [], replacedEvent: nil).map { _ in "stored" } ?? "nil"
        }
        let wrongAction = EnrolmentGate.stepUp(jti: gateJTI, actionHash: [UInt8](repeating: 9, count: 32))
        out.append("enrol: wrong action \(try enrol(key(unique()), wrongAction))")
        let gate = EnrolmentGate.stepUp(jti: gateJTI, actionHash: action.hash)
        out.append("enrol: other user \(try enrol(key(unique(), user: otherUserId), gate))")
        let oldId = unique()
        let first = try #require(try keys.enrol(key(oldId), gate: gate, audit: template, enrolled: [], replacedEvent: nil))
        out.append("enrol: replaced=\(first.replaced ?? "nil")")
        out.append("enrol: gate again \(try enrol(key(unique()), gate))")
        // A second gate (another passkey approval) for the same device: the new key replaces the old.
        let secondJTI = unique()
        _ = try stepUp.insertReceipt(receipt(secondJTI, method: .passkey, keyId: credentialId, actionHash: action.hash), liveDeviceKeyId: nil,
                                     appAttestCounter: nil, credentialUse: use(next + 1), audit: [], events: [])
        let newId = unique()
        let second = try #require(try keys.enrol(key(newId), gate: .stepUp(jti: secondJTI, actionHash: action.hash), audit: template,
                                                 enrolled: [], replacedEvent: nil))
        out.append("enrol again: replaced=\(second.replaced == oldId ? "old" : second.replaced ?? "nil")")
        let listed = try keys.list(userId: userId).filter { $0.deviceId == deviceId }
        out.append("list: \(listed.count) \(listed.first?.id == newId ? "new" : "other")")
        out.append("old key revoked: \(try keys.key(id: oldId)?.revokedAt != nil)")

        // Approvals by the new device key: its App Attest counter only rises; a revoked key approves nothing.
        let transfer = try StepUpAction(.object([("type", "transfer"), ("id", .string(unique()))]))
        let tokenJTI = unique()
        let stored = receipt(tokenJTI, method: .deviceKey, keyId: newId, actionHash: transfer.hash)
        out.append("receipt by device key: " + outcome {
            try stepUp.insertReceipt(stored, liveDeviceKeyId: newId, appAttestCounter: 3, credentialUse: nil, audit: [], events: [])
        })
        out.append("receipt by device key, same counter: " + outcome {
            try stepUp.insertReceipt(receipt(unique(), method: .deviceKey, keyId: newId, actionHash: transfer.hash), liveDeviceKeyId: newId,
                                     appAttestCounter: 3, credentialUse: nil, audit: [], events: [])
        })
        out.append("receipt by revoked key: " + outcome {
            try stepUp.insertReceipt(receipt(unique(), method: .deviceKey, keyId: oldId, actionHash: transfer.hash), liveDeviceKeyId: oldId,
                                     appAttestCounter: nil, credentialUse: nil, audit: [], events: [])
        })
        out.append("counter: \(try keys.key(id: newId)?.appAttestCounter.map(String.init) ?? "nil")")

        // The token: redeemed once, for its own action and user.
        out.append("redeem: other action \(try stepUp.redeemStepUpToken(jti: tokenJTI, userId: userId, actionHash: action.hash))")
        let redeemed = try stepUp.redeemStepUpToken(jti: tokenJTI, userId: userId, actionHash: transfer.hash)
        out.append("redeem: \(redeemed == .consumed(receiptId: stored.id, action: stored.action) ? "consumed" : "\(redeemed)")")
        out.append("redeem: again \(try stepUp.redeemStepUpToken(jti: tokenJTI, userId: userId, actionHash: transfer.hash))")
        out.append("redeem: unknown jti \(try stepUp.redeemStepUpToken(jti: unique(), userId: userId, actionHash: transfer.hash))")
        out.append("redeem: other user \(try stepUp.redeemStepUpToken(jti: tokenJTI, userId: otherUserId, actionHash: transfer.hash))")

        // Revocation: the user's own live key only; an unused approval by it is then as good as unknown.
        let openJTI = unique()
        _ = try stepUp.insertReceipt(receipt(openJTI, method: .deviceKey, keyId: newId, actionHash: transfer.hash), liveDeviceKeyId: newId,
                                     appAttestCounter: nil, credentialUse: nil, audit: [], events: [])
        let line = AuditRecord(actor: userId, action: "device_key.revoked", subject: userId)
        out.append("revoke: other user \(try keys.revoke(userId: otherUserId, id: newId, audit: line, redeeming: nil, revokedEvent: nil))")
        out.append("revoke: \(try keys.revoke(userId: userId, id: newId, audit: line, redeeming: nil, revokedEvent: nil))")
        out.append("revoke: again \(try keys.revoke(userId: userId, id: newId, audit: line, redeeming: nil, revokedEvent: nil))")
        out.append("redeem: revoked key \(try stepUp.redeemStepUpToken(jti: openJTI, userId: userId, actionHash: transfer.hash))")
        let read = try #require(try stepUp.receipt(id: stored.id))
        #expect(read.signedData == stored.signedData && read.action == stored.action && read.tokenJTI == tokenJTI)
        out.append("receipt: stored, consumed=\(read.consumedAt != nil)")
        return out
    }
}

/// 32 random bytes (a challenge's hash).
enum Digest32 {
    static func random() -> [UInt8] { (0..<32).map { _ in UInt8.random(in: 0...255) } }
}
