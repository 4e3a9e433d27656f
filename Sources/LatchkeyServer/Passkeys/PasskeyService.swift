import Tokens
import Foundation
import Crypto
import JSON
import Storage
import WebAuthn

/// Passkey ceremonies (SPEC "HTTP contract") and the user's passkey list. Stateless: a
/// registration's state (the core's `RegistrationState`) is kept in a challenge row in PostgreSQL,
/// a sign-in's is sealed into its challenge (`SealedAuthentication`), so any instance can finish
/// what another began.
public final class PasskeyService: Sendable {
    let accounts: AccountRepository
    let challenges: ChallengeRepository
    /// A sign-in's one read and one write.
    let logins: LoginRepository
    /// The ceremony-sealing key a sign-in's challenge is sealed under.
    let seal: CeremonySeal
    let sessions: SessionService
    let assertion: PasskeyAssertion
    let origins: OriginCache
    let metrics: Metrics
    let metadata: MetadataStore
    let configuration: Configuration
    let runtime: Runtime
    let decoySecret: DeploymentSecret
    let events: OutboxEvents
    /// The recovery feature's part in registration: notices' address, completing a recovery (SPEC "Recovery").
    let recovery: any AccountRecovery
    /// The owner hears of every passkey added or revoked (SPEC "Assurance").
    let mail: MailService
    let registration: RegistrationCeremony
    let authentication: AuthenticationCeremony
    /// The deployment's verification policy, built once; each ceremony copies it with the current allowlist.
    let policyTemplate: VerificationPolicy

    /// What the options offer (SPEC: −7, −8, −257 at least); verification refuses anything else.
    static let offeredAlgorithms: [COSEAlgorithm] = [.es256, .edDSA, .es384, .es512, .ps256, .rs256]
    /// The conformance profile's options offer every algorithm Latchkey verifies, RS1 included (SPEC).
    static let conformanceAlgorithms: [COSEAlgorithm] = [.es256, .edDSA, .ed25519, .es384, .es512, .ps256, .ps384, .ps512,
                                                         .rs256, .rs384, .rs512, .rs1]

    init(accounts: AccountRepository, challenges: ChallengeRepository, logins: LoginRepository, seal: CeremonySeal,
         sessions: SessionService, assertion: PasskeyAssertion,
         origins: OriginCache, metrics: Metrics, metadata: MetadataStore, decoySecret: DeploymentSecret, events: OutboxEvents,
         recovery: any AccountRecovery, mail: MailService, configuration: Configuration, runtime: Runtime) {
        self.mail = mail
        self.events = events
        self.recovery = recovery
        self.accounts = accounts
        self.challenges = challenges
        self.logins = logins
        self.seal = seal
        self.sessions = sessions
        self.assertion = assertion
        self.origins = origins
        self.metrics = metrics
        self.metadata = metadata
        self.decoySecret = decoySecret
        self.configuration = configuration
        self.runtime = runtime
        registration = RegistrationCeremony(
            rp: RelyingParty(id: configuration.rpId, name: configuration.rpName), algorithms: Self.offeredAlgorithms,
            userVerification: configuration.userVerification, attestation: configuration.attestation,
            timeoutSeconds: configuration.challengeTTL, hints: configuration.hints, environment: runtime.ceremonies)
        authentication = AuthenticationCeremony(rpId: configuration.rpId, userVerification: configuration.userVerification,
                                                timeoutSeconds: configuration.challengeTTL, hints: configuration.hints,
                                                environment: runtime.ceremonies)
        policyTemplate = CeremonyRules.verificationPolicy(configuration)
    }

    /// The policy for one ceremony: the template with the allowlist and the metadata as they are now.
    /// `conformance`: a ceremony of the conformance profile's endpoints, where (only) an assertion's
    /// UP flag may be clear.
    func currentPolicy(conformance: Bool = false) -> VerificationPolicy {
        var p = policyTemplate
        p.origins = origins.policy()
        p.metadata = metadata.policy()
        p.acceptAssertionsWithoutUserPresence = conformance && configuration.conformance
        return p
    }

    /// A passkey's provider name: the metadata statement's `description` when the BLOB in use has
    /// one for its AAGUID, else the community AAGUID table's name.
    /// `formatted`: `formatUUID(aaguid)` when the caller has it already.
    func providerName(aaguid: [UInt8], formatted: String? = nil) -> String? {
        metadata.description(aaguid: aaguid) ?? PasskeyProviders.name(aaguid: formatted ?? formatUUID(aaguid))
    }

    // MARK: Registration

    public enum Requester: Sendable {
        case newAccount(username: String, displayName: String)
        /// Signed in (Bearer) or vouched for (enrolment ticket): another passkey for that account.
        /// `held`: whether the new passkey approves nothing until registration + LATCHKEY_RECOVERY_DELAY
        /// (SPEC "Assurance"); `redeeming`: the `latchkey.passkey.add` step-up the options request used.
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
        configuration.userVerification == .required ? .required : asked
    }

    /// `conditional`: options for conditional create (SPEC: `{"mediation":"conditional"}` with a session
    /// or a recovery token); `request`: the conformance profile's options request.
    func registrationOptions(for requester: Requester, conditional: Bool = false,
                             request: RegistrationRequest? = nil) throws(ServiceError) -> JSONValue {
        var purpose = RegistrationPurpose.addToAccount
        var held = Hold.notHeld
        var redeeming: StepUpRedemption? = nil
        var ticketHash: [UInt8]? = nil
        let user: UserRecord
        let isNew: Bool
        switch requester {
        case .newAccount(let username, let displayName):
            if try storage({ () throws(StorageError) in try accounts.user(username: username) }) != nil {
                throw ServiceError(.conflict, "that username is taken")
            }
            // Created only when the registration verifies: until then it exists only in the ceremony state.
            user = UserRecord(id: runtime.identifier(), userHandle: runtime.random(32), username: username, displayName: displayName)
            isNew = true
            purpose = .signUp
        case .user(let id, let hold, let r):
            guard let u = try storage({ () throws(StorageError) in try accounts.user(id: id) }) else { throw ServiceError.unauthorized }
            user = u
            isNew = false
            held = hold
            redeeming = r
        case .ticket(let ticket):
            guard let u = try storage({ () throws(StorageError) in try accounts.user(id: ticket.userId) }) else { throw ServiceError.unauthorized }
            user = u
            isNew = false
            held = ticket.holds ? .held : .ifAccountHasPasskeys
            ticketHash = ticket.hash
        case .named(let username, let displayName):
            if let u = try storage({ () throws(StorageError) in try accounts.user(username: username) }) {
                user = u
                isNew = false
            } else {
                user = UserRecord(id: runtime.identifier(), userHandle: runtime.random(32), username: username, displayName: displayName)
                isNew = true
                purpose = .signUp
            }
        case .recovery(let r):
            guard let u = try storage({ () throws(StorageError) in try accounts.user(id: r.userId) }) else { throw ServiceError.unauthorized }
            user = u
            isNew = false
            purpose = .recovery(id: r.id)
        }
        let existing = isNew ? [] : try storage { () throws(StorageError) in try accounts.credentials(userId: user.id) }
        // SPEC "Assurance" Limits: a full account gets no more options (a flood of passkeys would
        // also swell every options body and signal list).
        guard existing.count < configuration.maxPasskeys else {
            throw ServiceError(.conflict, "this account has \(existing.count) passkeys, the most it may hold; revoke one first")
        }
        // A held passkey signs in but approves nothing until its registration + LATCHKEY_RECOVERY_DELAY
        // (SPEC "Assurance").
        switch held {
        case .held: purpose = .held
        case .ifAccountHasPasskeys where !existing.isEmpty: purpose = .held
        default: break
        }
        var ceremonyRequest = RegistrationCeremony.Request()
        if let request {
            ceremonyRequest = RegistrationCeremony.Request(
                algorithms: Self.conformanceAlgorithms, userVerification: userVerification(request.userVerification),
                attestation: request.attestation, authenticatorAttachment: request.authenticatorAttachment, extensions: request.extensions)
        }
        let (options, state) = registration.begin(
            user: UserEntity(id: user.userHandle, name: user.username, displayName: user.displayName), account: user.id,
            purpose: purpose, excludeCredentials: existing.map(CredentialDescriptor.init), request: ceremonyRequest,
            conditional: conditional)
        try storage { () throws(StorageError) in
            try challenges.insert(hash: Digest.sha256(options.challenge), kind: .registration, userId: isNew ? nil : user.id,
                                  rpId: configuration.rpId, state: state.encoded(), ttlSeconds: configuration.challengeTTL,
                                  redeeming: redeeming, ticketHash: ticketHash)
        }
        return options.json
    }

    /// `userAgent`: the registering request's, for the name of a passkey whose AAGUID names no provider (`DeviceName`).
    func verifyRegistration(_ body: [UInt8], userAgent: String? = nil) throws(ServiceError) -> SignedIn {
        try observed("registration") { () throws(ServiceError) in try finishRegistration(body, userAgent: userAgent) }
    }

    private func finishRegistration(_ body: [UInt8], userAgent: String?) throws(ServiceError) -> SignedIn {
        let parsed: ParsedRegistration
        do { parsed = try ParsedRegistration(bytes: body) } catch { throw ServiceError(error) }
        // SPEC: the challenge is found and consumed first; any later failure still uses it up.
        let challenge = parsed.clientData.challenge
        guard challenge.count >= 16, challenge.count <= 64 else { throw ServiceError(.challengeInvalid, "unknown challenge") }
        let consumed = try storage { () throws(StorageError) in try challenges.consume(hash: Digest.sha256(challenge)) }
        if consumed == nil { try refuseSavedRetry(parsed) }
        let stored = try CeremonyRules.live(consumed, kind: .registration, rpId: configuration.rpId)
        let state: RegistrationState
        do { state = try RegistrationState(decoding: stored.state) } catch { throw ServiceError(error) }
        let verified: VerifiedRegistration
        let policy = currentPolicy()
        do { verified = try registration.finish(parsed, state: state, policy: policy) } catch { throw ServiceError(error) }

        let user: UserRecord
        var newUser: UserRecord? = nil
        if state.isNewAccount, let id = state.account {
            user = UserRecord(id: id, userHandle: state.user.id, username: state.user.name, displayName: state.user.displayName)
            newUser = user
        } else if let id = stored.userId, let u = try storage({ () throws(StorageError) in try accounts.user(id: id) }) {
            user = u
        } else {
            throw ServiceError(.challengeInvalid, "the ceremony's account no longer exists")
        }
        if newUser == nil {
            // SPEC "Assurance" Limits, again at the finish: options opened in parallel cannot overfill an account.
            let held = try storage { () throws(StorageError) in try accounts.credentials(userId: user.id) }.count
            guard held < configuration.maxPasskeys else { throw ServiceError(.conflict, "this account holds the most passkeys it may") }
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
            hardwareBound: HardwareKey.proven(by: verified, askedForAttestation: configuration.attestation != .none, anchored: !policy.trustAnchors.isEmpty))
        let audit = AuditRecord(.passkeyRegistered, actor: user.id, subject: user.id, detail: [
            ("credentialId", .string(Base64URL.encode(verified.credentialId))), ("aaguid", .string(aaguid)),
            ("format", .string(verified.format)), ("origin", .string(verified.origin)),
        ] + (verified.metadata.map { [("metadata", metadataMatchJSON($0))] } ?? [])
          + (record.approvesFrom.map { [("approvesFrom", .string(iso8601($0)))] } ?? []))
        // A registration with a recovery token completes the recovery in the same transaction:
        // every other session, every device key (and, under LATCHKEY_RECOVERY_REVOKES=all, the old
        // passkeys) revoked; the new session's method is `recovery`.
        var completing: RecoveryCompletion? = nil
        if case .recovery(let id) = state.purpose {
            completing = try recovery.completion(recoveryId: id, userId: user.id)
        }
        // SPEC "Assurance": the verified address hears of the new passkey; a held one's mail carries
        // the cancel link that revokes it (and its sessions) without a session.
        var notices: [MailToSend] = []
        var cancelToken: NewCancelToken? = nil
        if newUser == nil, let to = try recovery.verifiedAddress(userId: user.id) {
            var held: (until: Date, link: String)? = nil
            if let until = record.approvesFrom {
                let cancel = OpaqueSecret(prefix: RecoveryService.cancelTokenPrefix + "pk_", runtime: runtime)
                cancelToken = NewCancelToken(hash: cancel.hash, userId: user.id, credentialId: record.id, expiresAt: until)
                held = (until, mail.cancelLink(cancel.token))
            }
            let name = record.name
            notices.append(mail.compose(.passkeyAdded, to: to, userId: user.id) { l in
                let body = l[.addedBody, ["name": name]]
                    + (held.map { "\n" + l[.addedHeld, ["date": l.dateTime($0.until), "link": $0.link]] } ?? "\n" + l[.addedNotHeld])
                return (l[.addedSubject], body)
            })
        }
        // The account (if new), the passkey, the session, the audit line, the events and the notice: one transaction.
        let session = sessions.prepare(userId: user.id, credentialId: verified.credentialId, method: completing == nil ? .passkey : .recovery)
        let written = (newUser.map { [events.userCreated(userId: $0.id, username: $0.username)] } ?? [])
            + [events.passkey(.passkeyCreated, record)]
        do {
            let revoked = try accounts.register(newUser: newUser, credential: record, session: session.record, audit: audit, events: written,
                                                completing: completing, mail: notices, cancelToken: cancelToken,
                                                registrationDigest: Self.registrationDigest(parsed), redeemingTicket: stored.ticketHash)
            if let revoked {
                // Refused here at once; every other instance within a second (RevokedSessions' feed).
                sessions.ended(revoked.sessions)
                for id in revoked.passkeys { assertion.keyCache.forget(id) }
            }
        } catch .notFound where completing != nil {
            throw ServiceError(.unauthorized, "the recovery was cancelled, completed or expired")
        } catch .notFound where stored.ticketHash != nil {
            throw ServiceError(.challengeInvalid, "the enrolment ticket was used by another registration")
        } catch .conflict(.usernameTaken) {
            throw ServiceError(.conflict, "that username is taken")
        } catch .conflict(.credentialExists) {
            throw ServiceError(.credentialExists, "this passkey is already registered")
        } catch {
            throw ServiceError(error)
        }
        let issued = try sessions.issue(session, authentication: .passkey(userVerified: verified.userVerified, hardware: record.hardwareBound))
        let accepted = newUser != nil ? [record.id]
            : try storage { () throws(StorageError) in try accounts.credentials(userId: user.id) }.map(\.id)
        return signedIn(user: user, passkey: record, tokens: issued, accepted: accepted)
    }

    /// When a held registration's passkey starts to approve: now (its registration) +
    /// LATCHKEY_RECOVERY_DELAY; nil when it is not held or there is no delay (dev mode).
    func holdEnd(_ purpose: RegistrationPurpose) -> Date? {
        guard purpose == .held, configuration.recoveryDelaySeconds > 0 else { return nil }
        return Date(timeIntervalSince1970: Double(runtime.unixTime + Int64(configuration.recoveryDelaySeconds)))
    }

    // MARK: Shared

    /// Counts each ceremony's outcome ("ok" or the error code) in /metrics.
    func observed<Answer>(_ ceremony: String, _ body: () throws(ServiceError) -> Answer) throws(ServiceError) -> Answer {
        do {
            let result = try body()
            metrics.observeCeremony(ceremony, outcome: "ok")
            return result
        } catch {
            metrics.observeCeremony(ceremony, outcome: error.code.rawValue)
            throw error
        }
    }

    /// SPEC's passkey shape.
    func passkeyJSON(_ c: CredentialRecord) -> JSONValue { JSONObjectWriter.value(capacity: 320) { writePasskey(c, into: &$0) } }

    /// `passkeyJSON`'s members, written into an object (the one definition of the shape).
    func writePasskey(_ c: CredentialRecord, into writer: inout JSONObjectWriter) {
        let aaguid = formatUUID(c.aaguid)
        // SPEC "Assurance": a held passkey signs in but approves nothing until `heldUntil` (shown only while held).
        if let from = c.approvesFrom, from > runtime.now() { writer.member("heldUntil", string: iso8601(from)) }
        writer.member("id", string: Base64URL.encode(c.id))
        writer.member("name", string: c.name)
        writer.member("provider", optionalString: providerName(aaguid: c.aaguid, formatted: aaguid))
        writer.member("aaguid", string: aaguid)
        writer.member("createdAt", string: iso8601(c.createdAt))
        writer.member("lastUsedAt", optionalString: c.lastUsedAt.map(iso8601))
        writer.member("backupEligible", bool: c.backupEligible)
        writer.member("backedUp", bool: c.backedUp)
        writer.member("transports", strings: c.transports)
        writer.member("flagged", bool: c.flagged)
    }

    /// The answer to a finished passkey ceremony, registration or login (SPEC: `user`, `passkey`,
    /// `tokens`, `signals`), written without a JSON tree: it is the body of every login.
    struct SignedIn {
        let userId: String
        let body: [UInt8]

        /// The same answer as a tree (the conformance profile picks members out of it).
        var json: JSONValue { JSONObjectWriter.tree(of: body) }
    }

    func signedIn(user: UserRecord, passkey: CredentialRecord, tokens: SessionService.Issued, accepted: [[UInt8]]) -> SignedIn {
        var writer = JSONObjectWriter(capacity: 1024 + tokens.accessToken.utf8.count + 48 * accepted.count)
        writer.member("user") { user.write(into: &$0) }
        writer.member("passkey") { writePasskey(passkey, into: &$0) }
        writer.member("tokens") { tokens.write(into: &$0) }
        Signals.writeCurrent(as: "signals", rpId: configuration.rpId, user: user, credentialIds: accepted, into: &writer)
        return SignedIn(userId: user.id, body: writer.finish())
    }
}
