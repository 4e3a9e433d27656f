import Foundation
import PostgreSQL

/// A sealed challenge as its verify records it: its id (single use) and its expiry.
public struct UsedChallenge: Sendable, Equatable {
    public let id: [UInt8]
    public let expiresAt: Date

    public init(id: [UInt8], expiresAt: Date) {
        self.id = id
        self.expiresAt = expiresAt
    }
}

/// What a login's read found: whether the challenge was used already, whether the database's
/// clock still has it live, and the live credential with its owner (nil when unknown or revoked)
/// with the ids of every live credential of that owner, oldest first (the Signal API's
/// `allAcceptedCredentialIds`).
public struct LoginRead: Sendable {
    public let used: Bool
    public let live: Bool
    public let login: (credential: CredentialRecord, user: UserRecord)?
    public let accepted: [[UInt8]]
}

/// A credential flagged as a possible clone (WebAuthn L3 §7.2 step 22), with its audit line and events.
public struct CredentialFlag: Sendable {
    public let credentialId: [UInt8]
    public let audit: AuditRecord
    public let events: [OutboxEvent]

    public init(credentialId: [UInt8], audit: AuditRecord, events: [OutboxEvent]) {
        self.credentialId = credentialId
        self.audit = audit
        self.events = events
    }
}

/// The one statement that ends a login, decided from its read.
public enum LoginWrite: Sendable {
    /// A session (`SessionRepository.start(recording:)`), the account's language memo (SPEC "Mail":
    /// the language the account last used) with it when given.
    case session(NewSession, recording: CredentialUse, audit: [AuditRecord], events: [OutboxEvent], language: String?)
    /// An OP browser session (`OAuthRepository.startBrowserSession`).
    case browserSession(NewSession, recording: CredentialUse, replacing: [UInt8]?, audit: [AuditRecord], events: [OutboxEvent])
    /// The verify failed: the challenge is only recorded used (and `flag` written).
    case refused(flag: CredentialFlag?)
}

/// What the login's statement wrote.
public enum LoginWritten: Sendable, Equatable {
    /// The challenge was used before, or is expired by the database's clock: nothing was written.
    case challengeUnusable
    case session(RecordedUse)
    case browserSession(RecordedUse, ended: [String])
    case refused
    /// The session's DPoP proof was seen before (RFC 9449 §11.1): the challenge is used, no session written.
    case proofReplayed
}

/// A passkey login's storage (SPEC "Performance targets": options write nothing, a login is one
/// commit): the username-first options' one read, and the verify's one transaction — BEGIN with
/// the read in one round trip, then the one statement with COMMIT in the next (libpq pipelining).
public final class LoginRepository: Sendable {
    let pool: PostgresPool

    init(pool: PostgresPool) { self.pool = pool }

    /// Username-first options: the account and its live passkeys (id, transports), oldest first,
    /// in one query that is the same statement whether or not the username exists. Nil: no such account.
    public func account(username: String) throws(StorageError) -> (userId: String, credentials: [(id: [UInt8], transports: [String])])? {
        try pool.run { c in try Self.account(try c.query(Self.accountStatement(username))) }
    }

    /// `account(username:)` from a task on an event loop, over that loop's connections.
    public func account(username: String, on connections: LoopConnections) async throws(StorageError)
        -> (userId: String, credentials: [(id: [UInt8], transports: [String])])? {
        do {
            return try await connections.withConnection { c in
                try Self.account(try await c.pipeline([Self.accountStatement(username)], on: connections.loop)[0])
            }
        } catch { throw StorageError(error) }
    }

    static func accountStatement(_ username: String) -> SQL {
        """
        SELECT u.id AS user_id, c.id, c.transports::text AS transports
        FROM (SELECT \(username)::text AS username) q LEFT JOIN users u ON u.username = q.username
             LEFT JOIN credentials c ON c.user_id = u.id AND c.revoked_at IS NULL
        ORDER BY c.created_at, c.id
        """
    }

    static func account(_ rows: [Row]) throws -> (userId: String, credentials: [(id: [UInt8], transports: [String])])? {
        guard let first = rows.first, let userId = try first.optionalString("user_id") else { return nil }
        var credentials: [(id: [UInt8], transports: [String])] = []
        for r in rows where try !r.isNull("id") { credentials.append((try r.bytes("id"), try r.stringArray("transports"))) }
        return (userId, credentials)
    }

    /// A login's one transaction. Round trip 1: BEGIN and the read (`LoginRead`: the challenge's
    /// use, the credential `credentialId` with its owner). A challenge used before or expired by
    /// the database's clock ends it there (COMMIT, nothing written). Else `decide` (pure: no I/O)
    /// turns the read into the one statement, and round trip 2 runs it with COMMIT: it records
    /// the challenge's id as used (a concurrent verify of the same challenge waits on that row and
    /// then finds it: `.challengeUnusable`, nothing else written) together with the session.
    /// After the commit, a refused counter is `.conflict(.signCountRegression)` and a vanished
    /// credential `.notFound` (the challenge stays used).
    public func login(_ challenge: UsedChallenge, credentialId: [UInt8], decide: (LoginRead) -> LoginWrite) throws(StorageError) -> LoginWritten {
        try pool.run { c in
            let found = try Self.read(try c.pipeline(["BEGIN", Self.readStatement(challenge, credentialId)])[1][0])
            guard !found.used, found.live else {
                try c.pipeline(["COMMIT"])
                return .challengeUnusable
            }
            let write = decide(found)
            return try Self.written(try c.pipeline([Self.statement(write, challenge), "COMMIT"])[0][0], write)
        }
    }

    /// `login` from a task on an event loop, over that loop's connections: the same two round
    /// trips, each a wait on the loop rather than a blocked thread.
    public func login(_ challenge: UsedChallenge, credentialId: [UInt8], on connections: LoopConnections,
                      decide: (LoginRead) -> LoginWrite) async throws(StorageError) -> LoginWritten {
        let loop = connections.loop
        do {
            return try await connections.withConnection { c in
                let found = try Self.read(try await c.pipeline(["BEGIN", Self.readStatement(challenge, credentialId)], on: loop)[1][0])
                guard !found.used, found.live else {
                    try await c.pipeline(["COMMIT"], on: loop)
                    return .challengeUnusable
                }
                let write = decide(found)
                return try Self.written(try await c.pipeline([Self.statement(write, challenge), "COMMIT"], on: loop)[0][0], write)
            }
        } catch { throw StorageError(error) }
    }

    static func readStatement(_ challenge: UsedChallenge, _ credentialId: [UInt8]) -> SQL {
        """
        SELECT EXISTS (SELECT 1 FROM used_challenges WHERE id = \(challenge.id)) AS used, \(challenge.expiresAt) > now() AS live,
               \(unsafeRaw: AccountRepository.loginColumns),
               (SELECT string_agg(encode(a.id, 'hex'), ',' ORDER BY a.created_at, a.id) FROM credentials a
                WHERE a.user_id = c.user_id AND a.revoked_at IS NULL) AS accepted,
               \(fragment: RevocationCascade.startingSession(userColumn: "c.user_id"))
        FROM (VALUES (1)) AS one (x) LEFT JOIN credentials c ON c.id = \(credentialId) AND c.revoked_at IS NULL
             LEFT JOIN users u ON u.id = c.user_id
        """
    }

    static func read(_ row: Row) throws -> LoginRead {
        LoginRead(used: try row.bool("used"), live: try row.bool("live"),
                  login: try row.isNull("id") ? nil : try AccountRepository.login(row), accepted: try row.hexList("accepted"))
    }

    /// What the one statement's row says was written.
    static func written(_ row: Row, _ write: LoginWrite) throws -> LoginWritten {
        guard try row.bool("fresh") else { return .challengeUnusable }
        switch write {
        case .session(let session, _, _, _, _):
            let recorded = try AccountRepository.recorded(row)
            // A session with a DPoP proof is written only for a proof not seen before.
            if session.dpop != nil, try !row.bool("started") { return .proofReplayed }
            return .session(recorded)
        case .browserSession:
            let (recorded, ended) = try OAuthRepository.browserSessionStarted(row)
            return .browserSession(recorded, ended: ended)
        case .refused: return .refused
        }
    }

    /// The CTE that records the challenge used; empty when it was (ON CONFLICT waits for a
    /// concurrent verify's transaction and then finds its row), or when the challenge expired
    /// since the read (this statement's own start, not the transaction's `now()`): a used id is
    /// swept only after its expiry (`ChallengeRepository.purgeExpired`), so no verify can record
    /// an id the sweep already took.
    static func used(_ challenge: UsedChallenge) -> (name: String, sql: SQL) {
        ("used", """
            INSERT INTO used_challenges (id, expires_at) SELECT \(challenge.id), \(challenge.expiresAt)
            WHERE \(challenge.expiresAt) > statement_timestamp()
            ON CONFLICT (id) DO NOTHING RETURNING id
            """)
    }

    static let fresh: SQL = "EXISTS (SELECT 1 FROM used) AS fresh"

    /// `write` as one statement: every change it makes only with the challenge's use recorded.
    static func statement(_ write: LoginWrite, _ challenge: UsedChallenge) -> SQL {
        let used = Self.used(challenge)
        switch write {
        case .session(let session, let use, let audit, let events, let language):
            var ctes = [used] + SessionRepository.started(session, by: use, onlyIf: "used")
                + AuditRepository.cte(audit, onlyIf: "tok") + OutboxRepository.ctes(events, onlyIf: "tok")
            ctes += MailRepository.languageMemo(userId: session.userId, language: language, onlyIf: "tok")
            return SQL.with(ctes, AccountRepository.recordedOrWhy(use, also: "\(fragment: fresh), EXISTS (SELECT 1 FROM tok) AS started"))
        case .browserSession(let session, let use, let replacing, let audit, let events):
            return OAuthRepository.startBrowserSession(session, recording: use, replacing: replacing, audit: audit, events: events,
                                                       onlyIf: "used", also: fresh, prefix: [used])
        case .refused(let flag):
            guard let flag else { return SQL.with([used], "SELECT \(fragment: fresh)") }
            let ctes = [used, ("f", "UPDATE credentials SET flagged = true WHERE id = \(flag.credentialId) AND EXISTS (SELECT 1 FROM used) RETURNING id"),
                        ("audit", AuditRepository.insert([flag.audit], onlyIf: "f"))] + OutboxRepository.ctes(flag.events, onlyIf: "f")
            return SQL.with(ctes, "SELECT \(fragment: fresh)")
        }
    }
}
