import Tokens
import Crypto
import JSON
import Storage
import WebAuthn

/// The one place a passkey assertion is verified against its stored credential — for a login and
/// for a passkey step-up alike — so both record the counter, the backup state and a possible clone
/// the same way (WebAuthn L3 §7.2 steps 5, 6, 20–22).
struct PasskeyAssertion: Sendable {
    /// Where a refused assertion's possible clone is flagged (`AccountRepository`).
    let accounts: any CredentialFlags
    let keyCache: CredentialKeyCache
    let events: OutboxEvents
    /// LATCHKEY_SIGN_COUNT_POLICY as the storing statement's compare-and-set applies it.
    let onRegression: CredentialUse.OnRegression

    /// What a verified assertion found, and what storing its use changes.
    struct Outcome: Sendable {
        let verified: VerifiedAuthentication
        let key: COSEKey
        let use: CredentialUse
        /// Audit detail every record of this use carries.
        let auditDetail: [(key: String, value: JSONValue)]
        /// The counter stored before this use (for `passkey.clone_suspected`).
        let storedSignCount: Int64
        /// What storing this use reports (SPEC "Events"): a suspected clone (let through by the `flag`
        /// policy), a changed backup eligibility.
        let events: [OutboxEvent]
        /// The passkey proved a hardware key at registration (OpenID EAP `phrh`, RFC 8176 `hwk`).
        var hardwareBound = false

        /// What a token describes of this assertion (RFC 8176 `amr` by the one rule).
        var authentication: AuthenticationClaims { .passkey(userVerified: verified.userVerified, hardware: hardwareBound) }
    }

    /// A refused assertion, and the flag its refusal writes (a counter that went back: a possible clone).
    struct Refusal: Error {
        let error: ServiceError
        let flag: CredentialFlag?
    }

    /// Steps 5–6 (allowed credential, user handle) then the signature and counter with the cached
    /// key. A counter regression refused under the `reject` policy still flags the credential.
    func verify(_ checked: CeremonyCheckedAuthentication, ceremony: AuthenticationCeremony, state: AuthenticationState,
                credential: CredentialRecord, user: UserRecord) throws(ServiceError) -> Outcome {
        do { return try verifyDeferringFlag(checked, ceremony: ceremony, state: state, credential: credential, user: user) } catch {
            // §7.2 step 22: a possible clone. The refusal stands either way; a flag that cannot be
            // recorded fails the request (503) rather than being lost without a word.
            if let flag = error.flag {
                _ = try storage { () throws(StorageError) in try accounts.flag(credentialId: flag.credentialId, audit: flag.audit, events: flag.events) }
            }
            throw error.error
        }
    }

    /// `verify`, the flag of a refusal handed back to be written by the caller's one statement
    /// (a login's, with the challenge's use) instead of its own.
    func verifyDeferringFlag(_ checked: CeremonyCheckedAuthentication, ceremony: AuthenticationCeremony, state: AuthenticationState,
                             credential: CredentialRecord, user: UserRecord) throws(Refusal) -> Outcome {
        let key: COSEKey
        do { key = try keyCache.key(for: credential) } catch { throw Refusal(error: ServiceError(error), flag: nil) }
        let stored = StoredCredential(publicKey: key, signCount: UInt32(clamping: credential.signCount),
                                      backupEligible: credential.backupEligible)
        let verified: VerifiedAuthentication
        do {
            verified = try ceremony.finish(checked, state: state, credential: stored, userHandle: user.userHandle)
        } catch {
            guard error.code == .signCountRegression else { throw Refusal(error: ServiceError(error), flag: nil) }
            let suspected = events.cloneSuspected(userId: user.id, credentialId: credential.id, storedSignCount: credential.signCount,
                                                  receivedSignCount: Int64(checked.parsed.authenticatorData.signCount))
            throw Refusal(error: ServiceError(error), flag: CredentialFlag(
                credentialId: credential.id,
                audit: AuditRecord(.passkeyFlagged, actor: AuditActor.server, subject: user.id, detail: [("reason", "sign_count_regression")]),
                events: [suspected]))
        }
        var detail: [(key: String, value: JSONValue)] = [("credentialId", .string(Base64URL.encode(credential.id))),
                                                         ("origin", .string(verified.origin))]
        if verified.backupEligibilityChanged { detail.append(("backupEligibilityChanged", true)) }
        if verified.cloneWarning { detail.append(("signCountRegression", true)) }
        let use = CredentialUse(credentialId: credential.id, userId: user.id, signCount: Int64(verified.newSignCount),
                                backedUp: verified.backedUp, backupEligible: verified.backupEligible,
                                cloneWarning: verified.cloneWarning, onRegression: onRegression)
        var reported: [OutboxEvent] = []
        if verified.cloneWarning {
            reported.append(events.cloneSuspected(userId: user.id, credentialId: credential.id, storedSignCount: credential.signCount,
                                                  receivedSignCount: Int64(verified.newSignCount)))
        }
        if verified.backupEligibilityChanged {
            reported.append(events.backupEligibilityChanged(userId: user.id, credentialId: credential.id,
                                                            backupEligible: verified.backupEligible))
        }
        return Outcome(verified: verified, key: key, use: use, auditDetail: detail, storedSignCount: credential.signCount,
                       events: reported, hardwareBound: credential.hardwareBound)
    }

    /// The use's compare-and-set failed under `reject` (another assertion carrying the same counter
    /// was stored first, or the counter went back meanwhile): nothing was stored; the refusal is
    /// `sign_count_regression` and the credential is flagged as a possible clone (§7.2 step 22).
    /// A flag that cannot be recorded is the error instead (503): the refusal stands either way.
    func refuseRegression(_ outcome: Outcome) -> ServiceError {
        let use = outcome.use
        let suspected = events.cloneSuspected(userId: use.userId, credentialId: use.credentialId, storedSignCount: outcome.storedSignCount,
                                              receivedSignCount: use.signCount)
        do {
            _ = try accounts.flag(credentialId: use.credentialId, audit: AuditRecord(
                .passkeyFlagged, actor: AuditActor.server, subject: use.userId,
                detail: [("reason", "sign_count_regression"), ("credentialId", .string(Base64URL.encode(use.credentialId)))]),
                events: [suspected])
        } catch {
            return ServiceError(error)
        }
        return ServiceError(.signCountRegression, "sign count \(use.signCount) is not above the stored one: another use came first")
    }
}

extension CredentialUse.OnRegression {
    /// LATCHKEY_SIGN_COUNT_POLICY as Storage's compare-and-set applies it.
    init(_ policy: VerificationPolicy.SignCountPolicy) {
        switch policy {
        case .reject: self = .reject
        case .flag: self = .flag
        }
    }
}

/// Flags a passkey as a possible clone, with its audit line and events, in one statement;
/// `.notFound` when there is no such credential (`AccountRepository.flag`).
protocol CredentialFlags: Sendable {
    func flag(credentialId: [UInt8], audit: AuditRecord, events: [OutboxEvent]) throws(StorageError)
}

extension AccountRepository: CredentialFlags {}
