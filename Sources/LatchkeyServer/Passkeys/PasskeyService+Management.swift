import Crypto
import JSON
import Storage

/// The user's passkeys (SPEC "HTTP contract": list, rename, revoke) and their Signal API lists.
extension PasskeyService {
    // MARK: The user's passkeys

    /// Whether the account has a live passkey (SPEC "Assurance": then an address change needs its step-up).
    func hasPasskeys(userId: String) throws(ServiceError) -> Bool {
        !(try storage { () throws(StorageError) in try accounts.credentials(userId: userId) }).isEmpty
    }

    /// The passkeys and the Signal API's lists, from one read.
    func listPasskeys(userId: String) throws(ServiceError) -> PasskeyList {
        guard let account = try storage({ () throws(StorageError) in try accounts.passkeys(userId: userId) }) else { throw ServiceError.unauthorized }
        return PasskeyList(passkeys: account.credentials.map(shown), signals: signals(account))
    }

    /// SPEC "Signal API": the account's accepted credentials and current names, from one read (an
    /// account that is gone → 401).
    func signals(userId: String) throws(ServiceError) -> PasskeySignals {
        guard let account = try storage({ () throws(StorageError) in try accounts.passkeys(userId: userId) }) else { throw ServiceError.unauthorized }
        return signals(account)
    }

    func signals(_ account: AccountPasskeys) -> PasskeySignals {
        signals(user: account.user, credentialIds: account.credentials.map(\.id))
    }

    /// The renamed passkey, with the account's lists (SPEC "Signal API": the new name reaches the
    /// provider) — one statement renames and returns the account's passkeys after it.
    func renamePasskey(userId: String, credentialId: [UInt8], name: String) throws(ServiceError) -> RenamedPasskey {
        guard let (record, account) = try storage({ () throws(StorageError) in
            try accounts.rename(userId: userId, credentialId: credentialId, name: name, renamedEvent: events.template(.passkeyRenamed))
        }) else { throw ServiceError.notFound("passkey") }
        return RenamedPasskey(passkey: shown(record), signals: signals(account))
    }

    /// Revokes the passkey and, in the same transaction, the sessions it began: their refresh
    /// tokens are invalid_grant at once and their access tokens refused here at once (and on every
    /// other instance within a second, through RevokedSessions' feed).
    /// Returns the lists of the credentials that remain (SPEC: DELETE answers 200 with them).
    /// `by`: an admin revoking another user's passkey (audited as that admin, approval redeemed with it).
    func revokePasskey(userId: String, credentialId: [UInt8], by admin: AdminCaller? = nil,
                       redeeming: StepUpRedemption? = nil) throws(ServiceError) -> PasskeySignals {
        let detail: [(key: String, value: JSONValue)] = [("credentialId", .string(Base64URL.encode(credentialId)))]
        let audit = admin?.record(.passkeyRevoked, subject: userId, detail: detail)
            ?? AuditRecord(.passkeyRevoked, actor: userId, subject: userId, detail: detail)
        let notice = try recovery.verifiedAddress(userId: userId).map { to in
            mail.compose(.passkeyRevoked, to: to, userId: userId) { l in
                (l[.revokedSubject], l[admin == nil ? .revokedBody : .revokedByAdminBody])
            }
        }
        // SPEC "Assurance": the statement itself refuses the last way in (`.conflict(.lastWayIn)`, 409 `last_passkey`).
        guard let ended = try storage({ () throws(StorageError) in
                  try accounts.revoke(userId: userId, credentialId: credentialId, audit: audit, redeeming: admin?.redemption ?? redeeming,
                                      keeping: lastWayInRule, mail: notice.map { [$0] } ?? [],
                                      revokedEvent: events.template(.passkeyRevoked), sessionEvent: events.sessionRevoked(reason: .passkeyRevoked))
              }) else { throw ServiceError.notFound("passkey") }
        sessions.ended(ended)
        assertion.keyCache.forget(credentialId)
        return try signals(userId: userId)
    }
}
