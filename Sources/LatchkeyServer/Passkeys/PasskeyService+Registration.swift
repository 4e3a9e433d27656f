import Foundation
import Crypto
import JSON
import Storage
import Tokens
import WebAuthn

/// Passkey registration (SPEC "HTTP contract"; WebAuthn L3 §7.1): options write nothing — the
/// ceremony state, with the ticket or step-up the request presented, is sealed into the challenge
/// (`SealedRegistration`) — and a verify is one read and one write (ARCHITECTURE.md "A
/// registration, through the code").
extension PasskeyService {
    public enum Requester: Sendable {
        case newAccount(username: String, displayName: String)
        /// Signed in (Bearer): another passkey for that account. `held`: whether the new passkey
        /// approves nothing until registration + LATCHKEY_RECOVERY_DELAY (SPEC "Assurance");
        /// `redeeming`: the `latchkey.passkey.add` step-up the options request presented, redeemed by the verify.
        case user(String, held: Hold, redeeming: StepUpRedemption?)
        /// The conformance profile: the account with this username, created on first use.
        case named(username: String, displayName: String)
        /// A recovery token whose recovery is pending and due: the registration completes it.
        case recovery(RecoveryRecord)
        /// An enrolment ticket (valid when the options were asked for): another passkey for its
        /// account, held when the account has one or the ticket always holds; the verify uses it up.
        case ticket(EnrolmentTicket)
    }

    /// Whether a passkey added to an existing account is held.
    public enum Hold: Sendable {
        case notHeld
        /// An email session, or one a held passkey began, without a step-up.
        case held
        /// An enrolment ticket: held when the account already has a passkey (an app backend's
        /// vouching must not be a faster way past the passkeys the owner has).
        case ifAccountHasPasskeys
    }

    /// What a conformance options request asks of one registration (SPEC "Conformance profile");
    /// nil members keep the deployment's defaults.
    struct RegistrationRequest: Sendable {
        var userVerification: VerificationPolicy.UserVerification? = nil
        var attestation: AttestationConveyance? = nil
        var authenticatorAttachment: String? = nil
        var extensions: JSONValue? = nil
    }

    /// A requested user verification never weakens a deployment that requires it.
    func userVerification(_ asked: VerificationPolicy.UserVerification?) -> VerificationPolicy.UserVerification? {
        login.userVerification(asked)
    }

    /// `conditional`: options for conditional create (SPEC: `{"mediation":"conditional"}` with a session
    /// or a recovery token); `request`: the conformance profile's options request. One read (an
    /// existing account with its passkeys and, with a step-up, whether it can still be redeemed; a
    /// new account's username; the conformance profile's account by name, then that), no write.
    /// `preloaded`: the account as the caller's resolution read it (`PreloadedRegistration`), used
    /// when it is the account asked for and its step-up the one being redeemed; else it is read here.
    func registrationOptions(for requester: Requester, conditional: Bool = false, request: RegistrationRequest? = nil,
                             preloaded: PreloadedRegistration? = nil) throws(ServiceError) -> CreationOptions {
        var purpose = RegistrationPurpose.addToAccount
        var held = Hold.notHeld
        var redeeming: StepUpRedemption? = nil
        var ticketHash: [UInt8]? = nil
        var accountId: String? = nil
        var names: (username: String, displayName: String)? = nil
        switch requester {
        case .newAccount(let username, let displayName):
            if try storage({ () throws(StorageError) in try store.user(username: username) }) != nil {
                throw ServiceError(.conflict, "that username is taken")
            }
            names = (username, displayName)
        case .user(let id, let hold, let r):
            accountId = id
            held = hold
            redeeming = r
        case .ticket(let ticket):
            accountId = ticket.userId
            held = ticket.holds ? .held : .ifAccountHasPasskeys
            ticketHash = ticket.hash
        case .named(let username, let displayName):
            accountId = try storage { () throws(StorageError) in try store.user(username: username) }?.id
            if accountId == nil { names = (username, displayName) }
        case .recovery(let r):
            accountId = r.userId
            purpose = .recovery(id: r.id)
        }
        let user: UserRecord
        var existing: [CredentialDescriptor] = []
        if let accountId {
            let account: RegistrationAccount?
            if let preloaded, preloaded.stepUpJTI == redeeming?.jti, preloaded.account.map({ $0.user.id == accountId }) ?? true {
                account = preloaded.account
            } else {
                account = try storage { () throws(StorageError) in try store.registrationAccount(id: accountId, redeeming: redeeming) }
            }
            guard let found = account else { throw ServiceError.unauthorized }
            // SPEC "Assurance": a step-up used already, or whose key was revoked since, approves
            // nothing — refused here as the change's own statement would refuse it.
            if let redeeming, !found.stepUpRedeemable || redeeming.userId != found.user.id {
                throw ServiceError(StorageError.conflict(.stepUpUsed))
            }
            user = found.user
            existing = found.credentials.map { CredentialDescriptor(id: $0.id, transports: $0.transports) }
        } else if let names {
            // Created only when the registration verifies: until then it exists only in the sealed state.
            user = UserRecord(id: runtime.identifier(), userHandle: runtime.random(32), username: names.username, displayName: names.displayName)
            purpose = .signUp
        } else {
            throw ServiceError(.internalError, "a registration for no account")
        }
        // SPEC "Assurance" Limits: a full account gets no more options (a flood of passkeys would
        // also swell every options body and signal list).
        guard existing.count < policy.maxPasskeys else {
            throw ServiceError(.conflict, "this account has \(existing.count) passkeys, the most it may hold; revoke one first")
        }
        // A held passkey signs in but approves nothing until its registration + LATCHKEY_RECOVERY_DELAY
        // (SPEC "Assurance").
        switch held {
        case .held: purpose = .held
        case .ifAccountHasPasskeys where !existing.isEmpty: purpose = .held
        default: break
        }
        var ceremonyRequest = RegistrationCeremony.Request(extensions: Self.creationExtensions)
        if let request {
            // A conformance options request keeps the extensions it asks for; PRF is asked for beside them.
            var extensions = Self.creationExtensions
            if case .object(var asked)? = request.extensions {
                if !asked.contains(where: { $0.key == "prf" }) { asked.append(("prf", .object([]))) }
                extensions = .object(asked)
            }
            ceremonyRequest = RegistrationCeremony.Request(
                algorithms: Self.conformanceAlgorithms, userVerification: userVerification(request.userVerification),
                attestation: request.attestation, authenticatorAttachment: request.authenticatorAttachment, extensions: extensions)
        }
        let sealed = SealedRegistration(
            userVerification: ceremonyRequest.userVerification ?? registration.userVerification, purpose: purpose, conditional: conditional,
            conformanceAlgorithms: request != nil, account: user.id,
            newAccount: purpose == .signUp ? SealedRegistration.NewAccount(userHandle: user.userHandle, username: user.username,
                                                                            displayName: user.displayName) : nil,
            ticketHash: ticketHash, stepUp: redeeming.map { SealedRegistration.StepUp(jti: $0.jti, actionHash: $0.actionHash) },
            expiresAt: challengeExpiry(), random: runtime.random(32))
        guard let plaintext = sealed.plaintext() else { throw ServiceError(.internalError, "a registration state too long to seal") }
        let (options, _) = registration.begin(
            user: UserEntity(id: user.userHandle, name: user.username, displayName: user.displayName), account: user.id,
            purpose: purpose, excludeCredentials: existing, request: ceremonyRequest, conditional: conditional,
            challenge: try seal.seal(plaintext, rpId: relyingParty.id))
        return options
    }

    /// SPEC "Portability": every registration asks whether the passkey can evaluate PRF (the vault's
    /// key derivation); `credProps` is the core's own.
    static let creationExtensions: JSONValue = .object([("prf", .object([]))])

    /// `userAgent`: the registering request's, for the name of a passkey whose AAGUID names no
    /// provider (`DeviceName`). `language`: the language the request asked for (`Accept-Language`),
    /// remembered for the account's mail by the registration's one statement. `dpop`: the request's
    /// DPoP proof, which binds the session (SPEC "Sender-constrained tokens"), its `jti` recorded by
    /// that statement too.
    func verifyRegistration(_ body: [UInt8], userAgent: String? = nil, language: String? = nil,
                            dpop: DPoPBinding? = nil) throws(ServiceError) -> SignedIn {
        try observed("registration") { () throws(ServiceError) in
            try finishRegistration(body, userAgent: userAgent, language: language, dpop: dpop)
        }
    }

    /// The challenge of a registration response opened: not sealed here, for another ceremony or
    /// relying party → `challenge_invalid`, nothing read or written.
    func openRegistration(_ challenge: [UInt8]) throws(ServiceError) -> SealedRegistration {
        let length = challenge.count - CeremonySeal.overhead
        guard length >= SealedRegistration.fixedLength, length <= SealedRegistration.maxPlaintextLength else {
            throw ServiceError(.challengeInvalid, "unknown challenge")
        }
        return try SealedRegistration(plaintext: seal.open(challenge, plaintextLength: length, rpId: relyingParty.id))
    }

    /// SPEC "Rules that must hold" → Challenges: the challenge opened, then one read
    /// (`PasskeyStore.registrationRead`) — a challenge used before or expired ends there
    /// (the saved-retry answer, else `challenge_invalid`), nothing written — then the decision, pure
    /// (`decideRegistration`), and one write (`PasskeyStore.finishRegistration`): the passkey
    /// with the challenge's use, or, when any check failed, the challenge's use alone.
    ///
    /// No transaction holds the read and the write together: every fact of the read that another
    /// request could change before the write is checked again by the write itself — the challenge's
    /// single use (its id's primary key), the ticket and the step-up (used only while unused), the
    /// recovery (completed only while pending and due), the username and the credential id (unique
    /// constraints). A transaction at READ COMMITTED would see no more than that (each statement
    /// takes its own snapshot); what it could add, row locks taken by the read, would make
    /// registrations wait on each other for a passkey limit that options opened in parallel can
    /// exceed by at most one.
    private func finishRegistration(_ body: [UInt8], userAgent: String?, language: String?, dpop: DPoPBinding?) throws(ServiceError) -> SignedIn {
        let parsed: ParsedRegistration
        do { parsed = try ParsedRegistration(bytes: body) } catch { throw ServiceError(error) }
        let sealed = try openRegistration(parsed.clientData.challenge)
        let challenge = UsedChallenge(id: sealed.id, expiresAt: sealed.expiresAt)
        var recoveryId: String? = nil
        if case .recovery(let id) = sealed.purpose { recoveryId = id }
        let read = try storage { () throws(StorageError) in
            try store.registrationRead(challenge, account: sealed.newAccount == nil ? sealed.account : nil, username: sealed.newAccount?.username,
                                          credentialId: Self.registeredCredentialId(parsed), digest: Self.registrationDigest(parsed),
                                          recoveryId: recoveryId)
        }
        let expired = sealed.expiresAt <= runtime.now() || !read.live
        if read.used || expired {
            if let saved = read.registered { throw savedRetry(saved) }
            throw ServiceError(.challengeInvalid, expired ? "challenge expired" : "challenge already used")
        }
        let write: RegistrationWrite
        var decided: DecidedRegistration? = nil
        var refusal: ServiceError? = nil
        do throws(ServiceError) {
            let d = try decideRegistration(parsed, sealed: sealed, read: read, userAgent: userAgent, language: language, dpop: dpop)
            decided = d
            write = .register(d.registration)
        } catch {
            refusal = error
            write = .refused
        }
        let written: RegistrationWritten
        do {
            written = try store.finishRegistration(challenge, write)
        } catch .conflict(.usernameTaken) {
            throw ServiceError(.conflict, "that username is taken")
        } catch .conflict(.credentialExists) {
            throw ServiceError(.credentialExists, "this passkey is already registered")
        } catch {
            throw ServiceError(error)
        }
        switch written {
        case .challengeUnusable: throw ServiceError(.challengeInvalid, "unknown, already used or expired challenge")
        case .refused: throw refusal ?? ServiceError(.internalError, "a refused registration without its reason")
        case .recoveryEnded: throw ServiceError(.unauthorized, "the recovery was cancelled, completed or expired")
        case .ticketUsed: throw ServiceError(.challengeInvalid, "the enrolment ticket was used by another registration")
        case .stepUpUsed: throw ServiceError(StorageError.conflict(.stepUpUsed))
        case .proofReplayed: throw SessionDPoP.replayed
        case .registered(let revoked):
            guard let decided else { throw ServiceError(.internalError, "a registration written without its decision") }
            if let revoked {
                // Refused here at once; every other instance within a second (RevokedSessions' feed).
                sessions.ended(revoked.sessions)
                for id in revoked.passkeys { assertion.keyCache.forget(id) }
            }
            let record = decided.registration.credential
            let issued = try sessions.issue(decided.session, authentication: .passkey(userVerified: decided.userVerified,
                                                                                      hardware: record.hardwareBound))
            // The Signal API's accepted ids as the statement left them: the account's live ones, less
            // any a completed recovery revoked, and the new one (the newest).
            let gone = Set(revoked?.passkeys ?? [])
            let accepted = (decided.registration.newUser == nil ? read.accepted.filter { !gone.contains($0) } : []) + [record.id]
            return signedIn(user: decided.user, passkey: record, tokens: issued, accepted: accepted)
        }
    }

    /// SPEC "Portability": the client extension results say `"prf":{"enabled":true}`. Only that flag
    /// is kept; anything else a client puts there (PRF results included) is never stored.
    static func prfEnabled(_ results: JSONValue) -> Bool {
        results["prf"]?["enabled"]?.boolValue == true
    }

    /// A registration decided: the statement's content, and what the answer needs.
    struct DecidedRegistration {
        let registration: NewRegistration
        let user: UserRecord
        let session: SessionService.Pending
        let userVerified: Bool
    }

    /// The checks of a registration once its read is in, in SPEC's order: the account, §7.1 steps
    /// 5–25 (`RegistrationCeremony.finish`), the passkey limit, the username and credential id
    /// (step 26), the recovery; then the passkey, its audit line, events, notice and session.
    /// Pure: time, ids and randomness from `runtime`, the rest from memory.
    private func decideRegistration(_ parsed: ParsedRegistration, sealed: SealedRegistration, read: RegistrationRead, userAgent: String?,
                                    language: String?, dpop: DPoPBinding?) throws(ServiceError) -> DecidedRegistration {
        let user: UserRecord
        var newUser: UserRecord? = nil
        if let n = sealed.newAccount {
            user = UserRecord(id: sealed.account, userHandle: n.userHandle, username: n.username, displayName: n.displayName)
            newUser = user
        } else if let account = read.account, account.id == sealed.account {
            user = account
        } else {
            throw ServiceError(.challengeInvalid, "the ceremony's account no longer exists")
        }
        let state = RegistrationState(challenge: parsed.clientData.challenge, rpId: relyingParty.id, userVerification: sealed.userVerification,
                                      algorithms: sealed.conformanceAlgorithms ? Self.conformanceAlgorithms : Self.offeredAlgorithms,
                                      user: UserEntity(id: user.userHandle, name: user.username, displayName: user.displayName),
                                      account: user.id, purpose: sealed.purpose, conditional: sealed.conditional)
        let verified: VerifiedRegistration
        let verification = currentPolicy()
        do { verified = try registration.finish(parsed, state: state, policy: verification) } catch { throw ServiceError(error) }
        if newUser == nil {
            // SPEC "Assurance" Limits, again at the finish: options opened in parallel cannot overfill an account.
            guard read.accepted.count < policy.maxPasskeys else { throw ServiceError(.conflict, "this account holds the most passkeys it may") }
        } else if read.usernameTaken {
            throw ServiceError(.conflict, "that username is taken")
        }
        guard !read.credentialKnown else { throw ServiceError(.credentialExists, "this passkey is already registered") }
        // A registration with a recovery token completes the recovery in the same statement: every
        // other session, every device key (and, under LATCHKEY_RECOVERY_REVOKES=all, the old
        // passkeys) revoked; the new session's method is `recovery`.
        var completing: RecoveryCompletion? = nil
        if case .recovery(let id) = sealed.purpose {
            guard let r = read.recovery, r.id == id, r.userId == user.id, r.status == .pending else {
                throw ServiceError(.unauthorized, "the recovery was cancelled, completed or expired")
            }
            completing = recovery.completion(of: r)
        }
        let aaguid = formatUUID(verified.aaguid)
        let now = runtime.now()
        let record = CredentialRecord(
            id: verified.credentialId, userId: user.id, publicKey: verified.publicKeyBytes, alg: verified.algorithm.rawValue,
            signCount: Int64(verified.signCount), aaguid: verified.aaguid, transports: verified.transports,
            backupEligible: verified.backupEligible, backedUp: verified.backedUp, attestationFormat: verified.format,
            attestationType: verified.attestationType.rawValue, name: verified.metadata?.description ?? providerName(aaguid: verified.aaguid, formatted: aaguid)
                ?? DeviceName.from(userAgent: userAgent, createdAt: now),
            createdAt: now, approvesFrom: holdEnd(state.purpose),
            hardwareBound: HardwareKey.proven(by: verified, askedForAttestation: policy.attestation != .none, anchored: !verification.trustAnchors.isEmpty),
            prfEnabled: Self.prfEnabled(parsed.response.clientExtensionResults))
        let audit = AuditRecord(.passkeyRegistered, actor: user.id, subject: user.id, detail: [
            ("credentialId", .string(Base64URL.encode(verified.credentialId))), ("aaguid", .string(aaguid)),
            ("format", .string(verified.format)), ("origin", .string(verified.origin)),
        ] + (verified.metadata.map { [("metadata", metadataMatchJSON($0))] } ?? [])
          + (record.approvesFrom.map { [("approvesFrom", .string(iso8601($0)))] } ?? []))
        // SPEC "Assurance": the verified address hears of the new passkey, in the account's
        // language; a held one's mail carries the cancel link that revokes it (and its sessions)
        // without a session.
        var notices: [MailToSend] = []
        var cancelToken: NewCancelToken? = nil
        if newUser == nil, let to = read.email.flatMap({ EmailAddress($0) }) {
            var held: (until: Date, link: String)? = nil
            if let until = record.approvesFrom {
                let cancel = OpaqueSecret(prefix: RecoveryService.cancelTokenPrefix + "pk_", runtime: runtime)
                cancelToken = NewCancelToken(hash: cancel.hash, userId: user.id, credentialId: record.id, expiresAt: until)
                held = (until, mail.cancelLink(cancel.token))
            }
            let name = record.name
            notices.append(mail.compose(.passkeyAdded, to: to, userId: user.id, language: read.language) { l in
                let body = l[.addedBody, ["name": name]]
                    + (held.map { "\n" + l[.addedHeld, ["date": l.dateTime($0.until), "link": $0.link]] } ?? "\n" + l[.addedNotHeld])
                return (l[.addedSubject], body)
            })
        }
        let session = sessions.prepare(userId: user.id, credentialId: verified.credentialId, method: completing == nil ? .passkey : .recovery,
                                       dpop: dpop)
        let events = (newUser.map { [self.events.userCreated(userId: $0.id, username: $0.username)] } ?? [])
            + [self.events.passkey(.passkeyCreated, record)]
        let registration = NewRegistration(
            newUser: newUser, credential: record, session: session.record, audit: audit, events: events, completing: completing, mail: notices,
            cancelToken: cancelToken, registrationDigest: Self.registrationDigest(parsed), ticketHash: sealed.ticketHash,
            redeeming: sealed.stepUp.map { StepUpRedemption(jti: $0.jti, userId: user.id, actionHash: $0.actionHash) }, language: language)
        return DecidedRegistration(registration: registration, user: user, session: session, userVerified: verified.userVerified)
    }

    /// When a held registration's passkey starts to approve: now (its registration) +
    /// LATCHKEY_RECOVERY_DELAY; nil when it is not held or there is no delay (dev mode).
    func holdEnd(_ purpose: RegistrationPurpose) -> Date? {
        guard purpose == .held, policy.recoveryDelaySeconds > 0 else { return nil }
        return Date(timeIntervalSince1970: Double(runtime.unixTime + Int64(policy.recoveryDelaySeconds)))
    }
}
