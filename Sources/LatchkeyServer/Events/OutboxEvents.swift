import Crypto
import JSON
import Storage
import WebAuthn

// Every event type SPEC "Events" lists is `EventType` (Storage, where it is decoded); `data` carries
// exactly the members SPEC names for it and never codes, tokens, secrets or email addresses.

/// Why a session ended (`session.revoked`'s `reason`).
public enum SessionRevocationReason: String, Sendable {
    /// `POST /v1/logout`.
    case logout
    /// `DELETE /v1/sessions/{id}` by the account itself.
    case ended
    /// The passkey that began it was revoked.
    case passkeyRevoked = "passkey_revoked"
    /// A used refresh token came back: the whole family is revoked (RFC 9700 §4.14.2).
    case refreshTokenReuse = "refresh_token_reuse"
    /// A completed recovery revoked the account's other sessions.
    case recovery
}

/// Builds outbox events (one builder per type, so each type's `data` is written once). Services hand
/// the result to the repository call that makes the change. Where the change decides what is
/// reported (the sessions a revocation ended, the passkey it revoked), the builder is a template
/// (`EventTemplate`) and the repository's statement adds the members that row knows: the passkey
/// and device-key members, and `sessionId`, are written there, in `AccountRepository.rows`,
/// `DeviceKeyRepository.rows` and `SessionRepository.rows`. Nobody wakes the senders by hand: the
/// commit that wrote deliveries NOTIFYs every instance (migration 21, `OutboxRepository.wakeUps`).
/// The event id comes from the injected randomness, its time from the injected clock; the give-up
/// age from `LATCHKEY_WEBHOOK_MAX_AGE`.
public struct OutboxEvents: Sendable {
    let runtime: Runtime
    let maxAgeSeconds: Int

    public init(runtime: Runtime, maxAgeSeconds: Int) {
        self.runtime = runtime
        self.maxAgeSeconds = maxAgeSeconds
    }

    /// An event of `type` about `userId`, fanned out to the subscribed webhooks (plus `fanOut`).
    public func event(_ type: EventType, userId: String, data: [(key: String, value: JSONValue)],
                      also fanOut: [OutboxEvent.FanOut] = []) -> OutboxEvent {
        OutboxEvent(id: Self.idPrefix + runtime.identifier(), type: type, accountId: userId,
                    data: .object([("userId", .string(userId))] + data), fanOut: [.webhooks] + fanOut, maxAgeSeconds: maxAgeSeconds,
                    createdAt: runtime.now())
    }

    static let idPrefix = "evt_"

    /// An event of `type` the repository writes once per row its change returned, about that row's
    /// account, with `data` and the members it adds from the row.
    public func template(_ type: EventType, data: [(key: String, value: JSONValue)] = []) -> EventTemplate {
        EventTemplate(idPrefix: Self.idPrefix, seed: runtime.identifier(), type: type, data: .object(data), maxAgeSeconds: maxAgeSeconds,
                      createdAt: runtime.now())
    }

    /// `session.revoked` for each session a change ended (the repository adds `sessionId`).
    public func sessionRevoked(reason: SessionRevocationReason) -> EventTemplate {
        template(.sessionRevoked, data: [("reason", .string(reason.rawValue))])
    }

    public func userCreated(userId: String, username: String) -> OutboxEvent {
        event(.userCreated, userId: userId, data: [("username", .string(username))])
    }

    /// `passkey.created` / `passkey.renamed` / `passkey.revoked`.
    public func passkey(_ type: EventType, _ c: CredentialRecord) -> OutboxEvent {
        precondition([.passkeyCreated, .passkeyRenamed, .passkeyRevoked].contains(type))
        return event(type, userId: c.userId, data: [("credentialId", .string(Base64URL.encode(c.id))),
                                                    ("aaguid", .string(formatUUID(c.aaguid))), ("name", .string(c.name))])
    }

    public func cloneSuspected(userId: String, credentialId: [UInt8], storedSignCount: Int64, receivedSignCount: Int64) -> OutboxEvent {
        event(.passkeyCloneSuspected, userId: userId, data: [
            ("credentialId", .string(Base64URL.encode(credentialId))), ("storedSignCount", .number(Double(storedSignCount))),
            ("receivedSignCount", .number(Double(receivedSignCount))),
        ])
    }

    public func backupEligibilityChanged(userId: String, credentialId: [UInt8], backupEligible: Bool) -> OutboxEvent {
        event(.passkeyBackupEligibilityChanged, userId: userId,
              data: [("credentialId", .string(Base64URL.encode(credentialId))), ("backupEligible", .bool(backupEligible))])
    }

    /// `device_key.enrolled` for the key being stored (a revoked one's `device_key.revoked` is a
    /// template: `DeviceKeyRepository.rows` writes the same members from the key's row).
    public func deviceKeyEnrolled(_ k: NewDeviceKey) -> OutboxEvent {
        event(.deviceKeyEnrolled, userId: k.userId, data: [("keyId", .string(k.id)), ("deviceId", .string(k.deviceId)),
                                                           ("platform", .string(k.platform.rawValue)), ("attested", .bool(k.attested))])
    }

    /// `method` `device-key` carries `keyId`, `passkey` carries `credentialId`.
    public func stepUpApproved(userId: String, method: StepUpMethod, keyId: String, actionHash: [UInt8], receiptId: String) -> OutboxEvent {
        event(.stepUpApproved, userId: userId, data: [
            ("method", .string(method.rawValue)), (method == .passkey ? "credentialId" : "keyId", .string(keyId)),
            ("actionHash", .string(Base64URL.encode(actionHash))), ("receiptId", .string(receiptId)),
        ])
    }

    /// For the email and recovery work (the types exist now so subscriptions can name them).
    public func emailVerified(userId: String) -> OutboxEvent { event(.emailVerified, userId: userId, data: []) }

    /// `recovery.started` / `recovery.completed` / `recovery.cancelled`.
    public func recovery(_ type: EventType, userId: String, recoveryId: String, method: RecoveryMethod) -> OutboxEvent {
        precondition([.recoveryStarted, .recoveryCompleted, .recoveryCancelled].contains(type))
        return event(type, userId: userId, data: [("recoveryId", .string(recoveryId)), ("method", .string(method.rawValue))])
    }
}
