import Crypto
import JSON
import Storage

/// The user's passkeys (SPEC "HTTP contract": list, rename, revoke) and their Signal API lists.
extension PasskeyService {
    // MARK: The user's passkeys

    /// The passkeys and the Signal API's lists, from one read.
    func listPasskeys(userId: String) throws(ServiceError) -> PasskeyList {
        guard let account = try storage({ () throws(StorageError) in try store.passkeys(userId: userId) }) else { throw ServiceError.unauthorized }
        return PasskeyList(passkeys: account.credentials.map(shown), signals: signals(account))
    }

    /// SPEC "Signal API": the account's accepted credentials and current names, from one read (an
    /// account that is gone → 401).
    func signals(userId: String) throws(ServiceError) -> PasskeySignals {
        guard let account = try storage({ () throws(StorageError) in try store.passkeys(userId: userId) }) else { throw ServiceError.unauthorized }
        return signals(account)
    }

    func signals(_ account: AccountPasskeys) -> PasskeySignals {
        signals(user: account.user, credentialIds: account.credentials.map(\.id))
    }

    /// The renamed passkey, with the account's lists (SPEC "Signal API": the new name reaches the
    /// provider) — one statement renames and returns the account's passkeys after it.
    func renamePasskey(userId: String, credentialId: [UInt8], name: String) throws(ServiceError) -> RenamedPasskey {
        guard let (record, account) = try storage({ () throws(StorageError) in
            try store.rename(userId: userId, credentialId: credentialId, name: name, renamedEvent: events.template(.passkeyRenamed))
        }) else { throw ServiceError.notFound("passkey") }
        return RenamedPasskey(passkey: shown(record), signals: signals(account))
    }

    /// Revokes the passkey and, in the same statement, the sessions it began: their refresh tokens
    /// are invalid_grant at once and their access tokens refused here at once (and on every other
    /// instance within a second, through RevokedSessions' feed). `loaded`: what the route's guard
    /// read for its last-way-in check (the ways in, the address and language of the notice), so the
    /// revocation is that one read and one statement; without it (or for another passkey) it is read here.
    /// Returns the lists of the credentials that remain (SPEC: DELETE answers 200 with them), as the
    /// statement left them. `by`: an admin revoking another user's passkey (audited as that admin,
    /// approval redeemed with it).
    func revokePasskey(userId: String, credentialId: [UInt8], by admin: AdminCaller? = nil, redeeming: StepUpRedemption? = nil,
                       loaded: LoadedRevocation? = nil) throws(ServiceError) -> PasskeySignals {
        let read: PasskeyRevocationRead
        if let loaded, loaded.userId == userId, loaded.credentialId == credentialId {
            read = loaded.read
        } else {
            read = try storage { () throws(StorageError) in try store.revocationRead(userId: userId, credentialId: credentialId) }
        }
        let detail: [(key: String, value: JSONValue)] = [("credentialId", .string(Base64URL.encode(credentialId)))]
        let audit = admin?.record(.passkeyRevoked, subject: userId, detail: detail)
            ?? AuditRecord(.passkeyRevoked, actor: userId, subject: userId, detail: detail)
        // SPEC "Assurance": the verified address hears of it, in the account's language.
        let notice = read.email.flatMap { EmailAddress($0) }.map { to in
            mail.compose(.passkeyRevoked, to: to, userId: userId, language: read.language) { l in
                (l[.revokedSubject], l[admin == nil ? .revokedBody : .revokedByAdminBody])
            }
        }
        // SPEC "Assurance": the statement itself refuses the last way in (`.conflict(.lastWayIn)`, 409 `last_passkey`).
        guard let revoked = try storage({ () throws(StorageError) in
                  try store.revokePasskey(userId: userId, credentialId: credentialId, audit: audit, redeeming: admin?.redemption ?? redeeming,
                                          keeping: lastWayInRule, mail: notice.map { [$0] } ?? [],
                                          revokedEvent: events.template(.passkeyRevoked), sessionEvent: events.sessionRevoked(reason: .passkeyRevoked))
              }) else { throw ServiceError.notFound("passkey") }
        sessions.ended(revoked.ended)
        assertion.keyCache.forget(credentialId)
        return signals(revoked.account)
    }
}
