import Crypto
import DeviceKeys
import Foundation
import JSON
import Storage

/// The caller's own live device key, for the services that use one (step-up).
protocol LiveDeviceKeys: Sendable {
    /// Another user's key is 404, a revoked one `key_revoked`.
    func liveKey(id: String, userId: String) throws(ServiceError) -> DeviceKeyRecord
}

/// Hardware-bound device keys (SPEC "Device keys", "Trust chain"): the enrolment challenge, the
/// enrolment itself with its proof of possession and, when sent, of hardware (Android Key
/// Attestation, Apple App Attest), the list and revocation. The gate in front of enrolment (a
/// passkey step-up or a device-key ticket) is the route table's (`StepUpRule.deviceKeyEnrolment`).
public final class DeviceKeyService: LiveDeviceKeys, Sendable {
    let store: any DeviceKeyStore
    let trust: any AttestationPolicySource
    let events: OutboxEvents
    /// The relying party the ceremonies are bound to (its rpId is taken from here alone).
    let relyingParty: RelyingParty
    let policy: DeviceKeyPolicy
    let runtime: Runtime
    let enrolment: DeviceKeyEnrolmentCeremony
    /// A revoked key's approvals (the OAuth grants migration 20's trigger ends with it) are refused
    /// here before the revocation is answered.
    let revoked: any SessionRevocations

    init(store: any DeviceKeyStore, trust: any AttestationPolicySource, events: OutboxEvents,
         relyingParty: RelyingParty, policy: DeviceKeyPolicy, runtime: Runtime, revoked: any SessionRevocations) {
        self.relyingParty = relyingParty
        self.revoked = revoked
        self.store = store
        self.trust = trust
        self.events = events
        self.policy = policy
        self.runtime = runtime
        enrolment = DeviceKeyEnrolmentCeremony(ttlSeconds: policy.challengeTTL, environment: runtime.deviceKeys)
    }

    /// `POST /v1/device-keys/challenges`: the bytes the new key signs as proof of possession (and
    /// an Android app passes to `setAttestationChallenge`).
    func enrolmentChallenge(userId: String) throws(ServiceError) -> EnrolmentOptions {
        let (options, state) = enrolment.begin(userId: userId)
        try storage { () throws(StorageError) in
            try store.insertChallenge(hash: options.challengeId, userId: userId, rpId: relyingParty.id,
                                      state: state.encoded(), ttlSeconds: policy.challengeTTL)
        }
        return options
    }

    /// `POST /v1/device-keys`, its gate checked by the route (SPEC "Trust chain": a user-verified
    /// passkey step-up for exactly this deviceId, or a device-key ticket): one read (the challenge),
    /// the proof checked, and one write — the challenge used up with the gate and the key, or,
    /// refused, the challenge used up alone (a failure after it is found still uses it). Returns the key as stored.
    /// `sessionId`: the session enrolling it, remembered as the key's device-key session (SPEC
    /// "CIBA approval").
    func enrol(userId: String, body: JSONValue, gate: EnrolmentGate, sessionId: String? = nil) throws(ServiceError) -> DeviceKeyRecord {
        let input = try EnrolmentInput(body)
        let found = try storage { () throws(StorageError) in try store.challenge(hash: input.challengeId, userId: userId) }
        guard let found else { throw ServiceError(.challengeInvalid, "unknown or already used challenge") }
        var key: NewDeviceKey
        do {
            key = try decide(input, found, userId: userId)
            key.enrolledSession = sessionId
        } catch {
            try storage { () throws(StorageError) in _ = try store.consumeChallenge(hash: input.challengeId, userId: userId) }
            throw error
        }
        let written = try storage { () throws(StorageError) in
            // The statement adds `replaced` (the key it revoked, or null) to the line, and writes
            // `device_key.revoked` for that key.
            try store.enrol(key, usingChallenge: input.challengeId, gate: gate, audit: AuditTemplate(.deviceKeyEnrolled, actor: userId, detail: [
                                ("keyId", .string(key.id)), ("deviceId", .string(key.deviceId)), ("platform", .string(key.platform.rawValue)),
                                ("attested", .bool(key.attested)), ("gate", .string(gate.auditName)),
                            ]),
                            enrolled: [events.deviceKeyEnrolled(key)], replacedEvent: events.template(.deviceKeyRevoked))
        }
        switch written {
        case .challengeUsed: throw ServiceError(.challengeInvalid, "unknown or already used challenge")
        case .gateRefused: throw StepUpService.stepUpRequired("the step-up or ticket was already used, expired, or is another user's")
        case .enrolled(let record, _): return record
        }
    }

    /// The key to store, decided from the challenge the read found: live and this ceremony's, and
    /// the proof of possession (and of hardware, when sent) checked.
    func decide(_ input: EnrolmentInput, _ found: StoredChallenge, userId: String) throws(ServiceError) -> NewDeviceKey {
        let stored = try CeremonyRules.live(found, kind: .deviceKeyEnrolment, rpId: relyingParty.id)
        let state: DeviceKeyEnrolmentState
        do { state = try DeviceKeyEnrolmentState(decoding: stored.state) } catch { throw ServiceError(error) }
        let proven = try verifyEnrolment(input, state: state)
        return NewDeviceKey(id: runtime.identifier(), userId: userId, deviceId: input.deviceId, platform: input.platform,
                               name: input.name, publicKey: proven.key.spkiDER, attested: proven.attested != nil,
                               attestation: proven.attested?.decoded,
                               attestationFormat: Self.stored(proven.attested?.format ?? .none),
                               securityLevel: Self.stored(proven.attested?.securityLevel ?? .unknown), app: proven.attested?.app,
                               appAttestKeyId: proven.attested?.appAttestKeyId,
                               appAttestCounter: proven.attested?.counter.map { Int64($0) })
    }

    /// Proof of possession, and of hardware when the body carries an attestation (SPEC "Trust chain":
    /// Attested keys, Policy). A bad attestation is refused whatever the policy; under `required`
    /// so is none.
    func verifyEnrolment(_ input: EnrolmentInput, state: DeviceKeyEnrolmentState) throws(ServiceError)
        -> (key: DevicePublicKey, attested: AttestedDeviceKey?) {
        var attested: AttestedDeviceKey? = nil
        let key: DevicePublicKey
        if let appAttest = input.appAttest {
            // Apple App Attest: the credential certificate's nonce binds SHA-256(challenge bytes).
            let policy = try trust.policy()
            do {
                attested = try AppAttestVerifier.verifyAttestation(keyId: appAttest.keyId, attestationObject: appAttest.attestationObject,
                                                                   clientDataHash: Digest.sha256(state.challenge), policy: policy)
            } catch { throw ServiceError(error) }
            key = attested!.publicKey
            if let sent = input.key, sent.spkiDER != key.spkiDER {
                throw ServiceError(.attestationInvalid, "publicKey is not the key the App Attest object attests")
            }
        } else {
            guard let sent = input.key else { throw ServiceError.invalid("publicKey is required") }
            key = sent
        }
        if let signature = input.signature {
            do { try enrolment.finish(signature: signature, key: key, state: state) } catch { throw ServiceError(error) }
        } else if input.appAttest == nil {
            throw ServiceError.invalid("signature is required")
        }
        if !input.chain.isEmpty {
            // Android Key Attestation: challenge, key, purpose, curve, security level, app, root, revocation.
            let policy = try trust.policy()
            do {
                attested = try AndroidKeyAttestationVerifier.verify(chain: input.chain, publicKey: key, challenge: state.challenge,
                                                                    policy: policy)
            } catch { throw ServiceError(error) }
        }
        if attested == nil, policy.attestation == .required {
            throw ServiceError(.attestationInvalid, "this deployment enrols only attested device keys (LATCHKEY_DEVICE_KEY_ATTESTATION=required)")
        }
        return (key, attested)
    }

    /// `GET /v1/device-keys`: the user's device keys.
    func listDeviceKeys(userId: String) throws(ServiceError) -> [DeviceKeyRecord] {
        try storage { () throws(StorageError) in try store.list(userId: userId) }
    }

    /// The user's own revocation, or an admin's (`by`: audited as that admin, approval redeemed with it).
    func revokeDeviceKey(userId: String, id: String, by admin: AdminCaller? = nil) throws(ServiceError) {
        let detail: [(key: String, value: JSONValue)] = [("keyId", .string(id))]
        let audit = admin?.record(.deviceKeyRevoked, subject: userId, detail: detail)
            ?? AuditRecord(.deviceKeyRevoked, actor: userId, subject: userId, detail: detail)
        guard !id.isEmpty, id.utf8.count <= 64, try storage({ () throws(StorageError) in
            try store.revoke(userId: userId, id: id, audit: audit, redeeming: admin?.redemption,
                             revokedEvent: events.template(.deviceKeyRevoked))
        }) else { throw ServiceError.notFound("device key") }
        // SPEC "Grants live and die": the grants it approved ended in that transaction; wait for this
        // instance's feed to have heard of them before answering.
        revoked.insert([])
    }

    /// What the DeviceKeys core proved, as Storage keeps it.
    static func stored(_ format: AttestationFormatName) -> DeviceKeyAttestationFormat {
        switch format {
        case .none: .none
        case .androidKey: .androidKey
        case .appleAppAttest: .appleAppAttest
        }
    }

    static func stored(_ level: KeySecurityLevel) -> DeviceKeySecurityLevel {
        switch level {
        case .strongBox: .strongBox
        case .tee: .tee
        case .secureEnclave: .secureEnclave
        case .software: .software
        case .unknown: .unknown
        }
    }

    /// The caller's own live key; another user's key is 404, a revoked one `key_revoked`.
    func liveKey(id: String, userId: String) throws(ServiceError) -> DeviceKeyRecord {
        guard let key = try storage({ () throws(StorageError) in try store.key(id: id) }), key.userId == userId else {
            throw ServiceError.notFound("device key")
        }
        guard key.revokedAt == nil else { throw ServiceError(.keyRevoked, "this device key was revoked; enrol the device again") }
        return key
    }
}

extension EnrolmentGate {
    var auditName: String {
        switch self {
        case .stepUp: "step-up"
        case .ticket: "ticket"
        }
    }
}

