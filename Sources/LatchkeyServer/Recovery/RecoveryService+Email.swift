import Crypto
import DeviceKeys
import Foundation
import JSON
import Storage
import Tokens

/// The verified address and email sign-in (SPEC "Recovery and fallback sign-in"): the address a
/// recovery mails, changed only with the owner's step-up (the route's `StepUpRule.emailChange`),
/// and the one-time-code sign-in that begins an email session (SPEC "Assurance": such a session
/// adds only held passkeys and changes nothing that protects the account).
extension RecoveryService {
    // MARK: Verified email

    /// `PUT /v1/account/email` `{"email"}` → 202 `{"challengeId","expiresAt"}`; the code goes to that address.
    /// `redeeming`: the `latchkey.email.change` step-up the route checked (SPEC "Assurance"), used up here.
    /// `language`: the page's (Accept-Language), which the mail is written in and the account's mail
    /// speaks from now on (its memo written with the challenge); nil: the account's own, `account`
    /// as the route's guard read it (nil: not read, the composer reads it).
    /// One write: the per-account limit counted, and within it the challenge with its mail, the
    /// step-up's redemption and the language memo.
    func startVerification(_ caller: SessionService.Caller, body: JSONValue, redeeming: StepUpRedemption?,
                           language: String? = nil, account: AddressChangeAccount? = nil) throws(ServiceError) -> MailedChallenge {
        try requireMail()
        let email = try Self.email(body)
        let code = codes.generate()
        let id = "otp_" + runtime.identifier()
        let ttl = policy.codeTTL
        let render = { (l: MailCatalog) in
            (l[.verifySubject, ["code": code]], l[.verifyBody, ["code": code, "minutes": l.duration(seconds: ttl)]])
        }
        let message = account == nil && language == nil ? mail.compose(.emailVerify, to: email, userId: caller.userId, render)
            : mail.compose(.emailVerify, to: email, userId: caller.userId, language: language ?? account?.language, render)
        let hash = try codes.hash(code, challengeId: id)
        let started = try storage { () throws(StorageError) in
            try store.insert(NewCodeChallenge(id: id, purpose: .emailVerify, userId: caller.userId, email: email.value,
                                              codeHash: hash, maxAttempts: OneTimeCode.maxAttempts,
                                              ttlSeconds: policy.codeTTL),
                             mail: [message], audit: [AuditRecord(.emailVerificationStarted, actor: caller.userId, subject: caller.userId)],
                             events: [], redeeming: redeeming, language: language,
                             limit: CodeStartLimit(key: Self.limitKey("verify:" + caller.userId), windowSeconds: 3600,
                                                   max: Self.verificationsPerHour))
        }
        switch started {
        case .limited(let retry):
            throw ServiceError(.rateLimited, "too many requests for this account; retry later", headers: [("Retry-After", String(retry))])
        case .started(let expires):
            return MailedChallenge(id: id, expiresAt: expires)
        }
    }

    /// `POST /v1/account/email/verify` `{"challengeId","code"}` → 200 `{"email","verified":true}`:
    /// one read (the challenge, the account's address and mail language), then one statement that
    /// tries the code and, when it is right, stores the address.
    func verifyEmail(_ caller: SessionService.Caller, body: JSONValue) throws(ServiceError) -> VerifiedAddress {
        try requireMail()
        let (read, code) = try submission(body, purpose: .emailVerify)
        guard read.userId == caller.userId, let email = read.email else { throw Self.noChallenge }
        // The address being replaced hears of it: it is where recovery codes and "recovery started"
        // notices went, so a stolen session quietly moving recovery to another mailbox is seen. The
        // notice is composed for the address the read found; when that is no longer the account's
        // (another verification landed first), the statement writes nothing and says which it is,
        // and the notice is composed again for that one.
        var previous = read.accountEmail
        for _ in 0..<Self.emailVerifyAttempts {
            let notice = previous.flatMap { $0 == email ? nil : EmailAddress($0) }.map { to in
                [mail.compose(.emailChanged, to: to, userId: caller.userId, language: read.language) { l in (l[.changedSubject], l[.changedBody]) }]
            } ?? []
            let outcome: AddressVerification
            do {
                outcome = try store.verifyAddress(code, previous: previous, notice: notice,
                                                  audit: AuditRecord(.emailVerified, actor: caller.userId, subject: caller.userId),
                                                  events: [events.emailVerified(userId: caller.userId)])
            } catch .conflict {
                throw ServiceError(.conflict, "another account has verified this address")
            } catch {
                throw ServiceError(error)
            }
            switch outcome {
            case .noChallenge: throw Self.noChallenge
            case .wrong: throw ServiceError(.codeInvalid, "wrong code")
            case .stored: return VerifiedAddress(email: email)
            case .previousChanged(let current): previous = current
            }
        }
        throw ServiceError(.conflict, "the address kept changing while it was verified; try again")
    }

    /// How often `verifyEmail` asks storage before giving up on an address that keeps changing
    /// under it (the first ask assumes the address the read found; each later one knows the address the last one found).
    static let emailVerifyAttempts = 4

    /// What `PUT /v1/account/email`'s guard reads: whether an address change needs a step-up, and
    /// the mail language (one read, handed on to the handler).
    func addressChange(userId: String) throws(ServiceError) -> AddressChangeAccount {
        try storage { () throws(StorageError) in try store.addressChange(userId: userId) }
    }

    /// `GET /v1/account/recovery`: what the settings page shows.
    func accountState(_ caller: SessionService.Caller) throws(ServiceError) -> RecoveryAccountState {
        try storage { () throws(StorageError) in try store.accountState(userId: caller.userId) }
    }

    /// `GET /v1/sign-in/methods`: which fallback ways in this deployment offers (the web app asks).
    func methods() -> SignInMethods {
        SignInMethods(emailSignIn: policy.emailSignIn && policy.mailEnabled, emailRecovery: policy.mailEnabled)
    }

    // MARK: Email sign-in

    /// `POST /v1/email/challenges` `{"email"}` → 202 whether or not the address is anyone's.
    func startEmailSignIn(body: JSONValue) throws(ServiceError) -> MailedChallenge {
        guard policy.emailSignIn else { throw ServiceError.notFound("resource") }
        try requireMail()
        let email = try Self.email(body)
        return try startCodeChallenge(.emailSignIn, lookup: .email(email.value), identifier: "sign-in:" + email.value,
                                      subject: .signInSubject, intro: .signInIntro, audit: .emailSignInStarted)
    }

    /// `POST /v1/email/verify` `{"challengeId","code"}` → 200 `{"user","tokens"}`, `acr` email-otp.
    /// `language`: the page's, the account's mail language from now on (written with the session).
    /// `dpop`: the request's DPoP proof, which binds the session, its jti recorded by the same statement.
    func verifyEmailSignIn(body: JSONValue, language: String? = nil, dpop: DPoPBinding? = nil) throws(ServiceError) -> EmailSignIn {
        guard policy.emailSignIn else { throw ServiceError.notFound("resource") }
        try requireMail()
        let (read, code) = try submission(body, purpose: .emailSignIn)
        // One statement tries the code and, when it is right, starts the session. For nobody (an
        // unmatchable code) the same statement is built for no one and writes only the attempt.
        let userId = read.userId ?? ""
        let pending = sessions.prepare(userId: userId, credentialId: nil, method: .email, dpop: dpop)
        let started = try decided(try storage { () throws(StorageError) in
            try store.signIn(code, session: pending.record, audit: [AuditRecord(.emailSignIn, actor: userId, subject: userId)],
                             language: language)
        })
        // A right code for someone whose session was not started: the proof was seen before.
        if !started, read.user != nil, dpop != nil { throw SessionDPoP.replayed }
        guard started, let user = read.user else { throw Self.noChallenge }
        let issued = try sessions.issue(pending, authentication: .emailOTP)
        return EmailSignIn(user: user, tokens: issued)
    }
}
