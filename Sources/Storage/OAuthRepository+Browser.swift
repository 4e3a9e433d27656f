import Foundation
import JSON
import PostgreSQL

/// The OP browser session behind the `/authorize` page's cookie (SPEC "Who may approve"), as one read.
public struct BrowserSessionRecord: Sendable, Equatable {
    public let familyId: String
    public let userId: String
    public let username: String
    public let credentialId: [UInt8]?
    public let authTime: Date
    /// The hold of the passkey that began it, while it lasts (a held passkey approves nothing).
    public let passkeyApprovesFrom: Date?
    /// That passkey proved a hardware key at registration (OpenID EAP `phrh`).
    public let hardware: Bool
}

/// A Bearer caller's session as an approver (SPEC "Who may approve"), read with the request it approves.
public struct ApproverSessionRecord: Sendable, Equatable {
    public let method: SessionMethod
    public let credentialId: [UInt8]?
    public let authTime: Date
    /// The hold of the passkey that began it, while it lasts (a held passkey approves nothing).
    public let passkeyApprovesFrom: Date?
    /// That passkey proved a hardware key at registration (OpenID EAP `phrh`).
    public let hardware: Bool
}

/// A remembered consent (SPEC "Consents").
public struct OAuthConsentRecord: Sendable, Equatable {
    public let clientId: String
    public let clientName: String
    public let scopes: [String]
    public let grantedAt: Date
}

extension OAuthRepository {
    /// Starts an OP browser session in one statement: the passkey's use recorded (the counter's
    /// compare-and-set, as a login), the browser family with the cookie's hash as its one token,
    /// the audit line and events; and the session of the cookie it replaces ended like a logout
    /// (its approvals live on), only when the new one starts. The OP sign-in writes it inside its
    /// login's transaction (`LoginRepository.login`, `LoginWrite.browserSession`), whose row gives
    /// the use as stored and the ids of the sessions ended (`browserSessionStarted`). With `onlyIf`
    /// (a CTE among `prefix`), only when that CTE returned a row; `also`: more columns for the final row.
    static func startBrowserSession(_ session: NewSession, recording use: CredentialUse, replacing cookieHash: [UInt8]?,
                                    audit: [AuditRecord], events: [OutboxEvent], onlyIf gate: String?, also: SQL?,
                                    prefix: [(name: String, sql: SQL)] = []) -> SQL {
        var ctes = prefix + SessionRepository.started(session, by: use, onlyIf: gate)
            + AuditRepository.cte(audit, onlyIf: "tok") + OutboxRepository.ctes(events, onlyIf: "tok")
        ctes.append(("ended", """
            UPDATE refresh_families SET revoked_at = now(), ended_by = 'logout'
            WHERE id = (SELECT family_id FROM refresh_tokens WHERE hash = \(cookieHash)) AND browser AND revoked_at IS NULL
              AND EXISTS (SELECT 1 FROM tok)
            RETURNING id
            """))
        let more: SQL = also.map { ", \(fragment: $0)" } ?? ""
        return SQL.with(ctes, AccountRepository.recordedOrWhy(use, also: "(SELECT COALESCE(json_agg(id), '[]') FROM ended)::text AS ended\(fragment: more)"))
    }

    /// The row of `startBrowserSession`'s statement as its result.
    static func browserSessionStarted(_ row: Row) throws -> (RecordedUse, [String]) {
        let recorded = try AccountRepository.recorded(row)
        return (recorded, Self.strings(try row.string("ended")))
    }

    /// The live OP browser session a cookie names (unexpired, not revoked), in one read.
    public func browserSession(cookieHash: [UInt8]) throws(StorageError) -> BrowserSessionRecord? {
        try browserSession(cookieHash: cookieHash, withRequest: nil)?.session
    }

    /// The live OP browser session a cookie names and, in the same read, the pending authorization
    /// request `requestHash` names (the approve route needs both: one read, then its one write).
    public func browserSession(cookieHash: [UInt8], withRequest requestHash: [UInt8]?)
        throws(StorageError) -> (session: BrowserSessionRecord, request: OAuthRequestRecord?)? {
        try pool.run { c in
            try c.query("""
                SELECT f.id, f.user_id, u.username, f.credential_id, f.auth_time, cr.approves_from, COALESCE(cr.hardware_bound, false) AS hardware_bound,
                       q.client_id, q.params::text AS params, q.created_at
                FROM refresh_tokens r JOIN refresh_families f ON f.id = r.family_id JOIN users u ON u.id = f.user_id
                LEFT JOIN credentials cr ON cr.id = f.credential_id
                LEFT JOIN oauth_requests q ON q.hash = \(requestHash) AND q.kind = 'authorize' AND q.used_at IS NULL AND q.expires_at > now()
                WHERE r.hash = \(cookieHash) AND r.expires_at > now() AND f.browser AND f.revoked_at IS NULL
                """).first.map { r in
                (BrowserSessionRecord(familyId: try r.string("id"), userId: try r.string("user_id"), username: try r.string("username"),
                                      credentialId: try r.optionalBytes("credential_id"), authTime: try r.date("auth_time"),
                                      passkeyApprovesFrom: try r.optionalDate("approves_from"), hardware: try r.bool("hardware_bound")),
                 try r.isNull("client_id") ? nil : try Self.request(r))
            }
        }
    }

    /// A live session of `userId` (the Bearer caller's `sid`) as an approver's standing — how it
    /// began, the hold of its passkey — and, in the same read, the pending authorization request
    /// `requestHash` names: the approve route's one read.
    public func approverSession(familyId: String, userId: String, withRequest requestHash: [UInt8]?)
        throws(StorageError) -> (session: ApproverSessionRecord, request: OAuthRequestRecord?)? {
        try pool.run { c in
            try c.query("""
                SELECT f.method, f.credential_id, f.auth_time, cr.approves_from, COALESCE(cr.hardware_bound, false) AS hardware_bound,
                       q.client_id, q.params::text AS params, q.created_at
                FROM refresh_families f LEFT JOIN credentials cr ON cr.id = f.credential_id
                LEFT JOIN oauth_requests q ON q.hash = \(requestHash) AND q.kind = 'authorize' AND q.used_at IS NULL AND q.expires_at > now()
                WHERE f.id = \(familyId) AND f.user_id = \(userId) AND f.revoked_at IS NULL
                """).first.map { r in
                (ApproverSessionRecord(method: try r.value("method"), credentialId: try r.optionalBytes("credential_id"),
                                       authTime: try r.date("auth_time"), passkeyApprovesFrom: try r.optionalDate("approves_from"),
                                       hardware: try r.bool("hardware_bound")),
                 try r.isNull("client_id") ? nil : try Self.request(r))
            }
        }
    }

    /// Ends an OP browser session like a logout (`/oauth2/logout`): the grants it approved live on.
    public func endBrowserSession(familyId: String) throws(StorageError) -> Bool {
        try pool.run { c in
            try c.execute("""
                UPDATE refresh_families SET revoked_at = now(), ended_by = 'logout' WHERE id = \(familyId) AND browser AND revoked_at IS NULL
                """) > 0
        }
    }

    // MARK: Userinfo

    /// What `/oauth2/userinfo` answers from (OpenID Connect Core §5.3), in one read: the account and
    /// its verified address, only while the token's session `sid` is live — checked in the database,
    /// so a revocation holds here before any instance hears of it.
    public func userinfo(userId: String, sessionId: String) throws(StorageError) -> (user: UserRecord, email: String?)? {
        try pool.run { c in
            try c.query("""
                SELECT \(unsafeRaw: AccountRepository.userColumns.split(separator: ",").map { "u." + $0.trimmingCharacters(in: .whitespaces) }.joined(separator: ", ")),
                       e.email
                FROM users u JOIN refresh_families f ON f.user_id = u.id LEFT JOIN account_emails e ON e.user_id = u.id
                WHERE u.id = \(userId) AND f.id = \(sessionId) AND f.revoked_at IS NULL
                """).first.map { r in (try AccountRepository.user(r), try r.optionalString("email")) }
        }
    }

    // MARK: Consents

    public func consents(userId: String) throws(StorageError) -> [OAuthConsentRecord] {
        try pool.run { c in
            try c.query("""
                SELECT k.client_id, oc.name, k.scopes::text AS scopes, k.granted_at
                FROM oauth_consents k JOIN oauth_clients oc ON oc.id = k.client_id
                WHERE k.user_id = \(userId) ORDER BY k.granted_at DESC, k.client_id
                """).map { r in
                OAuthConsentRecord(clientId: try r.string("client_id"), clientName: try r.string("name"),
                                   scopes: Self.strings(try r.json("scopes")), grantedAt: try r.date("granted_at"))
            }
        }
    }

    public func deleteConsent(userId: String, clientId: String) throws(StorageError) -> Bool {
        try pool.run { c in try c.execute("DELETE FROM oauth_consents WHERE user_id = \(userId) AND client_id = \(clientId)") > 0 }
    }
}
