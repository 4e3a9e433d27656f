import Foundation
import JSON
import PostgreSQL
import Storage
import Testing

@Suite struct DeviceKeyRepositoryTests {
    @Test func reEnrolmentReplacesTheLiveKeyOfTheDevice() throws {
        let s = try TestDatabase.scratch()
        let (user, _) = try s.registered()
        let first = Fixture.deviceKey(userId: user.id)
        // The statement adds `replaced` (the key it revoked, or null) to the line.
        let audit = Fixture.template("device_key.enrolled")
        let (stored, replaced) = try s.enrol(first, audit: audit)
        #expect(stored.id == first.id && stored.revokedAt == nil && replaced == nil)
        let second = NewDeviceKey(id: Fixture.id(), userId: user.id, deviceId: first.deviceId, platform: .ios, name: "iPhone",
                                  publicKey: Fixture.bytes(91), attested: true, attestation: ["format": "apple-appattest"])
        #expect(try s.enrol(second, audit: audit).replaced == first.id)
        #expect(try s.database.deviceKeys.list(userId: user.id).map(\.id) == [second.id])
        #expect(try s.database.deviceKeys.key(id: first.id)?.revokedAt != nil)
        let details = try s.database.audit.entries(limit: 10, before: nil).filter { $0.action == "device_key.enrolled" }.map { $0.detail["replaced"] }
        #expect(details == [.string(first.id), .null])
    }

    /// Issue 10: the gate is used up in the enrolment's own transaction; a wrong or used gate writes nothing.
    @Test func enrolmentUsesUpItsGateOrWritesNothing() throws {
        let s = try TestDatabase.scratch()
        let (alice, _) = try s.registered()
        let (bob, _) = try s.registered()
        let aliceTicket = try s.deviceKeyGate(userId: alice.id)
        let bobsKey = Fixture.deviceKey(userId: bob.id)
        #expect(try s.database.deviceKeys.enrol(bobsKey, gate: aliceTicket, audit: Fixture.template("device_key.enrolled")) == nil,
                "another user's ticket")
        let aliceKey = Fixture.deviceKey(userId: alice.id)
        #expect(try s.database.deviceKeys.enrol(aliceKey, gate: aliceTicket, audit: Fixture.template("device_key.enrolled")) != nil)
        let replacement = Fixture.deviceKey(userId: alice.id)
        #expect(try s.database.deviceKeys.enrol(replacement, gate: aliceTicket, audit: Fixture.template("device_key.enrolled")) == nil,
                "a used ticket")
        #expect(try s.database.deviceKeys.list(userId: alice.id).map(\.id) == [aliceKey.id], "the refused replacement revoked nothing")
        #expect(try s.database.deviceKeys.list(userId: bob.id).isEmpty)
        // A step-up gate: the receipt's token for exactly that action, once.
        let receipt = Fixture.receipt(userId: alice.id, keyId: aliceKey.id)
        #expect(try s.database.deviceKeys.insertReceipt(receipt, liveDeviceKeyId: aliceKey.id, credentialUse: nil, audit: []))
        let wrongAction = EnrolmentGate.stepUp(jti: receipt.tokenJTI, actionHash: Fixture.bytes(32))
        #expect(try s.database.deviceKeys.enrol(replacement, gate: wrongAction, audit: Fixture.template("device_key.enrolled")) == nil)
        let gate = EnrolmentGate.stepUp(jti: receipt.tokenJTI, actionHash: receipt.actionHash)
        #expect(try s.database.deviceKeys.enrol(replacement, gate: gate, audit: Fixture.template("device_key.enrolled"))?.replaced == aliceKey.id)
        #expect(try s.database.deviceKeys.consumeStepUpToken(jti: receipt.tokenJTI, userId: alice.id, actionHash: receipt.actionHash)
                == .alreadyUsed)
    }

    @Test func insertReceiptRefusesARevokedDeviceKey() throws {
        let s = try TestDatabase.scratch()
        let (user, _) = try s.registered()
        let key = Fixture.deviceKey(userId: user.id)
        _ = try s.enrol(key, audit: Fixture.template("device_key.enrolled"))
        #expect(try s.database.deviceKeys.revoke(userId: user.id, id: key.id, audit: Fixture.audit("device_key.revoked")))
        #expect(try !s.database.deviceKeys.revoke(userId: user.id, id: key.id, audit: Fixture.audit("device_key.revoked")))
        let receipt = Fixture.receipt(userId: user.id, keyId: key.id)
        #expect(try !s.database.deviceKeys.insertReceipt(receipt, liveDeviceKeyId: key.id, credentialUse: nil,
                                                         audit: [Fixture.audit("step_up.approved")]))
        #expect(try s.database.deviceKeys.receipt(id: receipt.id) == nil)
        #expect(try s.auditActions() == ["passkey.registered", "device_key_ticket.issued", "device_key.enrolled", "device_key.revoked"])
    }

    @Test func aLiveKeysReceiptIsStoredAndItsTokenRedeemedOnce() throws {
        let s = try TestDatabase.scratch()
        let (user, _) = try s.registered()
        let key = Fixture.deviceKey(userId: user.id)
        _ = try s.enrol(key, audit: Fixture.template("device_key.enrolled"))
        let receipt = Fixture.receipt(userId: user.id, keyId: key.id)
        #expect(try s.database.deviceKeys.insertReceipt(receipt, liveDeviceKeyId: key.id, credentialUse: nil,
                                                        audit: [Fixture.audit("step_up.approved")]))
        let stored = try #require(try s.database.deviceKeys.receipt(id: receipt.id))
        #expect(stored.signature == receipt.signature && stored.action == receipt.action && stored.consumedAt == nil)
        #expect(try s.database.deviceKeys.key(id: key.id)?.lastUsedAt != nil)
        #expect(try s.database.deviceKeys.consumeStepUpToken(jti: receipt.tokenJTI, userId: user.id, actionHash: [0])
                == .alreadyUsed, "exists, but not for this action: not redeemed")
        #expect(try s.database.deviceKeys.consumeStepUpToken(jti: receipt.tokenJTI, userId: user.id, actionHash: receipt.actionHash)
                == .consumed(receiptId: receipt.id, action: receipt.action))
        #expect(try s.database.deviceKeys.consumeStepUpToken(jti: receipt.tokenJTI, userId: user.id, actionHash: receipt.actionHash)
                == .alreadyUsed)
        #expect(try s.database.deviceKeys.consumeStepUpToken(jti: "unknown", userId: user.id, actionHash: receipt.actionHash) == .unknown)
    }

    @Test func aPasskeyReceiptRecordsTheCredentialUseInTheSameTransaction() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered(signCount: 5)
        let use = CredentialUse(credentialId: credential.id, userId: user.id, signCount: 6, backedUp: false, cloneWarning: false)
        let receipt = Fixture.receipt(userId: user.id, keyId: "cred", method: .passkey)
        #expect(try s.database.deviceKeys.insertReceipt(receipt, liveDeviceKeyId: nil, credentialUse: use,
                                                        audit: [Fixture.audit("step_up.approved")]))
        #expect(try s.database.accounts.credentialForLogin(id: credential.id)?.0.signCount == 6)

        // An unknown credential: nothing at all is written.
        let ghost = CredentialUse(credentialId: Fixture.bytes(16), userId: user.id, signCount: 1, backedUp: false, cloneWarning: false)
        let other = Fixture.receipt(userId: user.id, keyId: "ghost", method: .passkey)
        #expect(throws: StorageError.notFound) {
            try s.database.deviceKeys.insertReceipt(other, liveDeviceKeyId: nil, credentialUse: ghost, audit: [Fixture.audit("step_up.approved")])
        }
        #expect(try s.database.deviceKeys.receipt(id: other.id) == nil)
        #expect(try s.auditActions() == ["passkey.registered", "step_up.approved"])
    }
}
