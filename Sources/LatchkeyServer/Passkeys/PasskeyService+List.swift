import Tokens
import Foundation
import Crypto
import JSON
import Storage
import WebAuthn

/// The user's passkeys: list, rename, revoke (SPEC "HTTP contract", "Signal API").
extension PasskeyService {
    // MARK: The user's passkeys

    /// Whether the account has a live passkey (SPEC "Assurance": then an address change needs its step-up).
    func hasPasskeys(userId: String) throws(ServiceError) -> Bool {
        !(try storage { () throws(StorageError) in try accounts.credentials(userId: userId) }).isEmpty
    }

    /// The user's live passkeys in SPEC's passkey shape (the admin console's users page shows the same).
    func passkeysJSON(userId: String) throws(ServiceError) -> [JSONValue] {
        try storage { () throws(StorageError) in try accounts.credentials(userId: userId) }.map(passkeyJSON)
    }

    func listPasskeys(userId: String) throws(ServiceError) -> JSONValue {
        let credentials = try storage { () throws(StorageError) in try accounts.credentials(userId: userId) }
        return .object([("passkeys", .array(credentials.map(passkeyJSON))),
                        ("signals", try signals(userId: userId, credentials: credentials))])
    }

    /// SPEC "Signal API": the account's accepted credentials and current names (nil when the account is gone).
    func signals(userId: String, credentials: [CredentialRecord]? = nil) throws(ServiceError) -> JSONValue {
        guard let user = try storage({ () throws(StorageError) in try accounts.user(id: userId) }) else { throw ServiceError.unauthorized }
        let live: [CredentialRecord]
        if let credentials { live = credentials } else {
            live = try storage { () throws(StorageError) in try accounts.credentials(userId: userId) }
        }
        return Signals.current(rpId: configuration.rpId, user: user, credentialIds: live.map(\.id))
    }

    /// The renamed passkey's JSON, plus `signals` (SPEC "Signal API": the new name reaches the provider).
    func renamePasskey(userId: String, credentialId: [UInt8], name: String) throws(ServiceError) -> JSONValue {
        guard let record = try storage({ () throws(StorageError) in
            try accounts.rename(userId: userId, credentialId: credentialId, name: name, renamedEvent: events.template(.passkeyRenamed))
        }) else { throw ServiceError.notFound("passkey") }
        events.written(channels: OutboxEvents.webhooks)
        guard case .object(let members) = passkeyJSON(record) else { return passkeyJSON(record) }
        return .object(members + [("signals", try signals(userId: userId))])
    }

    /// Revokes the passkey and, in the same transaction, the sessions it began: their refresh
    /// tokens are invalid_grant at once and their access tokens refused here at once (and on every
    /// other instance within a second, through RevokedSessions' feed).
    /// Returns `{"signals":[…]}` with the credentials that remain (SPEC: DELETE answers 200 with it).
    /// `by`: an admin revoking another user's passkey (audited as that admin, approval redeemed with it).
    func revokePasskey(userId: String, credentialId: [UInt8], by admin: AdminCaller? = nil,
                       redeeming: StepUpRedemption? = nil) throws(ServiceError) -> JSONValue {
        let detail: [(key: String, value: JSONValue)] = [("credentialId", .string(Base64URL.encode(credentialId)))]
        let audit = admin?.record(.passkeyRevoked, subject: userId, detail: detail)
            ?? AuditRecord(.passkeyRevoked, actor: userId, subject: userId, detail: detail)
        let notice = try recovery.verifiedAddress(userId: userId).map { to in
            mail.compose(.passkeyRevoked, to: to, userId: userId) { l in
                (l[.revokedSubject], l[admin == nil ? .revokedBody : .revokedByAdminBody])
            }
        }
        guard let ended = try storage({ () throws(StorageError) in
                  try accounts.revoke(userId: userId, credentialId: credentialId, audit: audit, redeeming: admin?.redemption ?? redeeming,
                                      mail: notice.map { [$0] } ?? [], revokedEvent: events.template(.passkeyRevoked),
                                      sessionEvent: events.sessionRevoked(reason: .passkeyRevoked))
              }) else { throw ServiceError.notFound("passkey") }
        sessions.ended(ended)
        assertion.keyCache.forget(credentialId)
        // passkey.revoked and session.revoked (built inside the call), and the notice when there is one.
        events.written(channels: notice == nil ? OutboxEvents.webhooks : OutboxEvents.webhooks.union(OutboxEvents.mail))
        return .object([("signals", try signals(userId: userId))])
    }
}
