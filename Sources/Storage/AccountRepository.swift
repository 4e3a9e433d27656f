import Foundation
import JSON
import PostgreSQL

/// What a verified assertion changes on its credential (login and passkey step-up alike).
public struct CredentialUse: Sendable, Equatable {
    /// What storing a use does when the stored counter is no longer below the new one (another use
    /// with the same or a higher counter got there first, or the authenticator went back): the
    /// deployment's `LATCHKEY_SIGN_COUNT_POLICY`.
    public enum OnRegression: Sendable, Equatable {
        /// Nothing is written; the call fails `.conflict(.signCountRegression)`.
        case reject
        /// The use is stored and the credential flagged as a possible clone.
        case flag
    }

    public let credentialId: [UInt8]
    public let userId: String
    /// The authenticator's counter; the stored one only ever moves forward.
    public let signCount: Int64
    public let backedUp: Bool
    /// The BE flag this assertion carried, stored so that a change is reported once, not on every
    /// later login (nil: keep the stored one).
    public let backupEligible: Bool?
    /// Sets `flagged` (it is never cleared here): the counter went back and policy let the use through.
    public let cloneWarning: Bool
    /// Decided by the compare-and-set in the one statement that stores the use, so two uses carrying
    /// the same counter can never both pass under `.reject`.
    public let onRegression: OnRegression

    public init(credentialId: [UInt8], userId: String, signCount: Int64, backedUp: Bool, backupEligible: Bool? = nil,
                cloneWarning: Bool, onRegression: OnRegression = .reject) {
        self.credentialId = credentialId
        self.userId = userId
        self.signCount = signCount
        self.backedUp = backedUp
        self.backupEligible = backupEligible
        self.cloneWarning = cloneWarning
        self.onRegression = onRegression
    }
}

/// The credential as a stored use left it.
public struct RecordedUse: Sendable, Equatable {
    public let signCount: Int64
    public let flagged: Bool
    public init(signCount: Int64, flagged: Bool) {
        self.signCount = signCount
        self.flagged = flagged
    }
}

/// What an enrolment ticket lets its user enrol.
public enum TicketPurpose: String, Sendable { case passkey, deviceKey = "device-key" }

/// Users, their credentials (passkeys) and enrolment tickets.
public final class AccountRepository: Sendable {
    let pool: PostgresPool

    init(pool: PostgresPool) { self.pool = pool }

    // MARK: Users

    public func user(username: String) throws(StorageError) -> UserRecord? {
        try pool.run { c in
            try c.query("SELECT \(unsafeRaw: AccountRepository.userColumns) FROM users WHERE username = \(username)")
                .first.map(AccountRepository.user)
        }
    }

    public func user(id: String) throws(StorageError) -> UserRecord? {
        try pool.run { c in
            try c.query("SELECT \(unsafeRaw: AccountRepository.userColumns) FROM users WHERE id = \(id)").first.map(AccountRepository.user)
        }
    }

    // MARK: Credentials

    /// The live credentials of a user, oldest first.
    public func credentials(userId: String) throws(StorageError) -> [CredentialRecord] {
        try pool.run { c in
            try c.query("""
                SELECT \(unsafeRaw: AccountRepository.credentialColumns) FROM credentials
                WHERE user_id = \(userId) AND revoked_at IS NULL ORDER BY created_at
                """).map(AccountRepository.credential)
        }
    }

    /// The credential and its owner for a login; nil when unknown or revoked.
    public func credentialForLogin(id: [UInt8]) throws(StorageError) -> (CredentialRecord, UserRecord)? {
        try pool.run { c in
            try c.query("""
                SELECT \(unsafeRaw: AccountRepository.loginColumns)
                FROM credentials c JOIN users u ON u.id = c.user_id
                WHERE c.id = \(id) AND c.revoked_at IS NULL
                """).first.map(AccountRepository.login)
        }
    }

    /// One statement: the new user (for a new account), the credential, the session, the audit line,
    /// the outbox `events`, the `mail` and the held passkey's `cancelToken`. Either all exist
    /// afterwards or none does: a taken username → `.conflict(.usernameTaken)`, a known credential id
    /// → `.conflict(.credentialExists)`. With `completing` (a registration made with a recovery
    /// token), the recovery is completed in that same statement — it revokes what existed before
    /// the statement, so the new session and passkey survive it — and `.notFound` (nothing written)
    /// when the recovery is no longer pending and due; returns what it revoked. With
    /// `redeemingTicket`, the enrolment ticket is used up in that same statement, and `.notFound`
    /// (nothing written) when it was used meanwhile.
    @discardableResult
    public func register(newUser: UserRecord?, credential: CredentialRecord, session: NewSession,
                         audit: AuditRecord, events: [OutboxEvent] = [],
                         completing: RecoveryCompletion? = nil, mail: [MailToSend] = [],
                         cancelToken: NewCancelToken? = nil, registrationDigest: [UInt8]? = nil,
                         redeemingTicket ticketHash: [UInt8]? = nil) throws(StorageError) -> RecoveryRevocations? {
        let registration = NewRegistration(newUser: newUser, credential: credential, session: session, audit: audit,
                                           events: events, completing: completing, mail: mail, cancelToken: cancelToken,
                                           registrationDigest: registrationDigest, ticketHash: ticketHash)
        let (ctes, _) = Self.registering(registration, after: nil)
        let final: SQL = "SELECT EXISTS (SELECT 1 FROM tok) AS stored\(fragment: completing?.revokedColumns ?? "")"
        return try pool.run { c in
            let row = try c.pipeline(Self.accountLock(registration) + [SQL.with(ctes, final)]).last![0]
            guard try row.bool("stored") else { throw StorageError.notFound }
            return try completing.map { _ in try RecoveryCompletion.revocations(row) }
        }
    }

    /// Records a verified use on its credential, plus `audit`, in one statement; `.notFound` when
    /// the credential does not exist, `.conflict(.signCountRegression)` when the compare-and-set
    /// refused it (nothing is written then).
    @discardableResult
    public func recordUse(_ use: CredentialUse, audit: [AuditRecord], events: [OutboxEvent] = []) throws(StorageError) -> RecordedUse {
        try pool.run { c in
            let statement = SQL.with([("cred", AccountRepository.recording(use))] + AuditRepository.cte(audit, onlyIf: "cred")
                                     + OutboxRepository.ctes(events, onlyIf: "cred"),
                                     AccountRepository.recordedOrWhy(use))
            return try AccountRepository.recorded(try c.query(statement)[0])
        }
    }

    /// The one statement that records a use on a credential, as a compare-and-set: the row is
    /// updated only while the stored counter is still below the new one, or both are 0 (synced
    /// passkeys always report 0) — WebAuthn L3 §7.2 step 22 decided by PostgreSQL, so a concurrent
    /// use that got there first makes this one fail (READ COMMITTED re-checks the condition on the
    /// row version that won). Under `.flag` a failed compare stores the use anyway and sets
    /// `flagged`. `flagged` is sticky; the counter never moves back. Returns the credential's
    /// `id, sign_count, flagged`, or no row (unknown or revoked credential, or refused under
    /// `.reject`): a passkey revoked after the read that found it records no use and begins nothing.
    /// Used as a CTE named `cred` by `recordUse` and `DeviceKeyRepository.insertReceipt(credentialUse:)`
    /// (a shared fragment, like `AuditRepository.cte`); a use that starts a session goes through
    /// `recordingLastUseOnSession`.
    /// With `onlyIf` (a CTE of the same statement), only when that CTE returned a row.
    /// `unless`: a condition on the row under which nothing is written.
    static func recording(_ use: CredentialUse, onlyIf cte: String? = nil, unless: SQL? = nil) -> SQL {
        let advances: SQL = "(\(use.signCount) > sign_count OR (\(use.signCount) = 0 AND sign_count = 0))"
        var onlyIf: SQL = use.onRegression == .reject ? " AND \(fragment: advances)" : ""
        if let cte { onlyIf = "\(fragment: onlyIf) AND EXISTS (SELECT 1 FROM \(unsafeRaw: cte))" }
        if let unless { onlyIf = "\(fragment: onlyIf) AND NOT \(fragment: unless)" }
        return """
            UPDATE credentials SET sign_count = GREATEST(sign_count, \(use.signCount)), backed_up = \(use.backedUp),
                backup_eligible = COALESCE(\(use.backupEligible), backup_eligible),
                flagged = flagged OR \(use.cloneWarning) OR NOT \(fragment: advances), last_used_at = now()
            WHERE id = \(use.credentialId) AND revoked_at IS NULL\(fragment: onlyIf) RETURNING id, sign_count, flagged
            """
    }

    /// `recording(use)` for a use whose last use a session keeps (`SessionRepository.started`: the
    /// session carries the credential and its authentication time): CTEs `touched` and `cred`. The
    /// credential's row is written only when the use changes more than its last use — a counter
    /// above 0, the backup state, a clone warning — and otherwise `cred` reads it unchanged: a synced
    /// passkey (counter always 0) leaves its row alone, and its last use is read from the session
    /// (`credential_last_use`, migration 24). The unchanged branch is taken only when the stored and
    /// the new counter are both 0, so §7.2 step 22's compare-and-set is `touched`'s alone, and only
    /// when `touched` wrote nothing, so `cred` has at most one row.
    static func recordingLastUseOnSession(_ use: CredentialUse, onlyIf cte: String? = nil) -> [(name: String, sql: SQL)] {
        let unchanged: SQL = """
            (\(use.signCount) = 0 AND sign_count = 0 AND backed_up = \(use.backedUp) \
            AND backup_eligible = COALESCE(\(use.backupEligible), backup_eligible) AND NOT \(use.cloneWarning))
            """
        let gate: SQL = cte.map { " AND EXISTS (SELECT 1 FROM \(unsafeRaw: $0))" } ?? ""
        return [("touched", recording(use, onlyIf: cte, unless: unchanged)),
                ("cred", """
                    SELECT id, sign_count, flagged FROM touched
                    UNION ALL
                    SELECT id, sign_count, flagged FROM credentials
                    WHERE id = \(use.credentialId) AND revoked_at IS NULL AND \(fragment: unchanged)\(fragment: gate)
                      AND NOT EXISTS (SELECT 1 FROM touched)
                    """)]
    }

    /// The final SELECT of a statement whose CTE `cred` is `recording(use)`: the recorded row, or
    /// why there is none — `known` (a live credential: a revoked one is not found) reads the
    /// statement's snapshot, from before the update, and only when `cred` is empty (CASE evaluates
    /// its branches lazily): a recorded use needs no second lookup of the credential, one index
    /// descent less per login.
    /// `also`: more columns for the same row.
    static func recordedOrWhy(_ use: CredentialUse, also: SQL? = nil) -> SQL {
        let more: SQL = also.map { ", \(fragment: $0)" } ?? ""
        return """
            SELECT (SELECT sign_count FROM cred) AS sign_count, (SELECT flagged FROM cred) AS flagged,
                   CASE WHEN EXISTS (SELECT 1 FROM cred) THEN true
                        ELSE EXISTS (SELECT 1 FROM credentials WHERE id = \(use.credentialId) AND revoked_at IS NULL) END AS known\(fragment: more)
            """
    }

    /// `recordedOrWhy`'s row as a result: the use, `.notFound`, or `.conflict(.signCountRegression)`.
    static func recorded(_ row: Row) throws -> RecordedUse {
        if try row.isNull("sign_count") {
            throw try row.bool("known") ? StorageError.conflict(.signCountRegression) : StorageError.notFound
        }
        return RecordedUse(signCount: try row.int64("sign_count"), flagged: try row.bool("flagged"))
    }

    /// Marks a credential as a possible clone (sign count regression refused under a `reject`
    /// policy), with its audit line, in one statement; `.notFound` when there is no such credential.
    public func flag(credentialId: [UInt8], audit: AuditRecord, events: [OutboxEvent] = []) throws(StorageError) {
        try pool.run { c in
            let statement = SQL.with([("f", "UPDATE credentials SET flagged = true WHERE id = \(credentialId) RETURNING id"),
                                      ("audit", AuditRepository.insert([audit], onlyIf: "f"))] + OutboxRepository.ctes(events, onlyIf: "f"),
                                     "SELECT id FROM f")
            guard !(try c.query(statement)).isEmpty else { throw StorageError.notFound }
        }
    }

    /// `template` once per credential row of `from`, with the members SPEC "Events" gives
    /// `passkey.*`: `credentialId` (base64url) and, unless `idOnly`, `aaguid` and `name`.
    static func rows(_ template: EventTemplate, from: String, idOnly: Bool = false) -> EventRows {
        let id: SQL = "\(unsafeRaw: from).id"
        return template.rows(from: "\(unsafeRaw: from)", account: "\(unsafeRaw: from).user_id", key: "encode(\(fragment: id), 'hex')",
                             members: [("credentialId", SQL.base64url(id))] + (idOnly ? [] : [
                                 ("aaguid", SQL.uuidText("\(unsafeRaw: from).aaguid")), ("name", "\(unsafeRaw: from).name"),
                             ]))
    }

    // MARK: Rows

    static let userColumns = "id, user_handle, username, display_name"

    static func user(_ r: Row) throws -> UserRecord {
        UserRecord(id: try r.string("id"), userHandle: try r.bytes("user_handle"), username: try r.string("username"),
                   displayName: try r.string("display_name"))
    }

    /// A credential's columns; `last_used_at` is the passkey's last use: the row's own, or its
    /// newest live session begun by a sign-in with it (`credential_last_use`, migration 24).
    static let credentialColumns = """
        id, user_id, public_key, alg, sign_count, aaguid, transports::text AS transports, backup_eligible, backed_up, \
        attestation_format, attestation_type, name, flagged, created_at, credential_last_use(id, last_used_at) AS last_used_at, \
        approves_from, hardware_bound, prf_enabled
        """

    static func credential(_ r: Row) throws -> CredentialRecord {
        CredentialRecord(
            id: try r.bytes("id"), userId: try r.string("user_id"), publicKey: try r.bytes("public_key"), alg: try r.int("alg"),
            signCount: try r.int64("sign_count"), aaguid: try r.bytes("aaguid"), transports: try r.stringArray("transports"),
            backupEligible: try r.bool("backup_eligible"), backedUp: try r.bool("backed_up"),
            attestationFormat: try r.string("attestation_format"), attestationType: try r.string("attestation_type"),
            name: try r.string("name"), flagged: try r.bool("flagged"), createdAt: try r.date("created_at"),
            lastUsedAt: try r.optionalDate("last_used_at"), approvesFrom: try r.optionalDate("approves_from"),
            hardwareBound: try r.bool("hardware_bound"), prfEnabled: try r.bool("prf_enabled"))
    }

    /// A credential joined with its owner, as a login reads it (`credentials c JOIN users u`);
    /// `last_used_at` is the row's own, which nothing on a sign-in's path reads.
    static let loginColumns = """
        c.id, c.user_id, c.public_key, c.alg, c.sign_count, c.aaguid, c.transports::text AS transports, c.backup_eligible, \
        c.backed_up, c.attestation_format, c.attestation_type, c.name, c.flagged, c.created_at, c.last_used_at, c.approves_from, \
        c.hardware_bound, c.prf_enabled, u.user_handle, u.username, u.display_name
        """

    static func login(_ r: Row) throws -> (CredentialRecord, UserRecord) {
        let credential = try AccountRepository.credential(r)
        let user = UserRecord(id: credential.userId, userHandle: try r.bytes("user_handle"), username: try r.string("username"),
                              displayName: try r.string("display_name"))
        return (credential, user)
    }
}
