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

    /// The user's live passkeys in SPEC's passkey shape (the admin console's users page shows the same).
    func passkeysJSON(userId: String) throws(ServiceError) -> [JSONValue] {
        try storage { () throws(StorageError) in try accounts.credentials(userId: userId) }.map(passkeyJSON)
    }

    /// The passkeys and the Signal API's lists, from one read.
    func listPasskeys(userId: String) throws(ServiceError) -> JSONValue {
        guard let account = try storage({ () throws(StorageError) in try accounts.passkeys(userId: userId) }) else { throw ServiceError.unauthorized }
        return .object([("passkeys", .array(account.credentials.map(passkeyJSON))), ("signals", signals(account))])
    }

    /// SPEC "Signal API": the account's accepted credentials and current names, from one read (an
    /// account that is gone → 401).
    func signals(userId: String) throws(ServiceError) -> JSONValue {
        guard let account = try storage({ () throws(StorageError) in try accounts.passkeys(userId: userId) }) else { throw ServiceError.unauthorized }
        return signals(account)
    }

    func signals(_ account: AccountPasskeys) -> JSONValue {
        Signals.current(rpId: relyingParty.id, user: account.user, credentialIds: account.credentials.map(\.id))
    }

    /// The renamed passkey's JSON, plus `signals` (SPEC "Signal API": the new name reaches the
    /// provider) — one statement renames and returns the account's passkeys after it.
    func renamePasskey(userId: String, credentialId: [UInt8], name: String) throws(ServiceError) -> JSONValue {
        guard let (record, account) = try storage({ () throws(StorageError) in
            try accounts.rename(userId: userId, credentialId: credentialId, name: name, renamedEvent: events.template(.passkeyRenamed))
        }) else { throw ServiceError.notFound("passkey") }
        guard case .object(let members) = passkeyJSON(record) else { return passkeyJSON(record) }
        return .object(members + [("signals", signals(account))])
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
        // SPEC "Assurance": the statement itself refuses the last way in (`.conflict(.lastWayIn)`, 409 `last_passkey`).
        guard let ended = try storage({ () throws(StorageError) in
                  try accounts.revoke(userId: userId, credentialId: credentialId, audit: audit, redeeming: admin?.redemption ?? redeeming,
                                      keeping: lastWayInRule, mail: notice.map { [$0] } ?? [],
                                      revokedEvent: events.template(.passkeyRevoked), sessionEvent: events.sessionRevoked(reason: .passkeyRevoked))
              }) else { throw ServiceError.notFound("passkey") }
        sessions.ended(ended)
        assertion.keyCache.forget(credentialId)
        return .object([("signals", try signals(userId: userId))])
    }
}
