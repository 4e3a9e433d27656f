import Foundation
import JSON
import PostgreSQL

/// A client's registration for the CIBA grant (SPEC "CIBA"; CIBA Core §4): how it learns the result
/// (`poll` or `ping` to its notification endpoint) and which key's step-up approves its requests.
public struct CIBARegistration: Sendable, Equatable {
    public enum Mode: String, Sendable, CaseIterable {
        case poll, ping
    }

    public enum Approver: String, Sendable, CaseIterable {
        case attestedDeviceKey = "attested-device-key"
        case deviceKey = "device-key"
        case passkey
    }

    public var mode: Mode
    /// `backchannel_client_notification_endpoint`: required for ping, absent for poll.
    public var notificationEndpoint: String?
    public var approver: Approver

    public init(mode: Mode, notificationEndpoint: String?, approver: Approver) {
        self.mode = mode
        self.notificationEndpoint = notificationEndpoint
        self.approver = approver
    }

    /// The column's JSON text (nil: not a CIBA client).
    init?(json text: String?) {
        guard let text, let v = try? JSONParser.parse(Array(text.utf8)), let mode = v["mode"]?.stringValue.flatMap(Mode.init(rawValue:)),
              let approver = v["approver"]?.stringValue.flatMap(Approver.init(rawValue:)) else { return nil }
        self.init(mode: mode, notificationEndpoint: v["endpoint"]?.stringValue, approver: approver)
    }

    var storedJSON: String {
        JSONValue.object([("mode", .string(mode.rawValue)), ("endpoint", notificationEndpoint.map { .string($0) } ?? .null),
                          ("approver", .string(approver.rawValue))]).text
    }
}

/// A backchannel authentication request as stored (SPEC "CIBA approval", "CIBA tokens").
public struct CIBARequestRecord: Sendable, Equatable {
    public enum Status: String, Sendable {
        case pending, approved, denied, expired, issued
    }

    public let id: String
    public let clientId: String
    public let clientName: String
    public let userId: String
    public let scope: [String]
    public let bindingMessage: String?
    /// RFC 9396 `authorization_details` as asked; `.null` when none.
    public let authorizationDetails: JSONValue
    public let acrValues: String?
    /// Ping mode: the bearer the client's notification endpoint expects.
    public let notificationToken: String?
    public let status: Status
    /// Unexpired: `expires_at` is after the database's `now()`.
    public let live: Bool
    public let createdAt: Date
    public let expiresAt: Date
    /// The client's `cibaApprover`: which kind of key's step-up approves (nil: the client is no
    /// longer registered for CIBA).
    public var approver: CIBARegistration.Approver? = nil
    /// Ping mode: the outbox event of the request's one notification (nil: none was scheduled).
    public var pingEvent: String? = nil
}


/// What `POST /oauth2/bc-authorize` decides on, read in one query: the account the hint names and
/// the counts SPEC "CIBA limits" sets bounds on.
public struct CIBAAuthorizeRead: Sendable, Equatable {
    /// nil: no account has that username (or id).
    public let userId: String?
    /// The client's `unknown_user_id` answers in the last hour.
    public let unknownUsersLastHour: Int
    /// The account's live pending requests (any client).
    public let pendingForUser: Int
    /// This client's requests for the account in the last hour.
    public let clientRequestsLastHour: Int
    /// The account denied three of this client's requests within a day, the third under 24 h ago.
    public let blocked: Bool

    public init(userId: String?, unknownUsersLastHour: Int, pendingForUser: Int, clientRequestsLastHour: Int, blocked: Bool) {
        self.userId = userId
        self.unknownUsersLastHour = unknownUsersLastHour
        self.pendingForUser = pendingForUser
        self.clientRequestsLastHour = clientRequestsLastHour
        self.blocked = blocked
    }
}

/// A new backchannel request, as the one write of `bc-authorize` stores it.
public struct CIBANewRequest: Sendable {
    public let id: String
    public let clientId: String
    public let userId: String
    public let scope: [String]
    public let bindingMessage: String?
    public let authorizationDetails: JSONValue
    public let acrValues: String?
    public let notificationToken: String?
    public let intervalSeconds: Int
    public let expiresInSeconds: Int
    /// Ping mode: the id of the notification event written with the request (due at its expiry).
    public var pingEvent: String? = nil

    public init(id: String, clientId: String, userId: String, scope: [String], bindingMessage: String?, authorizationDetails: JSONValue,
                acrValues: String?, notificationToken: String?, intervalSeconds: Int, expiresInSeconds: Int) {
        self.id = id
        self.clientId = clientId
        self.userId = userId
        self.scope = scope
        self.bindingMessage = bindingMessage
        self.authorizationDetails = authorizationDetails
        self.acrValues = acrValues
        self.notificationToken = notificationToken
        self.intervalSeconds = intervalSeconds
        self.expiresInSeconds = expiresInSeconds
    }
}

/// A poll's one read (SPEC "CIBA tokens"): the request's state and how long ago, in PostgreSQL's
/// time, the previous poll arrived.
public struct CIBAPollRead: Sendable, Equatable {
    public let clientId: String
    public let userId: String
    public let status: CIBARequestRecord.Status
    public let live: Bool
    public let intervalSeconds: Int
    /// Seconds since the previous poll's arrival; nil for the first poll.
    public let sinceLastPoll: Double?
    /// The poll count the read saw: the poll's write is a compare-and-set on it.
    public let polls: Int
    public let grant: JSONValue?

    public init(clientId: String, userId: String, status: CIBARequestRecord.Status, live: Bool, intervalSeconds: Int, sinceLastPoll: Double?,
                polls: Int, grant: JSONValue?) {
        self.clientId = clientId
        self.userId = userId
        self.status = status
        self.live = live
        self.intervalSeconds = intervalSeconds
        self.sinceLastPoll = sinceLastPoll
        self.polls = polls
        self.grant = grant
    }
}

/// What an approved request's tokens did when the client fetched them.
public enum CIBAIssue: Sendable, Equatable {
    case started(userId: String, grant: JSONValue)
    /// No longer approved (another poll took the tokens), or expired.
    case gone
    /// The approving session, passkey or device key was revoked since (SPEC "Grants live and die").
    case approverRevoked
}

/// CIBA's state in PostgreSQL (migration 31), beside the OpenID Provider's: requests, their
/// decisions and tokens, and the unknown-user answers a client's limit counts.
extension OAuthRepository {
    static let cibaColumns = """
        r.id, r.client_id, c.name AS client_name, r.user_id, r.scope, r.binding_message, r.authorization_details::text AS details, \
        r.acr_values, r.notification_token, r.status, r.expires_at > now() AS live, r.created_at, r.expires_at, \
        c.ciba->>'approver' AS approver, r.ping_event
        """

    static func cibaRequest(_ r: Row) throws -> CIBARequestRecord {
        let details = try r.optionalString("details").flatMap { try? JSONParser.parse(Array($0.utf8)) } ?? .null
        var record = CIBARequestRecord(id: try r.string("id"), clientId: try r.string("client_id"), clientName: try r.string("client_name"),
                                 userId: try r.string("user_id"), scope: try r.string("scope").split(separator: " ").map(String.init),
                                 bindingMessage: try r.optionalString("binding_message"), authorizationDetails: details,
                                 acrValues: try r.optionalString("acr_values"), notificationToken: try r.optionalString("notification_token"),
                                 status: CIBARequestRecord.Status(rawValue: try r.string("status")) ?? .expired, live: try r.bool("live"),
                                 createdAt: try r.date("created_at"), expiresAt: try r.date("expires_at"),
                                 approver: try r.optionalString("approver").flatMap(CIBARegistration.Approver.init(rawValue:)))
        record.pingEvent = try r.optionalString("ping_event")
        return record
    }


    /// `bc-authorize`'s one read: the account `username` (or `userId`) names, and SPEC "CIBA limits"'s counts.
    public func cibaAuthorizeRead(clientId: String, username: String?, userId: String?) throws(StorageError) -> CIBAAuthorizeRead {
        try pool.run { c in
            let row = try c.query("""
                WITH u AS (SELECT id FROM users WHERE username = \(username)::text OR id = \(userId)::text LIMIT 1)
                SELECT (SELECT id FROM u) AS user_id,
                  (SELECT count(*) FROM ciba_unknown_users WHERE client_id = \(clientId) AND at > now() - interval '1 hour') AS misses,
                  (SELECT count(*) FROM ciba_requests r JOIN u ON r.user_id = u.id WHERE r.status = 'pending' AND r.expires_at > now()) AS pending,
                  (SELECT count(*) FROM ciba_requests r JOIN u ON r.user_id = u.id
                     WHERE r.client_id = \(clientId) AND r.created_at > now() - interval '1 hour') AS recent,
                  EXISTS (SELECT 1 FROM ciba_requests d JOIN u ON d.user_id = u.id
                     WHERE d.client_id = \(clientId) AND d.status = 'denied' AND d.decided_at > now() - interval '24 hours'
                       AND (SELECT count(*) FROM ciba_requests e WHERE e.user_id = d.user_id AND e.client_id = d.client_id
                              AND e.status = 'denied' AND e.decided_at BETWEEN d.decided_at - interval '24 hours' AND d.decided_at) >= 3) AS blocked
                """)[0]
            return CIBAAuthorizeRead(userId: try row.optionalString("user_id"), unknownUsersLastHour: try row.int("misses"),
                                     pendingForUser: try row.int("pending"), clientRequestsLastHour: try row.int("recent"),
                                     blocked: try row.bool("blocked"))
        }
    }

    /// An `unknown_user_id` answer counted for the client (rows older than an hour swept).
    public func cibaUnknownUser(clientId: String) throws(StorageError) {
        try pool.run { c in
            _ = try c.execute(SQL.with([("sweep", "DELETE FROM ciba_unknown_users WHERE at < now() - interval '1 hour' RETURNING 1")],
                                       "INSERT INTO ciba_unknown_users (client_id) VALUES (\(clientId))"))
        }
    }

    /// `bc-authorize`'s one write: the request stored; the account's oldest pending requests beyond
    /// `maxPending - 1` expired first (SPEC "CIBA limits": a fourth expires the oldest), their ping
    /// notifications made due at `now` (CIBA Core §10.2: the client collects `expired_token`); its
    /// audit line and events (`ciba.requested`, and a ping client's notification) with it.
    public func cibaStore(_ n: CIBANewRequest, maxPending: Int, audit: AuditRecord, events: [OutboxEvent], now: Date) throws(StorageError) {
        let details: String? = n.authorizationDetails == .null ? nil : n.authorizationDetails.text
        let ctes: [(name: String, sql: SQL)] = [
            ("old", """
                UPDATE ciba_requests SET status = 'expired', decided_at = now()
                WHERE id IN (SELECT id FROM ciba_requests WHERE user_id = \(n.userId) AND status = 'pending' AND expires_at > now()
                             ORDER BY created_at DESC, id OFFSET \(max(0, maxPending - 1)))
                RETURNING id, ping_event
                """),
            ("ins", """
                INSERT INTO ciba_requests (id, client_id, user_id, scope, binding_message, authorization_details, acr_values,
                                           notification_token, interval_seconds, expires_at, ping_event)
                VALUES (\(n.id), \(n.clientId), \(n.userId), \(n.scope.joined(separator: " ")), \(n.bindingMessage), \(details)::jsonb,
                        \(n.acrValues), \(n.notificationToken), \(n.intervalSeconds), now() + make_interval(secs => \(n.expiresInSeconds)),
                        \(n.pingEvent)::text)
                RETURNING id
                """),
        ] + Self.pingsDue(from: "old", at: now) + AuditRepository.cte([audit], onlyIf: "ins") + OutboxRepository.ctes(events, onlyIf: "ins")
        try pool.run { c in _ = try c.query(SQL.with(ctes, "SELECT (SELECT count(*) FROM ping_wake) AS woke")) }
    }

    /// The account's pending, unexpired requests, oldest first, with their clients' names.
    public func cibaPending(userId: String) throws(StorageError) -> [CIBARequestRecord] {
        try pool.run { c in
            try c.query("""
                SELECT \(unsafeRaw: Self.cibaColumns) FROM ciba_requests r JOIN oauth_clients c ON c.id = r.client_id
                WHERE r.user_id = \(userId) AND r.status = 'pending' AND r.expires_at > now() ORDER BY r.created_at, r.id
                """).map(Self.cibaRequest)
        }
    }


    static func cibaRequestQuery(id: String) -> SQL {
        "SELECT \(unsafeRaw: Self.cibaColumns) FROM ciba_requests r JOIN oauth_clients c ON c.id = r.client_id WHERE r.id = \(id)"
    }

    /// One request, whatever its state; nil: none has that id.
    public func cibaRequest(id: String) throws(StorageError) -> CIBARequestRecord? {
        try pool.run { c in
            try c.query(Self.cibaRequestQuery(id: id)).first.map(Self.cibaRequest)
        }
    }


    /// A poll's one read; nil: no request has that id.
    public func cibaPollRead(id: String) throws(StorageError) -> CIBAPollRead? {
        try pool.run { c in
            guard let row = try c.query("""
                SELECT client_id, user_id, status, expires_at > now() AS live, interval_seconds, polls,
                       EXTRACT(EPOCH FROM now() - last_poll_at)::float8 AS since, grant_data::text AS grant_data
                FROM ciba_requests WHERE id = \(id)
                """).first else { return nil }
            return CIBAPollRead(clientId: try row.string("client_id"), userId: try row.string("user_id"),
                                status: CIBARequestRecord.Status(rawValue: try row.string("status")) ?? .expired, live: try row.bool("live"),
                                intervalSeconds: try row.int("interval_seconds"), sinceLastPoll: try row.optionalDouble("since"),
                                polls: try row.int("polls"),
                                grant: try row.optionalString("grant_data").flatMap { try? JSONParser.parse(Array($0.utf8)) })
        }
    }

    /// A poll that issues nothing, recorded: its arrival (in PostgreSQL time) and, after `slow_down`,
    /// the interval grown by `growBy` seconds — only if no other poll was recorded since the read
    /// (`polls`). False: another poll came first.
    public func cibaPolled(id: String, polls: Int, growBy: Int) throws(StorageError) -> Bool {
        try pool.run { c in
            try c.execute("""
                UPDATE ciba_requests SET last_poll_at = now(), polls = polls + 1, interval_seconds = interval_seconds + \(growBy)
                WHERE id = \(id) AND polls = \(polls)
                """) > 0
        }
    }

    /// An approved request's tokens, once, in one statement (as a code's redemption): the request
    /// marked issued, and — only while what approved it still stands, its approvers locked `FOR
    /// SHARE` — the `oauth` family, its first refresh token, the grant and `issuedAudit`.
    public func cibaIssue(id: String, clientId: String, familyId: String, refreshHash: [UInt8], ttlSeconds: Int,
                          issuedAudit: AuditRecord) throws(StorageError) -> CIBAIssue {
        let statement = SQL.with([
            ("q", """
                SELECT id, user_id, grant_data, approving_family, approving_credential, approving_device_key FROM ciba_requests
                WHERE id = \(id) AND client_id = \(clientId) AND status = 'approved' AND expires_at > now() FOR UPDATE
                """),
            ("approvers", """
                SELECT (q.approving_family IS NULL OR EXISTS (SELECT 1 FROM refresh_families f WHERE f.id = q.approving_family
                            AND (f.revoked_at IS NULL OR f.ended_by = 'logout') FOR SHARE))
                   AND (q.approving_credential IS NULL OR EXISTS (SELECT 1 FROM credentials r
                            WHERE r.id = latchkey_from_base64url(q.approving_credential) AND r.revoked_at IS NULL FOR SHARE))
                   AND (q.approving_device_key IS NULL OR EXISTS (SELECT 1 FROM device_keys d
                            WHERE d.id = q.approving_device_key AND d.revoked_at IS NULL FOR SHARE)) AS ok
                FROM q
                """),
            ("done", """
                UPDATE ciba_requests r SET status = 'issued', family_id = CASE WHEN (SELECT ok FROM approvers) THEN \(familyId) END
                FROM q WHERE r.id = q.id RETURNING r.user_id, r.grant_data, r.family_id
                """),
            ("gate", "SELECT q.*, done.family_id FROM q JOIN done ON done.family_id IS NOT NULL"),
        ] + OAuthRepository.grantStart(familyId: familyId, refreshHash: refreshHash, ttlSeconds: ttlSeconds, clientId: clientId)
          + AuditRepository.cte([issuedAudit], onlyIf: "tok"),
            """
            SELECT EXISTS (SELECT 1 FROM done) AS taken, EXISTS (SELECT 1 FROM tok) AS started,
                   (SELECT user_id FROM done) AS user_id, (SELECT grant_data::text FROM done) AS grant_data
            """)
        let row = try pool.run { c in try c.query(statement)[0] }
        do {
            guard try row.bool("taken") else { return .gone }
            guard try row.bool("started"), let userId = try row.optionalString("user_id") else { return .approverRevoked }
            let grant = (try? JSONParser.parse(Array(try row.json("grant_data").utf8))) ?? .object([])
            return .started(userId: userId, grant: grant)
        } catch { throw StorageError(error) }
    }
}
