import Crypto
import Foundation
import JSON
import Storage

/// The vault as its owner's session sees it: the salt, the wraps of the live passkeys, and the
/// recovery wrap when this session may have it (nil otherwise, or when none is set).
struct ShownVault: Sendable {
    let vault: VaultRecord
    let recoveryShown: Bool
}

/// The vault the server cannot read (SPEC "Portability"): the browser derives a key from each
/// passkey's PRF output and wraps the account's data key under it; Latchkey stores the salt and the
/// wrapped keys, never the PRF output, the data key or the vault's recovery key. Decides purely
/// from one read (time from `Runtime`) and makes one write.
final class VaultService: Sendable {
    let store: any VaultStore
    let runtime: Runtime

    init(store: any VaultStore, runtime: Runtime) {
        self.store = store
        self.runtime = runtime
    }

    /// `PUT /v1/vault` `{"prfSalt"}`: creates the vault once; 409 `conflict` when there is one.
    func create(_ command: CreateVault, userId: String) throws(ServiceError) -> ShownVault {
        let created = try storage { () throws(StorageError) in
            try store.create(userId: userId, prfSalt: command.prfSalt, audit: AuditRecord(.vaultCreated, actor: userId, subject: userId))
        }
        guard created else { throw ServiceError(.conflict, "this account has a vault already; its salt never changes") }
        return ShownVault(vault: VaultRecord(prfSalt: command.prfSalt, wrapped: [], recoveryWrappedKey: nil), recoveryShown: false)
    }

    /// `GET /v1/vault`: 404 without a vault. The recovery wrap goes only to a session begun by a
    /// passkey of the account that is not held, or by the registration that completed a recovery
    /// (which then needs the vault recovery key to read the vault) — never to an email session.
    func show(userId: String, sessionId: String) throws(ServiceError) -> ShownVault {
        let read = try storage { () throws(StorageError) in try store.read(userId: userId, sessionId: sessionId) }
        guard let session = read.session else { throw ServiceError.unauthorized }
        guard let vault = read.vault else { throw ServiceError.notFound("vault") }
        return ShownVault(vault: vault, recoveryShown: Self.mayReadRecovery(session, passkeyApprovesFrom: read.passkeyApprovesFrom,
                                                                            now: runtime.now()))
    }

    /// SPEC "Portability": a not-held passkey session, or the session a completed recovery began.
    static func mayReadRecovery(_ session: SessionRecord, passkeyApprovesFrom: Date?, now: Date) -> Bool {
        switch session.method {
        case .recovery: return true
        case .passkey, .ticket:
            let held = passkeyApprovesFrom.map { $0 > now } ?? false
            return session.credentialId != nil && !held
        case .email, .oauth: return false
        }
    }

    /// `PUT /v1/vault/wrapped/{credentialId}` `{"wrappedKey"}` with the `latchkey.vault.wrap` step-up.
    /// 404 when the account has no vault or the id is not one of its live passkeys (the step-up
    /// unspent).
    func wrap(_ command: WrappedKeyBody, credentialId: [UInt8], userId: String, redeeming: StepUpRedemption) throws(ServiceError) {
        let audit = AuditRecord(.vaultWrapped, actor: userId, subject: userId, detail: [("credentialId", .string(Base64URL.encode(credentialId)))])
        let change = try storage { () throws(StorageError) in
            try store.wrap(userId: userId, credentialId: credentialId, wrappedKey: command.wrappedKey, audit: audit, redeeming: redeeming)
        }
        try Self.outcome(change, absent: "no vault, or no live passkey of this account with that id")
    }

    /// `PUT /v1/vault/recovery` `{"wrappedKey"}` with the `latchkey.vault.recovery` step-up; 404
    /// without a vault (the step-up unspent).
    func setRecovery(_ command: WrappedKeyBody, userId: String, redeeming: StepUpRedemption) throws(ServiceError) {
        let change = try storage { () throws(StorageError) in
            try store.setRecovery(userId: userId, wrappedKey: command.wrappedKey,
                                  audit: AuditRecord(.vaultRecoverySet, actor: userId, subject: userId), redeeming: redeeming)
        }
        try Self.outcome(change, absent: "no vault: PUT /v1/vault first")
    }

    static func outcome(_ change: VaultChange, absent: String) throws(ServiceError) {
        switch change {
        case .written: return
        case .absent: throw ServiceError(.notFound, absent)
        case .stepUpUsed: throw ServiceError(StorageError.conflict(.stepUpUsed))
        }
    }
}
