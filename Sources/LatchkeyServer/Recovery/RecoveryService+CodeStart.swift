import Foundation
import JSON
import Storage

/// The start of an email sign-in or a recovery: one read (who the username or address names), a
/// decision, one write. Whether anyone has the username or address changes neither the answer nor
/// the statements sent: the code's hash and its mail are made either way, and the write's binds
/// (`sends`) decide whether the mail is stored and whether the stored hash is the code's.
extension RecoveryService {
    /// A start naming the account by `lookup`, counted against `identifier`'s limit (SPEC "Limits
    /// per account": per username or address, whether or not an account has it — past it 429 —
    /// and per account, past which the start answers as for nobody and mails nothing).
    func startCodeChallenge(_ purpose: NewCodeChallenge.Purpose, lookup: CodeRecipientLookup, identifier: String,
                            subject: MailCatalog.Key, intro: MailCatalog.Key, audit: AuditAction) throws(ServiceError) -> MailedChallenge {
        let recipient = try storage { () throws(StorageError) in try store.recipient(lookup) }
        let start = try codeChallengeStart(purpose, recipient: recipient, identifier: identifier, subject: subject, intro: intro, audit: audit)
        switch try storage({ () throws(StorageError) in try store.startChallenge(start) }) {
        case .started(let expires):
            return MailedChallenge(id: start.challenge.id, expiresAt: expires)
        case .limited(let retry):
            throw ServiceError(.rateLimited, "too many requests for this account; retry later", headers: [("Retry-After", String(retry))])
        }
    }

    /// The decision, with no I/O: the challenge, its code's hash and mail (made for nobody too, to
    /// a stand-in address, so that both paths do the same work), the limits and the audit line.
    func codeChallengeStart(_ purpose: NewCodeChallenge.Purpose, recipient: CodeRecipient, identifier: String,
                            subject: MailCatalog.Key, intro: MailCatalog.Key, audit: AuditAction) throws(ServiceError) -> CodeChallengeStart {
        let id = "otp_" + runtime.identifier()
        let code = codes.generate()
        let hash = try codes.hash(code, challengeId: id)
        let address = recipient.email.flatMap(EmailAddress.init)
        let account = address == nil ? nil : recipient.userId
        let ttl = policy.codeTTL
        let message = mail.compose(purpose == .recovery ? .recoveryCode : .emailSignIn, to: address ?? Self.nobody,
                                   userId: account ?? "", language: recipient.language) { l in
            (l[subject, ["code": code]], l[intro, ["code": code]] + "\n\n" + l[.codeFooter, ["minutes": l.duration(seconds: ttl)]])
        }
        // The per-account key for nobody is a random one: counted never (`sends` is false), sized alike.
        let accountKey = account.map { Self.limitKey("account-mail:\(purpose.rawValue):" + $0) } ?? runtime.random(32)
        return CodeChallengeStart(
            challenge: NewCodeChallenge(id: id, purpose: purpose, userId: account, email: nil, codeHash: hash,
                                        maxAttempts: OneTimeCode.maxAttempts, ttlSeconds: ttl),
            unmatchableHash: codes.unmatchable(), sends: account != nil,
            identifierLimit: CodeStartLimit(key: Self.limitKey(identifier), windowSeconds: 3600, max: Self.challengesPerHour),
            accountLimit: CodeStartLimit(key: accountKey, windowSeconds: 3600, max: Self.challengesPerHour),
            mail: message, audit: AuditRecord(audit, actor: AuditActor.server, subject: account))
    }

    /// Where nobody's stand-in mail is addressed (never stored, never sent).
    static let nobody = EmailAddress("nobody@invalid.invalid")!
}
