import Crypto
import DeviceKeys
import Foundation
import JSON
import Storage

/// Recovery and fallback sign-in (SPEC "Recovery and fallback sign-in"): the verified address,
/// mailed one-time codes (verification, email sign-in, recovery), recovery codes, and recoveries —
/// slower and stricter than the usual way in. Every limit is a row in PostgreSQL (all instances
/// count together), keyed by what was submitted whether or not an account has it, so neither the
/// answers nor a 429 tell whether an account exists. Addresses never reach logs, metrics, events
/// or audit details.
public final class RecoveryService: Sendable {
    let store: any RecoveryStore
    let sessions: SessionService
    /// Verified passkeys' keys in memory: a passkey a cancel link revokes is forgotten at once.
    let keyCache: CredentialKeyCache
    let mail: any MailComposer
    let codes: OneTimeCode
    let recoveryCodes: RecoveryCodes
    let events: OutboxEvents
    let policy: RecoveryPolicy
    let runtime: Runtime

    /// SPEC "Limits per account".
    static let challengesPerHour = 3
    static let wrongRecoveryCodesPerDay = 10
    /// Address changes an account may start per hour (each mails a code to a new address).
    static let verificationsPerHour = 5

    init(store: any RecoveryStore, sessions: SessionService, keyCache: CredentialKeyCache, mail: any MailComposer,
         secret: DeploymentSecret, events: OutboxEvents, policy: RecoveryPolicy, runtime: Runtime) {
        self.store = store
        self.sessions = sessions
        self.keyCache = keyCache
        self.mail = mail
        self.events = events
        self.policy = policy
        self.runtime = runtime
        codes = OneTimeCode(digits: policy.codeDigits, runtime: runtime, secret: secret)
        recoveryCodes = RecoveryCodes(runtime: runtime, secret: secret)
    }

    // MARK: Recovery tokens at the edge

    static let tokenPrefix = "lkrec_"
    static func isRecoveryToken(_ token: String) -> Bool { token.hasPrefix(tokenPrefix) }
    /// SPEC: a recovery token anywhere but passkey registration → 403 `forbidden`.
    static let refusedHere = ServiceError(.forbidden, "a recovery token can only register a passkey (POST /v1/passkeys/registration/options)")

    /// The email endpoints exist only when mail can go out (SPEC: outside dev mode, 404 without SMTP).
    func requireMail() throws(ServiceError) {
        guard policy.mailEnabled else { throw ServiceError.notFound("resource") }
    }

    // MARK: Recovery codes

    /// `POST /v1/recovery-codes` behind a user-verified passkey step-up → 201 `{"codes":[10]}`, shown once.
    func createRecoveryCodes(_ caller: SessionService.Caller, redeeming approval: StepUpRedemption) throws(ServiceError) -> IssuedRecoveryCodes {
        let fresh = recoveryCodes.generate()
        var hashes: [[UInt8]] = []
        for c in fresh { hashes.append(try recoveryCodes.hash(c, userId: caller.userId)) }
        try storage { () throws(StorageError) in
            try store.replaceRecoveryCodes(userId: caller.userId, hashes: hashes,
                                           audit: AuditRecord(.recoveryCodesCreated, actor: caller.userId, subject: caller.userId,
                                                              detail: [("count", .number(Double(hashes.count)))]),
                                           redeeming: approval)
        }
        return IssuedRecoveryCodes(codes: fresh)
    }

    // MARK: Recovery

    /// `POST /v1/recovery/challenges` `{"username"}` or `{"email"}` → 202 always; the code goes
    /// only to a verified address.
    func startRecovery(body: JSONValue) throws(ServiceError) -> MailedChallenge {
        try requireMail()
        if let username = body["username"]?.stringValue {
            try validateName(username, "username")
            return try startCodeChallenge(.recovery, lookup: .username(username), identifier: "recovery:u:" + username,
                                          subject: .recoveryCodeSubject, intro: .recoveryCodeIntro, audit: .recoveryChallengeStarted)
        }
        guard body["email"] != nil else { throw ServiceError.invalid("username or email is required") }
        let email = try Self.email(body)
        return try startCodeChallenge(.recovery, lookup: .email(email.value), identifier: "recovery:e:" + email.value,
                                      subject: .recoveryCodeSubject, intro: .recoveryCodeIntro, audit: .recoveryChallengeStarted)
    }

    /// `POST /v1/recovery/verify` `{"challengeId","code"}` or `{"username","recoveryCode"}` → 200
    /// `{"recoveryToken","expiresIn","notBefore","recoveryId"}`.
    func verifyRecovery(body: JSONValue) throws(ServiceError) -> StartedRecovery {
        if body["recoveryCode"] != nil || body["username"] != nil {
            guard let username = body["username"]?.stringValue, let code = body["recoveryCode"]?.stringValue else {
                throw ServiceError.invalid("username and recoveryCode are required")
            }
            try validateName(username, "username")
            guard code.utf8.count <= 64 else { throw ServiceError.invalid("recoveryCode is too long") }
            // One read (the account, its address and mail language, the same statement whether or
            // not the username exists), then one statement that counts the code against the
            // username's limit (every instance on one row, so concurrent guesses never exceed it) and,
            // when it is right, starts the recovery.
            let account = try storage { () throws(StorageError) in try store.recipient(.username(username)) }
            let hash = try recoveryCodes.hash(code, userId: account.userId ?? "")
            let userId = account.userId ?? ""
            let started = prepared(userId: userId, address: account.email, language: account.language, method: .recoveryCode, alike: false)
            let submission = RecoveryCodeSubmission(
                userId: account.userId, hash: hash,
                limit: CodeStartLimit(key: Self.limitKey("recovery-code:" + username), windowSeconds: 86400, max: Self.wrongRecoveryCodesPerDay),
                rejected: AuditRecord(.recoveryCodeRejected, actor: AuditActor.server, subject: account.userId))
            switch try storage({ () throws(StorageError) in
                try store.recover(submission, recovery: started.recovery, mail: started.mail, audit: started.audit, events: started.events,
                                  cancelTokenHash: started.cancelHash)
            }) {
            case .limited(let retry):
                throw ServiceError(.rateLimited, "too many wrong recovery codes; retry later", headers: [("Retry-After", String(retry))])
            case .wrong: throw ServiceError(.codeInvalid, "wrong or used recovery code")
            case .started(let record): return started.answer(record, ttl: policy.tokenTTL)
            }
        }
        try requireMail()
        let (read, code) = try submission(body, purpose: .recovery)
        // One statement tries the code and, when it is right, starts the recovery. For nobody (an
        // unmatchable code) the same statement is built for no one and writes only the attempt.
        let started = prepared(userId: read.userId ?? "", address: read.accountEmail, language: read.language, method: .email, alike: true)
        let record = try decided(try storage { () throws(StorageError) in
            try store.recover(code, address: read.accountEmail, recovery: started.recovery, mail: started.mail, audit: started.audit,
                              events: started.events, cancelTokenHash: started.cancelHash)
        })
        return started.answer(record, ttl: policy.tokenTTL)
    }

    /// A recovery ready to store: its token, the "recovery started" notice to `address` in
    /// `language` (the account's, read with the rest) with its cancel link (SPEC "Assurance": the owner hears of
    /// it at once and can undo it from the mail, without a session), the audit line and the event.
    /// `alike`: composed for a stand-in address when there is none, so a statement that writes it
    /// only for a right code is the same statement whoever the code named — only where a right code
    /// implies the address (a mailed code went to it), never for a recovery code.
    private func prepared(userId: String, address: String?, language: String?, method: RecoveryMethod, alike: Bool) -> PreparedRecovery {
        let token = OpaqueSecret(prefix: Self.tokenPrefix, runtime: runtime)
        let id = "rec_" + runtime.identifier()
        let delay = policy.delaySeconds
        let notBefore = Date(timeIntervalSince1970: Double(runtime.unixTime + Int64(delay)))
        var notice: [MailToSend] = []
        let cancel = OpaqueSecret(prefix: Self.cancelTokenPrefix + "rec_", runtime: runtime)
        var cancelHash: [UInt8]? = nil
        if let to = address.flatMap(EmailAddress.init) ?? (alike ? Self.standIn : nil) {
            cancelHash = cancel.hash
            let link = mail.cancelLink(cancel.token)
            let render = { (l: MailCatalog) in
                let when = delay == 0 ? l[.startedNow] : l[.startedLater, ["duration": l.duration(seconds: delay), "date": l.dateTime(notBefore)]]
                return (l[.startedSubject], l[.startedBody, ["how": method == .email ? l[.startedByEmail] : l[.startedByCode],
                                                             "when": when, "link": link, "id": id]])
            }
            notice.append(mail.compose(.recoveryStarted, to: to, userId: userId, language: language, render))
        }
        return PreparedRecovery(
            recovery: NewRecovery(id: id, userId: userId, method: method, tokenHash: token.hash, delaySeconds: delay, ttlSeconds: policy.tokenTTL),
            token: token.token, mail: notice,
            audit: AuditRecord(.recoveryStarted, actor: userId, subject: userId,
                               detail: [("recoveryId", .string(id)), ("method", .string(method.rawValue)),
                                        ("delaySeconds", .number(Double(delay)))]),
            events: [events.recovery(.recoveryStarted, userId: userId, recoveryId: id, method: method)], cancelHash: cancelHash)
    }

    /// Where a notice composed only so that statements look alike is addressed (never written).
    static let standIn = EmailAddress("nobody@recovery.invalid")

    /// `DELETE /v1/recovery/{id}` from any session of the account → 204; 404 otherwise.
    func cancel(_ caller: SessionService.Caller, recoveryId: String) throws(ServiceError) {
        guard !recoveryId.isEmpty, recoveryId.utf8.count <= 64 else { throw ServiceError.notFound("recovery") }
        guard let r = try storage({ () throws(StorageError) in try store.recovery(id: recoveryId) }), r.userId == caller.userId else {
            throw ServiceError.notFound("recovery")
        }
        let cancelled = events.recovery(.recoveryCancelled, userId: caller.userId, recoveryId: recoveryId, method: r.method)
        guard try storage({ () throws(StorageError) in
            try store.cancel(id: recoveryId, userId: caller.userId,
                             audit: AuditRecord(.recoveryCancelled, actor: caller.userId, subject: caller.userId,
                                                detail: [("recoveryId", .string(recoveryId))]),
                             events: [cancelled])
        }) else { throw ServiceError.notFound("recovery") }
    }

    /// Mailed cancel links' tokens (`<first web origin>/?cancel=<token>`): `lkcan_rec_…` for a recovery,
    /// `lkcan_pk_…` for a held passkey, so the page can say which it undoes before asking.
    static let cancelTokenPrefix = "lkcan_"

    /// `POST /v1/recovery/cancel` `{"cancelToken"}` (no session: the owner may have none left) → 204:
    /// cancels the recovery the token names, or revokes the held passkey it names and the sessions
    /// that passkey began. Unknown, used or expired, or nothing left to undo → 404.
    func cancel(token body: JSONValue) throws(ServiceError) {
        guard let token = body["cancelToken"]?.stringValue else { throw ServiceError.invalid("cancelToken is required") }
        guard token.utf8.count <= 128, isPrintableText(token) else { throw ServiceError.invalid("cancelToken is not a cancel token") }
        guard token.hasPrefix(Self.cancelTokenPrefix) else { throw ServiceError.notFound("cancel link") }
        let undone = try storage { () throws(StorageError) in
            try store.useCancelToken(hash: OpaqueSecret.hash(token), now: runtime.now(), records: CancelLinkRecords(
                recoveryAudit: AuditTemplate(.recoveryCancelled, actor: nil, detail: [("via", "cancel-link")]),
                recoveryEvent: events.template(.recoveryCancelled),
                passkeyAudit: AuditTemplate(.passkeyRevoked, actor: nil, detail: [("via", "cancel-link")]),
                passkeyEvent: events.template(.passkeyRevoked), sessionEvent: events.sessionRevoked(reason: .passkeyRevoked)))
        }
        guard let undone else { throw ServiceError.notFound("cancel link") }
        if case .passkey(_, let credential, let ended) = undone {
            sessions.ended(ended)
            keyCache.forget(credential.id)
        }
    }

    /// A recovery token on registration options: the recovery it starts must be pending and due.
    /// Cancelled, completed, expired or unknown → 401; before `notBefore` → 403 `recovery_pending`.
    func authorizeRegistration(token: String) throws(ServiceError) -> RecoveryRecord {
        try authorizeRegistration(loaded: try storage({ () throws(StorageError) in try store.recovery(tokenHash: OpaqueSecret.hash(token)) }))
    }

    /// The same decision on the recovery's row as read with the database's time (nil: unknown token).
    func authorizeRegistration(loaded: (RecoveryRecord, now: Date)?) throws(ServiceError) -> RecoveryRecord {
        guard let (r, now) = loaded, r.status == .pending, r.expiresAt > now else {
            throw ServiceError(.unauthorized, "the recovery token is unknown, cancelled, completed or expired")
        }
        guard r.notBefore <= now else {
            throw ServiceError(.recoveryPending, "this recovery can register a passkey from \(iso8601(r.notBefore))")
        }
        return r
    }

    /// What completing `recovery` revokes, and writes, in the registration's statement.
    static func completion(_ recovery: RecoveryRecord, events: OutboxEvents, revokePasskeys: Bool) -> RecoveryCompletion {
        let userId = recovery.userId, id = recovery.id, method = recovery.method
        return RecoveryCompletion(
            recoveryId: id, revokePasskeys: revokePasskeys,
            audit: AuditRecord(.recoveryCompleted, actor: userId, subject: userId,
                               detail: [("recoveryId", .string(id)), ("method", .string(method.rawValue))]),
            events: [events.recovery(.recoveryCompleted, userId: userId, recoveryId: id, method: method)],
            sessionRevoked: events.sessionRevoked(reason: .recovery), deviceKeyRevoked: events.template(.deviceKeyRevoked),
            passkeyRevoked: events.template(.passkeyRevoked),
            otherCancelledAudit: AuditTemplate(.recoveryCancelled, actor: AuditActor.server, detail: [("completedBy", .string(id))]),
            otherCancelledEvent: events.template(.recoveryCancelled))
    }

    // MARK: Shared

    /// A code's verify up to its one write: the body checked, then the one read (the live
    /// challenge of `purpose` with its account); none → `challenge_invalid`, nothing written. The
    /// submission's write counts the attempt and compares (`decided`).
    func submission(_ body: JSONValue, purpose: NewCodeChallenge.Purpose) throws(ServiceError) -> (CodeChallengeRead, CodeSubmission) {
        guard let id = body["challengeId"]?.stringValue, let code = body["code"]?.stringValue else {
            throw ServiceError.invalid("challengeId and code are required")
        }
        // SPEC "Assurance": a body id that cannot be one is invalid_request, and never reaches SQL.
        guard isPrintableText(id), isPrintableText(code) else { throw ServiceError.invalid("challengeId and code must be printable text") }
        guard id.utf8.count <= 64, code.utf8.count <= 32 else { throw ServiceError(.challengeInvalid, "unknown challenge") }
        let presented = try codes.hash(OneTimeCode.canonical(code), challengeId: id)
        guard let read = try storage({ () throws(StorageError) in try store.codeChallenge(id: id, purpose: purpose) }) else {
            throw Self.noChallenge
        }
        let rejected = AuditTemplate(.codeRejected, actor: AuditActor.server, detail: [("purpose", .string(purpose.rawValue))])
        return (read, CodeSubmission(id: id, purpose: purpose, userId: read.userId, presentedHash: presented, rejected: rejected))
    }

    /// What a submission's write found: wrong → `code_invalid`; unknown, used, expired or out of
    /// attempts (a concurrent submission got there first) → `challenge_invalid`; right → its value.
    func decided<T>(_ outcome: CodeOutcome<T>) throws(ServiceError) -> T {
        switch outcome {
        case .noChallenge: throw Self.noChallenge
        case .wrong: throw ServiceError(.codeInvalid, "wrong code")
        case .right(let value): return value
        }
    }

    static let noChallenge = ServiceError(.challengeInvalid, "unknown, expired or used challenge, or too many attempts")

    static func limitKey(_ name: String) -> [UInt8] { Digest.sha256(Array(name.utf8)) }

    static func email(_ body: JSONValue) throws(ServiceError) -> EmailAddress {
        guard let raw = body["email"]?.stringValue else { throw ServiceError.invalid("email is required") }
        guard let email = EmailAddress(raw) else { throw ServiceError.invalid("email is not a valid address") }
        return email
    }
}

/// A recovery composed and not stored yet (`RecoveryService.prepared`).
private struct PreparedRecovery {
    let recovery: NewRecovery
    let token: String
    let mail: [MailToSend]
    let audit: AuditRecord
    let events: [OutboxEvent]
    let cancelHash: [UInt8]?

    /// The answer, from the stored row and the durations this call gave the database (one clock,
    /// rule 3: its `expires_at` is now() + these).
    func answer(_ record: RecoveryRecord, ttl: Int) -> StartedRecovery {
        StartedRecovery(token: token, expiresIn: recovery.delaySeconds + ttl, notBefore: record.notBefore, recoveryId: recovery.id)
    }
}
