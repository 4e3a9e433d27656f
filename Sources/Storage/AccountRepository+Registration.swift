import Foundation
import JSON
import PostgreSQL

/// An existing account as registration options read it: the user, its live passkeys (id and
/// transports, oldest first: the options' `excludeCredentials` and the passkey limit), and whether
/// the step-up the request brings can still be redeemed.
public struct RegistrationAccount: Sendable {
    public let user: UserRecord
    public let credentials: [CredentialDescriptorRow]
    /// The step-up's receipt is unused and its approving key live (true when there is none).
    public let stepUpRedeemable: Bool
}

/// The caller of registration options for an existing account, as its credential names it.
public enum RegistrationRequester: Sendable {
    /// A session (its token already verified); `redeeming`: the step-up presented with it.
    case session(id: String, userId: String, redeeming: StepUpRedemption?)
    /// An enrolment ticket, by its hash.
    case ticket(hash: [UInt8])
    /// A recovery token, by its hash.
    case recovery(tokenHash: [UInt8])
}

/// `AccountRepository.registrationRequester`'s one read: the caller's row (the one its case names;
/// nil: unknown, revoked, used or expired) and the account it names.
public struct RegistrationRequesterRead: Sendable {
    public var session: (record: SessionRecord, passkeyApprovesFrom: Date?, passkeyHardware: Bool)? = nil
    public var ticket: EnrolmentTicket? = nil
    public var recovery: (record: RecoveryRecord, now: Date)? = nil
    public var account: RegistrationAccount?

    public init(account: RegistrationAccount?) { self.account = account }
}

/// A passkey as `excludeCredentials` names it.
public struct CredentialDescriptorRow: Sendable, Equatable {
    public let id: [UInt8]
    public let transports: [String]
}

/// What a registration verify reads, in one query, before it decides: the challenge's use, the
/// response's own credential id, the account (an existing one's), everything the passkey, the
/// notice and the signals need, and the recovery the registration completes.
public struct RegistrationRead: Sendable {
    /// The challenge's id is in `used_challenges` already.
    public let used: Bool
    /// The challenge is live by the database's clock.
    public let live: Bool
    /// The live passkey this very response registered (its clientDataJSON's digest), with its
    /// owner: a retry whose first try committed.
    public let registered: CredentialRecord?
    /// A credential with the response's id exists, live or revoked: it cannot be registered again.
    public let credentialKnown: Bool
    /// The new account's username is taken.
    public let usernameTaken: Bool
    /// The existing account the ceremony was for (nil: a new account, or it no longer exists).
    public let account: UserRecord?
    /// The account's language (`users.language`), for the notice.
    public let language: String?
    /// The account's verified address, where the notice goes.
    public let email: String?
    /// The account's live passkey ids, oldest first.
    public let accepted: [[UInt8]]
    /// The recovery the registration completes, when it is the account's (in whatever state).
    public let recovery: RecoveryRecord?
}

/// A registration as its verify writes it, in one statement (`AccountRepository.finishRegistration`).
public struct NewRegistration: Sendable {
    /// A new account: created with the passkey.
    public var newUser: UserRecord?
    public var credential: CredentialRecord
    public var session: NewSession
    public var audit: AuditRecord
    public var events: [OutboxEvent]
    /// A registration with a recovery token completes that recovery.
    public var completing: RecoveryCompletion?
    public var mail: [MailToSend]
    /// A held passkey's cancel link.
    public var cancelToken: NewCancelToken?
    /// SHA-256 of the registering response's clientDataJSON (the saved-retry answer).
    public var registrationDigest: [UInt8]?
    /// The enrolment ticket the options request presented: used up here.
    public var ticketHash: [UInt8]?
    /// The `latchkey.passkey.add` step-up the options request presented: redeemed here.
    public var redeeming: StepUpRedemption?
    /// The language the request asked for (the account's mail language from now on).
    public var language: String?

    public init(newUser: UserRecord?, credential: CredentialRecord, session: NewSession, audit: AuditRecord, events: [OutboxEvent] = [],
                completing: RecoveryCompletion? = nil, mail: [MailToSend] = [], cancelToken: NewCancelToken? = nil,
                registrationDigest: [UInt8]? = nil, ticketHash: [UInt8]? = nil, redeeming: StepUpRedemption? = nil, language: String? = nil) {
        self.newUser = newUser
        self.credential = credential
        self.session = session
        self.audit = audit
        self.events = events
        self.completing = completing
        self.mail = mail
        self.cancelToken = cancelToken
        self.registrationDigest = registrationDigest
        self.ticketHash = ticketHash
        self.redeeming = redeeming
        self.language = language
    }
}

/// The one statement that ends a registration verify, decided from its read.
public enum RegistrationWrite: Sendable {
    case register(NewRegistration)
    /// The verify failed: the challenge is only recorded used.
    case refused
}

/// What the registration's statement wrote.
public enum RegistrationWritten: Sendable, Equatable {
    /// Another verify of the challenge recorded it first: nothing was written.
    case challengeUnusable
    /// The challenge recorded used, nothing else.
    case refused
    /// Everything; what a completed recovery revoked.
    case registered(RecoveryRevocations?)
    /// The challenge recorded used, nothing else: the recovery was no longer pending and due.
    case recoveryEnded
    /// The challenge recorded used, nothing else: the enrolment ticket was used meanwhile.
    case ticketUsed
    /// The challenge recorded used, nothing else: the step-up was redeemed meanwhile, or the key
    /// that made it revoked.
    case stepUpUsed
    /// The challenge recorded used, nothing else: the request's DPoP proof was seen before (a
    /// replay), and a registration without the session it would bind is not written at all.
    case proofReplayed
}

extension AccountRepository {
    // MARK: Registration (SPEC "Performance targets": options write nothing, a verify is one read and one write)

    /// Registration options for an existing account: one query. Nil: no such account.
    public func registrationAccount(id: String, redeeming: StepUpRedemption?) throws(StorageError) -> RegistrationAccount? {
        try pool.run { c in try Self.registrationAccount(try c.query(Self.readingRegistrationAccount("\(id)::text", redeeming: redeeming))) }
    }

    /// Who asks for a passkey on an existing account, and that account with its live passkeys (and,
    /// with `redeeming`, whether that step-up can still be redeemed), in one round trip: the
    /// caller's statement and the account's, pipelined. The account is the one the caller names
    /// (the session's user, the ticket's, the recovery's) and is read whatever the caller turns out
    /// to be; the guard decides from the caller's row before anything of it is used.
    public func registrationRequester(_ requester: RegistrationRequester) throws(StorageError) -> RegistrationRequesterRead {
        let caller: SQL
        let account: SQL
        switch requester {
        case .session(let id, let userId, let redeeming):
            caller = SessionRepository.standing(id: id, userId: userId)
            account = Self.readingRegistrationAccount("\(userId)::text", redeeming: redeeming)
        case .ticket(let hash):
            caller = Self.readingTicket(hash: hash)
            account = Self.readingRegistrationAccount("(SELECT t.user_id FROM (\(fragment: caller)) t)", redeeming: nil)
        case .recovery(let tokenHash):
            caller = RecoveryRepository.readingRecovery(tokenHash: tokenHash)
            account = Self.readingRegistrationAccount("(SELECT r.user_id FROM recoveries r WHERE r.token_hash = \(tokenHash))", redeeming: nil)
        }
        return try pool.run { c in
            let rows = try c.pipeline([caller, account])
            var read = RegistrationRequesterRead(account: try Self.registrationAccount(rows[1]))
            switch requester {
            case .session: read.session = try rows[0].first.map(SessionRepository.standing)
            case .ticket(let hash): read.ticket = try rows[0].first.map { try Self.ticket($0, hash: hash) }
            case .recovery: read.recovery = try rows[0].first.map(RecoveryRepository.recoveryAndNow)
            }
            return read
        }
    }

    /// `registrationAccount`'s statement for the account `id` (an SQL text expression).
    static func readingRegistrationAccount(_ id: SQL, redeeming: StepUpRedemption?) -> SQL {
        let redeemable: SQL = redeeming.map { r in
            "EXISTS (SELECT 1 FROM step_up_receipts WHERE \(fragment: StepUpRedemption.redeemable(jti: r.jti, userId: r.userId, actionHash: r.actionHash)))"
        } ?? "true"
        return """
            SELECT u.id AS user_id, u.user_handle, u.username, u.display_name, c.id, c.transports::text AS transports,
                   \(fragment: redeemable) AS redeemable
            FROM users u LEFT JOIN credentials c ON c.user_id = u.id AND c.revoked_at IS NULL
            WHERE u.id = \(fragment: id)
            ORDER BY c.created_at, c.id
            """
    }

    static func registrationAccount(_ rows: [Row]) throws -> RegistrationAccount? {
        guard let first = rows.first else { return nil }
        let user = UserRecord(id: try first.string("user_id"), userHandle: try first.bytes("user_handle"),
                              username: try first.string("username"), displayName: try first.string("display_name"))
        var credentials: [CredentialDescriptorRow] = []
        for r in rows where try !r.isNull("id") {
            credentials.append(CredentialDescriptorRow(id: try r.bytes("id"), transports: try r.stringArray("transports")))
        }
        return RegistrationAccount(user: user, credentials: credentials, stepUpRedeemable: try first.bool("redeemable"))
    }

    /// A registration verify's one read (`RegistrationRead`). `account`: the existing account the
    /// ceremony was for; `username`: a new account's; `credentialId` and `digest`: the response's
    /// credential id and the SHA-256 of its clientDataJSON; `recoveryId`: the recovery it completes.
    public func registrationRead(_ challenge: UsedChallenge, account: String?, username: String?, credentialId: [UInt8], digest: [UInt8],
                                 recoveryId: String?) throws(StorageError) -> RegistrationRead {
        try pool.run { c in
            let r = try c.query("""
                SELECT EXISTS (SELECT 1 FROM used_challenges WHERE id = \(challenge.id)) AS used, \(challenge.expiresAt) > now() AS live,
                       EXISTS (SELECT 1 FROM credentials k WHERE k.id = \(credentialId)) AS credential_known,
                       (\(username)::text IS NOT NULL AND EXISTS (SELECT 1 FROM users t WHERE t.username = \(username)::text)) AS username_taken,
                       a.id AS account_id, a.user_handle AS account_handle, a.username AS account_username,
                       a.display_name AS account_display_name, a.language AS account_language,
                       (SELECT e.email FROM account_emails e WHERE e.user_id = a.id) AS account_email,
                       (SELECT string_agg(encode(k.id, 'hex'), ',' ORDER BY k.created_at, k.id) FROM credentials k
                        WHERE k.user_id = a.id AND k.revoked_at IS NULL) AS accepted,
                       r.id AS recovery_id, r.method AS recovery_method, r.not_before AS recovery_not_before,
                       r.expires_at AS recovery_expires_at, r.status AS recovery_status,
                       \(unsafeRaw: AccountRepository.loginColumns)
                FROM (VALUES (1)) AS one (x)
                     LEFT JOIN users a ON a.id = \(account)::text
                     LEFT JOIN recoveries r ON r.id = \(recoveryId)::text AND r.user_id = a.id
                     LEFT JOIN credentials c ON c.id = \(credentialId) AND c.registration_digest = \(digest) AND c.revoked_at IS NULL
                     LEFT JOIN users u ON u.id = c.user_id
                """)[0]
            let user: UserRecord? = try r.isNull("account_id") ? nil
                : UserRecord(id: try r.string("account_id"), userHandle: try r.bytes("account_handle"),
                             username: try r.string("account_username"), displayName: try r.string("account_display_name"))
            let recovery: RecoveryRecord? = try r.isNull("recovery_id") ? nil
                : RecoveryRecord(id: try r.string("recovery_id"), userId: try r.string("account_id"), method: try r.value("recovery_method"),
                                 notBefore: try r.date("recovery_not_before"), expiresAt: try r.date("recovery_expires_at"),
                                 status: try r.value("recovery_status"))
            return RegistrationRead(used: try r.bool("used"), live: try r.bool("live"),
                                    registered: try r.isNull("id") ? nil : try AccountRepository.credential(r),
                                    credentialKnown: try r.bool("credential_known"), usernameTaken: try r.bool("username_taken"),
                                    account: user, language: try r.optionalString("account_language"),
                                    email: try r.optionalString("account_email"), accepted: try r.hexList("accepted"), recovery: recovery)
        }
    }

    /// A registration verify's one write: the challenge's id recorded used (`LoginRepository.used`:
    /// a concurrent verify of the same challenge waits for this one and then writes nothing,
    /// `.challengeUnusable`), and — only with it — the registration: the ticket used up, the
    /// step-up redeemed, the recovery completed (each only while still valid, else nothing of the
    /// registration is written and the challenge stays used), the account (if new), the passkey,
    /// the session, the audit lines, the events, the notice, the cancel link and the language memo.
    /// A username or credential id taken meanwhile rolls the statement back: the challenge is then
    /// recorded used on its own and the call throws `.conflict(.usernameTaken)` or
    /// `.conflict(.credentialExists)`.
    public func finishRegistration(_ challenge: UsedChallenge, _ write: RegistrationWrite) throws(StorageError) -> RegistrationWritten {
        let used = LoginRepository.used(challenge)
        guard case .register(let registration) = write else {
            return try pool.run { c in
                try c.query(SQL.with([used], "SELECT \(fragment: LoginRepository.fresh)"))[0].bool("fresh") ? .refused : .challengeUnusable
            }
        }
        let (ctes, gates) = Self.registering(registration, after: used.name)
        var final: SQL = "SELECT \(fragment: LoginRepository.fresh), EXISTS (SELECT 1 FROM tok) AS stored"
        for gate in gates { final = "\(fragment: final), EXISTS (SELECT 1 FROM \(unsafeRaw: gate)) AS \(unsafeRaw: gate)" }
        if let completing = registration.completing { final = "\(fragment: final)\(fragment: completing.revokedColumns)" }
        do {
            return try pool.run { c in
                let row = try c.pipeline(Self.accountLock(registration) + [SQL.with([used] + ctes, final)]).last![0]
                guard try row.bool("fresh") else { return .challengeUnusable }
                if try row.bool("stored") { return .registered(try registration.completing.map { _ in try RecoveryCompletion.revocations(row) }) }
                if gates.contains(RecoveryCompletion.completed), try !row.bool(RecoveryCompletion.completed) { return .recoveryEnded }
                if gates.contains(Self.ticketGate), try !row.bool(Self.ticketGate) { return .ticketUsed }
                if gates.contains(Self.stepUpGate), try !row.bool(Self.stepUpGate) { return .stepUpUsed }
                if gates.contains(DPoPProofRepository.gate), try !row.bool(DPoPProofRepository.gate) { return .proofReplayed }
                throw StorageError.undecodable(column: "stored")
            }
        } catch .conflict(let why) where why == .usernameTaken || why == .credentialExists {
            _ = try finishRegistration(challenge, .refused)
            throw .conflict(why)
        }
    }

    /// The statement a registration's own runs after, in one pipeline (RevocationCascade): a
    /// recovery's completion ends every session and device key (and maybe passkey) of the account,
    /// so it takes the account's sessions lock exclusively; a passkey added to an existing account
    /// takes it shared, so a completion beside it either waits for the new passkey and revokes it
    /// with the others, or has committed first, and the step-up that approved the addition is then
    /// judged by a passkey or key the completion revoked. A new account needs neither.
    static func accountLock(_ r: NewRegistration) -> [SQL] {
        if r.completing != nil { return [RevocationCascade.endingSessions(userId: r.credential.userId)] }
        return r.newUser == nil ? [RevocationCascade.joiningAccount(userId: r.credential.userId)] : []
    }

    static let ticketGate = "tick"
    static let stepUpGate = "red"

    /// A registration as CTEs (a shared fragment of `register` and `finishRegistration`): with
    /// `after` (a CTE of the same statement), nothing is written unless it returned a row. Returns
    /// the CTEs and the gates — the CTEs that must each return a row for the account, the passkey
    /// and the session (`tok`) to be written.
    static func registering(_ r: NewRegistration, after: String?) -> (ctes: [(name: String, sql: SQL)], gates: [String]) {
        let credential = r.credential
        let afterIt: SQL = after.map { " AND EXISTS (SELECT 1 FROM \(unsafeRaw: $0))" } ?? ""
        var ctes = r.completing?.ctes(userId: credential.userId, keeping: credential.id, onlyIf: after) ?? []
        var gates: [String] = []
        if r.completing != nil { gates.append(RecoveryCompletion.completed) }
        if let ticketHash = r.ticketHash {
            // The ticket the options request presented is used up here, with the passkey it enrols; its
            // validity was judged then, so only a use in between (another ceremony it started) refuses.
            ctes.append((ticketGate, """
                UPDATE enrolment_tickets SET used_at = now()
                WHERE hash = \(ticketHash) AND user_id = \(credential.userId) AND purpose = 'passkey' AND used_at IS NULL\(fragment: afterIt)
                RETURNING hash
                """))
            gates.append(ticketGate)
        }
        if let s = r.redeeming {
            // SPEC "Assurance": the step-up that approved adding a passkey, single use, and only while
            // the key that made it is live.
            ctes.append((stepUpGate, StepUpRedemption.use(s, onlyIf: after.map { "EXISTS (SELECT 1 FROM \(unsafeRaw: $0))" })))
            gates.append(stepUpGate)
        }
        if r.session.dpop != nil {
            // The session's DPoP proof, recorded first: a proof seen before starts no session, and
            // then nothing of the registration is written (it would be an account without its session).
            ctes += DPoPProofRepository.cte(r.session.dpop)
            gates.append(DPoPProofRepository.gate)
        }
        // Everything below is written only with the challenge's use, the completed recovery, the used
        // ticket, the redeemed step-up and the new DPoP proof (each when there is one).
        let all = (after.map { [$0] } ?? []) + gates
        let gate: SQL = all.isEmpty ? ""
            : "\nWHERE \(unsafeRaw: all.map { "EXISTS (SELECT 1 FROM \($0))" }.joined(separator: " AND "))"
        if let u = r.newUser {
            ctes.append(("usr", """
                INSERT INTO users (id, user_handle, username, display_name, language)
                SELECT \(u.id), \(u.userHandle), \(u.username), \(u.displayName), \(r.language)::text\(fragment: gate)
                RETURNING id
                """))
        }
        let transports = JSONValue.array(credential.transports.map { .string($0) }).text
        ctes.append(("cred", """
            INSERT INTO credentials (id, user_id, public_key, alg, sign_count, aaguid, transports, backup_eligible, backed_up,
                                     attestation_format, attestation_type, name, approves_from, registration_digest, hardware_bound,
                                     prf_enabled)
            SELECT \(credential.id), \(credential.userId), \(credential.publicKey), \(credential.alg), \(credential.signCount),
                   \(credential.aaguid), \(PostgresValue.text(transports))::jsonb, \(credential.backupEligible), \(credential.backedUp),
                   \(credential.attestationFormat), \(credential.attestationType), \(credential.name),
                   \(credential.approvesFrom)::timestamptz, \(r.registrationDigest)::bytea, \(credential.hardwareBound),
                   \(credential.prfEnabled)\(fragment: gate)
            RETURNING id
            """))
        ctes += SessionRepository.ctes(r.session, from: "cred", proofRecorded: true)
        ctes += AuditRepository.cte((r.completing?.auditRows ?? []) + [.records([r.audit])], onlyIf: "tok")
        ctes += OutboxRepository.ctes((r.completing?.eventRows ?? []) + [.events(r.events + r.mail.map(\.event))], onlyIf: "tok")
        ctes += MailRepository.ctes(r.mail, onlyIf: "tok")
        if let t = r.cancelToken {
            ctes.append(("cancel_token", """
                INSERT INTO cancel_tokens (hash, user_id, credential_id, expires_at)
                SELECT \(t.hash), \(t.userId), \(t.credentialId), \(t.expiresAt) WHERE EXISTS (SELECT 1 FROM tok)
                RETURNING hash
                """))
        }
        // SPEC "Mail": the language the account last used (a new account's went in with it).
        ctes += MailRepository.languageMemo(userId: credential.userId, language: r.newUser == nil ? r.language : nil, onlyIf: "tok")
        return (ctes, gates)
    }
}
