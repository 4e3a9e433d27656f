import Crypto
import DeviceKeys
import DeviceKeysTesting
import Foundation
import JSON
@testable import LatchkeyServer
import Storage
import Testing
import Tokens
import WebAuthnTesting

/// SPEC "Device keys", "Trust chain": `DeviceKeyService`'s decisions over the in-memory stores
/// (`StepUpWorld`), on a manual clock: no socket, no PostgreSQL. StepUpTests and
/// AttestedDeviceKeyTests keep the same behaviour over HTTP and PostgreSQL.
@Suite("Device-key service, in memory")
struct DeviceKeyServiceTests {
    @Test("enrolment with proof of possession behind a passkey step-up: the key, its audit line and event; the gate is used once")
    func enrolWithProof() throws {
        let w = try StepUpWorld()
        let ana = w.person("ana")
        let passkey = w.passkey(ana)
        let phone = StepUpWorld.Phone()
        let gate = try w.enrolmentGate(ana, passkey, deviceId: phone.deviceId)
        let answer = DeviceKeyRenderer.deviceKey(try w.deviceKeys.enrol(userId: ana.id, body: try w.enrolmentBody(ana, phone), gate: gate))
        let keyId = try #require(answer["id"]?.stringValue)
        #expect(answer["deviceId"]?.stringValue == phone.deviceId && answer["platform"] == "android" && answer["attested"] == false)
        #expect(answer["attestation"]?["format"] == "none")
        let stored = try #require(try w.store.deviceKey(id: keyId))
        #expect(stored.publicKey == phone.publicKey && stored.userId == ana.id && stored.revokedAt == nil)
        let line = try #require(w.tables.audit.last)
        #expect(line.action == AuditAction.deviceKeyEnrolled.rawValue && line.subject == ana.id)
        #expect(line.detail["gate"] == "step-up" && line.detail["replaced"] == .null)
        #expect(w.tables.events.last?.type == .deviceKeyEnrolled && w.tables.events.last?.data["keyId"]?.stringValue == keyId)

        // The same step-up again: already used.
        expectRefusal(.stepUpRequired) { try w.deviceKeys.enrol(userId: ana.id, body: try w.enrolmentBody(ana, phone), gate: gate) }
        #expect(DeviceKeyRenderer.list(try w.deviceKeys.listDeviceKeys(userId: ana.id))["deviceKeys"]?.arrayValue?.count == 1)
    }

    @Test("a proof by another key, a used, expired or another user's challenge: refused, and the gate stays unused")
    func proofRefusals() throws {
        let w = try StepUpWorld()
        let ana = w.person("ana"), bob = w.person("bob")
        let passkey = w.passkey(ana)
        let phone = StepUpWorld.Phone(), thief = StepUpWorld.Phone()
        let gate = try w.enrolmentGate(ana, passkey, deviceId: phone.deviceId)

        let wrong = try w.enrolmentBody(ana, phone, signedBy: thief)
        expectRefusal(.signatureInvalid) { try w.deviceKeys.enrol(userId: ana.id, body: wrong, gate: gate) }
        // That challenge is used up, even with a good signature now.
        expectRefusal(.challengeInvalid) { try w.deviceKeys.enrol(userId: ana.id, body: wrong, gate: gate) }
        // Bob cannot use (or burn) ana's challenge.
        let anas = try w.enrolmentBody(ana, phone)
        expectRefusal(.challengeInvalid) { try w.deviceKeys.enrol(userId: bob.id, body: anas, gate: gate) }
        // A step-up challenge id is not an enrolment one.
        let keyless = StepUpRenderer.challenge(try w.stepUp.createChallenge(userId: ana.id, body: .object([("method", "passkey"), ("action", StepUpWorld.transfer)])))
        expectRefusal(.challengeInvalid) {
            try w.deviceKeys.enrol(userId: ana.id, body: anas.setting("challengeId", keyless["challengeId"]), gate: gate)
        }
        // Nothing was stored, and the gate is still unused: it lets the good enrolment through.
        #expect(DeviceKeyRenderer.list(try w.deviceKeys.listDeviceKeys(userId: ana.id))["deviceKeys"]?.arrayValue == [])
        _ = try w.deviceKeys.enrol(userId: ana.id, body: anas, gate: gate)

        // Expired: the enrolment challenge lives LATCHKEY_CHALLENGE_TTL (300 s) on the store's clock.
        let later = StepUpWorld.Phone()
        let late = try w.enrolmentBody(ana, later)
        w.clock.advance(300)
        let lateGate = try w.enrolmentGate(ana, passkey, deviceId: later.deviceId)
        expectRefusal(.challengeInvalid) { try w.deviceKeys.enrol(userId: ana.id, body: late, gate: lateGate) }
        _ = try w.deviceKeys.enrol(userId: ana.id, body: try w.enrolmentBody(ana, later), gate: lateGate)
    }

    @Test("the enrolment gate is the user's, for exactly that device, while the approving passkey is live")
    func gateRules() throws {
        let w = try StepUpWorld()
        let ana = w.person("ana"), bob = w.person("bob")
        let passkey = w.passkey(ana)
        w.passkey(bob)
        let phone = StepUpWorld.Phone(), other = StepUpWorld.Phone()
        // A step-up for another device's enrolment.
        let forOther = try w.enrolmentGate(ana, passkey, deviceId: other.deviceId)
        guard case .stepUp(let jti, _) = forOther else { Issue.record("not a step-up gate"); return }
        let mismatched = EnrolmentGate.stepUp(jti: jti, actionHash: try StepUpAction.deviceKeyEnrolment(deviceId: phone.deviceId).hash)
        expectRefusal(.stepUpRequired) { try w.deviceKeys.enrol(userId: ana.id, body: try w.enrolmentBody(ana, phone), gate: mismatched) }
        // Ana's gate is not bob's.
        expectRefusal(.stepUpRequired) { try w.deviceKeys.enrol(userId: bob.id, body: try w.enrolmentBody(bob, other), gate: forOther) }
        // A passkey revoked after it approved: its approval dies with it.
        w.tables.revokePasskey(id: passkey.credentialId)
        expectRefusal(.stepUpRequired) { try w.deviceKeys.enrol(userId: ana.id, body: try w.enrolmentBody(ana, other), gate: forOther) }
        #expect(DeviceKeyRenderer.list(try w.deviceKeys.listDeviceKeys(userId: ana.id))["deviceKeys"]?.arrayValue == [])
    }

    @Test("a device-key ticket lets one enrolment through: the user's, unused, unexpired")
    func ticketGate() throws {
        let w = try StepUpWorld()
        let ana = w.person("ana"), bob = w.person("bob")
        let phone = StepUpWorld.Phone()
        let hash = Digest.sha256(Array("ticket".utf8))
        w.tables.addTicket(hash: hash, userId: ana.id, ttlSeconds: 600)
        expectRefusal(.stepUpRequired) { try w.deviceKeys.enrol(userId: bob.id, body: try w.enrolmentBody(bob, phone), gate: .ticket(hash: hash)) }
        let answer = DeviceKeyRenderer.deviceKey(try w.deviceKeys.enrol(userId: ana.id, body: try w.enrolmentBody(ana, phone), gate: .ticket(hash: hash)))
        #expect(answer["deviceId"]?.stringValue == phone.deviceId)
        #expect(w.tables.audit.last?.detail["gate"] == "ticket")
        expectRefusal(.stepUpRequired) { try w.deviceKeys.enrol(userId: ana.id, body: try w.enrolmentBody(ana, phone), gate: .ticket(hash: hash)) }

        let expiring = Digest.sha256(Array("expiring".utf8))
        w.tables.addTicket(hash: expiring, userId: ana.id, ttlSeconds: 10)
        let body = try w.enrolmentBody(ana, StepUpWorld.Phone())
        w.clock.advance(10)
        expectRefusal(.stepUpRequired) { try w.deviceKeys.enrol(userId: ana.id, body: body, gate: .ticket(hash: expiring)) }
        // A passkey ticket is not a device-key ticket.
        let passkeyTicket = Digest.sha256(Array("passkey".utf8))
        w.tables.addTicket(hash: passkeyTicket, userId: ana.id, purpose: "passkey", ttlSeconds: 600)
        expectRefusal(.stepUpRequired) {
            try w.deviceKeys.enrol(userId: ana.id, body: try w.enrolmentBody(ana, StepUpWorld.Phone()), gate: .ticket(hash: passkeyTicket))
        }
    }

    @Test("re-enrolling a device replaces its key: the old one revoked, pointing at the new, with its event")
    func reEnrolmentReplaces() throws {
        let w = try StepUpWorld()
        let ana = w.person("ana")
        let passkey = w.passkey(ana)
        let old = StepUpWorld.Phone()
        let oldId = try w.enrolled(ana, old, passkey: passkey)
        let pending = try w.challenge(ana, keyId: oldId)
        var new = StepUpWorld.Phone()
        new.deviceId = old.deviceId
        let newId = try w.enrolled(ana, new, passkey: passkey)
        let list = try #require(DeviceKeyRenderer.list(try w.deviceKeys.listDeviceKeys(userId: ana.id))["deviceKeys"]?.arrayValue)
        #expect(list.map { $0["id"]?.stringValue } == [newId])
        #expect(try w.store.deviceKey(id: oldId)?.revokedAt != nil)
        #expect(w.tables.audit.last?.detail["replaced"]?.stringValue == oldId)
        let revoked = try #require(w.tables.events.last)
        #expect(revoked.type == .deviceKeyRevoked && revoked.data["keyId"]?.stringValue == oldId && revoked.data["userId"]?.stringValue == ana.id)
        expectRefusal(.keyRevoked) { try w.verify(ana, pending, signature: try old.sign(pending["challenge"])) }
        _ = try w.approve(ana, new, keyId: newId)
    }

    @Test("list and revoke: the user's own live keys; a revocation waits for the feed and ends the key's open approvals")
    func listAndRevoke() throws {
        let w = try StepUpWorld()
        let ana = w.person("ana"), bob = w.person("bob")
        let passkey = w.passkey(ana)
        let first = StepUpWorld.Phone(), second = StepUpWorld.Phone()
        let firstId = try w.enrolled(ana, first, passkey: passkey)
        w.clock.advance(1)
        let secondId = try w.enrolled(ana, second, passkey: passkey)
        let listed = try #require(DeviceKeyRenderer.list(try w.deviceKeys.listDeviceKeys(userId: ana.id))["deviceKeys"]?.arrayValue)
        #expect(listed.map { $0["id"]?.stringValue } == [firstId, secondId])
        #expect(DeviceKeyRenderer.list(try w.deviceKeys.listDeviceKeys(userId: bob.id))["deviceKeys"]?.arrayValue == [])

        let open = try w.approve(ana, first, keyId: firstId)
        expectRefusal(.notFound) { try w.deviceKeys.revokeDeviceKey(userId: bob.id, id: firstId) }
        let settled = w.revocations.settled
        try w.deviceKeys.revokeDeviceKey(userId: ana.id, id: firstId)
        #expect(w.revocations.settled == settled + 1)
        #expect(w.tables.audit.last?.action == AuditAction.deviceKeyRevoked.rawValue)
        #expect(w.tables.events.last?.type == .deviceKeyRevoked && w.tables.events.last?.data["keyId"]?.stringValue == firstId)
        expectRefusal(.notFound) { try w.deviceKeys.revokeDeviceKey(userId: ana.id, id: firstId) }
        expectRefusal(.notFound) { try w.deviceKeys.revokeDeviceKey(userId: ana.id, id: "") }
        #expect(DeviceKeyRenderer.list(try w.deviceKeys.listDeviceKeys(userId: ana.id))["deviceKeys"]?.arrayValue?.map { $0["id"]?.stringValue } == [secondId])
        // The approval it made before is no longer redeemable.
        expectRefusal(.unauthorized) { try w.consume(open["access_token"], action: StepUpWorld.transfer) }
    }

    @Test("an admin's revocation redeems its approval in the same change: once, and not at all when there is no such key")
    func adminRevocationRedeems() throws {
        let w = try StepUpWorld()
        let ana = w.person("ana"), admin = w.person("admin")
        let adminPasskey = w.passkey(admin)
        let phone = StepUpWorld.Phone()
        let keyId = try w.enrolled(ana, phone, passkey: w.passkey(ana))
        let action = StepUpWorld.transfer
        let approval = try w.approveWithPasskey(admin, adminPasskey, action: action)
        let claims = try w.signer.stepUpClaims(try #require(approval["access_token"]?.stringValue))
        let caller = AdminCaller(actor: admin.id, approval: AdminApproval(
            redemption: StepUpRedemption(jti: claims.jwtId, userId: admin.id, actionHash: claims.actionHash),
            receiptId: claims.receiptId, actionHash: claims.actionHash))

        // No such key: nothing revoked, and the approval is not spent.
        expectRefusal(.notFound) { try w.deviceKeys.revokeDeviceKey(userId: ana.id, id: "missing", by: caller) }
        #expect(try w.store.receipt(id: claims.receiptId)?.consumedAt == nil)
        try w.deviceKeys.revokeDeviceKey(userId: ana.id, id: keyId, by: caller)
        #expect(try w.store.receipt(id: claims.receiptId)?.consumedAt != nil)
        #expect(w.tables.audit.last?.actor == admin.id && w.tables.audit.last?.detail["receiptId"]?.stringValue == claims.receiptId)
        // Used: the next change with it is refused, and nothing is revoked.
        let otherId = try w.enrolled(ana, StepUpWorld.Phone(), passkey: w.passkey(ana))
        expectRefusal(.stepUpRequired) { try w.deviceKeys.revokeDeviceKey(userId: ana.id, id: otherId, by: caller) }
        #expect(try w.store.deviceKey(id: otherId)?.revokedAt == nil)
    }

    @Test("an App Attest key: enrolled as attested, approving with a counter that only rises")
    func appAttest() throws {
        var builder = AppAttestBuilder()
        let w = try StepUpWorld(attestation: try builder.policy())
        let ana = w.person("ana")
        let passkey = w.passkey(ana)
        let deviceId = "iphone"
        let gate = try w.enrolmentGate(ana, passkey, deviceId: deviceId)
        let c = DeviceKeyRenderer.enrolmentChallenge(try w.deviceKeys.enrolmentChallenge(userId: ana.id))
        builder.clientDataHash = Digest.sha256(try #require(c["challenge"]?.stringValue.flatMap(Base64URL.decode)))
        let body: JSONValue = .object([
            ("deviceId", .string(deviceId)), ("platform", "ios"), ("challengeId", c["challengeId"]!),
            ("appAttest", .object([("keyId", .string(Base64URL.encode(builder.keyId))), ("attestationObject", .string(Base64URL.encode(builder.object())))])),
        ])
        let enrolled = DeviceKeyRenderer.deviceKey(try w.deviceKeys.enrol(userId: ana.id, body: body, gate: gate))
        #expect(enrolled["attested"] == true && enrolled["attestation"]?["format"] == "apple-appattest")
        let keyId = try #require(enrolled["id"]?.stringValue)

        func approve(counter: UInt32) throws -> JSONValue {
            let s = try w.challenge(ana, keyId: keyId)
            let bytes = try #require(s["challenge"]?.stringValue.flatMap(Base64URL.decode))
            let assertion = try builder.assertion(counter: counter, clientDataHash: Digest.sha256(bytes))
            return StepUpRenderer.verified(try w.stepUp.verify(userId: ana.id, sessionId: ana.sessionId,
                                                               body: .object([("challengeId", s["challengeId"]!), ("assertion", .string(Base64URL.encode(assertion)))])))
        }
        let first = try approve(counter: 1)
        #expect(try w.signer.stepUpClaims(try #require(first["access_token"]?.stringValue)).acr == AuthenticationClaims.deviceKeyAttested.acr)
        #expect(try w.store.deviceKey(id: keyId)?.appAttestCounter == 1)
        expectRefusal(.signatureInvalid) { try approve(counter: 1) }
        _ = try approve(counter: 5)
        expectRefusal(.signatureInvalid) { try approve(counter: 3) }
        #expect(try w.store.deviceKey(id: keyId)?.appAttestCounter == 5)
    }

    @Test("under LATCHKEY_DEVICE_KEY_ATTESTATION=required a key with no attestation is refused, and nothing is stored")
    func attestationRequired() throws {
        let w = try StepUpWorld { $0.deviceKeyAttestation = .required }
        let ana = w.person("ana")
        let phone = StepUpWorld.Phone()
        let gate = try w.enrolmentGate(ana, w.passkey(ana), deviceId: phone.deviceId)
        expectRefusal(.attestationInvalid) { try w.deviceKeys.enrol(userId: ana.id, body: try w.enrolmentBody(ana, phone), gate: gate) }
        #expect(DeviceKeyRenderer.list(try w.deviceKeys.listDeviceKeys(userId: ana.id))["deviceKeys"]?.arrayValue == [])
    }
}
