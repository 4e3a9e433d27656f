import Foundation
import JSON
import PostgreSQL
import Synchronization

/// The audit lines for the origins an app change adds to the allowlist or drops from it, written
/// once per origin (each line's subject is the origin).
public struct AppOriginAudit: Sendable, Equatable {
    public let added: AuditTemplate
    public let removed: AuditTemplate

    public init(added: AuditTemplate, removed: AuditTemplate) {
        self.added = added
        self.removed = removed
    }
}

/// The origin allowlist and the associated apps, plus their change feed: triggers (migration 2)
/// NOTIFY channel `latchkey_config` at commit whenever either table changes.
public final class ConfigRepository: Sendable {
    let pool: PostgresPool
    /// Where LISTEN connects; nil: no LISTEN (a transaction pooler without a direct URL).
    let listenURL: String?

    /// The NOTIFY channel the triggers raise.
    static let channel = "latchkey_config"

    init(pool: PostgresPool, listenURL: String?) {
        self.pool = pool
        self.listenURL = listenURL
    }

    // MARK: Origins

    public func origins() throws(StorageError) -> [(origin: String, source: String)] {
        try pool.run { c in
            try c.query("SELECT origin, source FROM origins ORDER BY origin").map { (try $0.string("origin"), try $0.string("source")) }
        }
    }

    /// True when the origin was added (with `audit`), false when it was already present (no audit then).
    /// With `redeeming`, the change happens only together with that step-up's redemption (same
    /// transaction) — an origin already present too: that answer is a success, so it uses the step-up
    /// up (single use, SPEC), and a replay of it is refused rather than answered 200 again.
    public func addOrigin(_ origin: String, source: String, audit: AuditRecord,
                          redeeming: StepUpRedemption? = nil) throws(StorageError) -> Bool {
        // One statement: the redemption, then (only if it held) the origin and its audit line.
        let statement = SQL.with(StepUpRedemption.cte(redeeming) + [("added", """
            INSERT INTO origins (origin, source) SELECT \(origin), \(source)\(fragment: StepUpRedemption.gate(redeeming))
            ON CONFLICT (origin) DO NOTHING RETURNING origin
            """)] + AuditRepository.cte([audit], onlyIf: "added"),
            "SELECT EXISTS (SELECT 1 FROM added) AS added, \(fragment: StepUpRedemption.held(redeeming)) AS redeemed")
        return try pool.run { c in
            let row = try c.query(statement)[0]
            guard try row.bool("redeemed") else { throw StorageError.conflict(.stepUpUsed) }
            return try row.bool("added")
        }
    }

    /// True when the origin was removed (with `audit`), false when it was not there.
    public func removeOrigin(_ origin: String, audit: AuditRecord, redeeming: StepUpRedemption? = nil) throws(StorageError) -> Bool {
        // One statement: the origin found (locked), the step-up redeemed only if it is there (an
        // absent origin spends nothing), then the removal and its audit line only if that held.
        let statement = SQL.with([("target", "SELECT origin FROM origins WHERE origin = \(origin) FOR UPDATE")]
            + StepUpRedemption.cte(redeeming, onlyIf: "target") + [("removed", """
            DELETE FROM origins\(fragment: StepUpRedemption.gate(redeeming, and: "origin IN (SELECT origin FROM target)"))
            RETURNING origin
            """)] + AuditRepository.cte([audit], onlyIf: "removed"),
            "SELECT EXISTS (SELECT 1 FROM target) AS present, EXISTS (SELECT 1 FROM removed) AS removed")
        return try pool.run { c in
            let row = try c.query(statement)[0]
            if try row.bool("present"), !(try row.bool("removed")) { throw StorageError.conflict(.stepUpUsed) }
            return try row.bool("removed")
        }
    }

    // MARK: Apps

    /// The apps associated with one rpId (nil: every rpId), iOS first, then by id.
    public func apps(rpId: String?) throws(StorageError) -> [AppRecord] {
        try pool.run { c in
            let rows: [Row]
            if let rpId {
                rows = try c.query("""
                    SELECT rp_id, platform, app_id, fingerprints::text AS fingerprints, handle_all_urls, created_at
                    FROM apps WHERE rp_id = \(rpId) ORDER BY platform DESC, app_id
                    """)
            } else {
                rows = try c.query("""
                    SELECT rp_id, platform, app_id, fingerprints::text AS fingerprints, handle_all_urls, created_at
                    FROM apps ORDER BY rp_id, platform DESC, app_id
                    """)
            }
            return try rows.map(ConfigRepository.app)
        }
    }

    /// Creates or replaces an app, then brings the app-derived origins in line, in one transaction
    /// (so the allowlist and the association files never disagree, even for a moment). Writes
    /// `created` or `updated` (whichever happened; neither when nothing changed), and `origins` per
    /// origin added or dropped.
    public func putApp(_ app: AppRecord, created: AuditRecord, updated: AuditRecord, origins: AppOriginAudit,
                       redeeming: StepUpRedemption? = nil) throws(StorageError) -> AppChange {
        let fingerprints = JSONValue.array(app.fingerprints.map { .string($0) }).text
        return try pool.runTransaction { t in
            let existing = try t.query("""
                SELECT fingerprints::text AS fingerprints, handle_all_urls FROM apps
                WHERE rp_id = \(app.rpId) AND platform = \(app.platform) AND app_id = \(app.appId) FOR UPDATE
                """).first
            let change: AppChange
            if let existing {
                if try existing.stringArray("fingerprints") == app.fingerprints, try existing.bool("handle_all_urls") == app.handleAllURLs {
                    // Unchanged is a success too: it uses the step-up up, as addOrigin does.
                    try StepUpRedemption.redeem(redeeming, on: t)
                    return AppChange.unchanged
                }
                try t.execute("""
                    UPDATE apps SET fingerprints = \(PostgresValue.text(fingerprints))::jsonb, handle_all_urls = \(app.handleAllURLs),
                        updated_at = now()
                    WHERE rp_id = \(app.rpId) AND platform = \(app.platform) AND app_id = \(app.appId)
                    """)
                change = .updated
            } else {
                try t.execute("""
                    INSERT INTO apps (rp_id, platform, app_id, fingerprints, handle_all_urls)
                    VALUES (\(app.rpId), \(app.platform), \(app.appId), \(PostgresValue.text(fingerprints))::jsonb, \(app.handleAllURLs))
                    """)
                change = .created
            }
            try StepUpRedemption.redeem(redeeming, on: t)
            try AuditRepository.write([change == .created ? created : updated], on: t)
            try ConfigRepository.syncAppOrigins(t, audit: origins)
            return change
        }
    }

    /// False when there was no such app (nothing written). Otherwise `audit`, then the origins
    /// synced as in `putApp`.
    public func removeApp(rpId: String, platform: String, appId: String, audit: AuditRecord,
                          origins: AppOriginAudit, redeeming: StepUpRedemption? = nil) throws(StorageError) -> Bool {
        try pool.runTransaction { t in
            let n = try t.execute("DELETE FROM apps WHERE rp_id = \(rpId) AND platform = \(platform) AND app_id = \(appId)")
            guard n > 0 else { return false }
            try StepUpRedemption.redeem(redeeming, on: t)
            try AuditRepository.write([audit], on: t)
            try ConfigRepository.syncAppOrigins(t, audit: origins)
            return true
        }
    }

    /// Origins with source 'app' = exactly those the apps need: one `android:apk-key-hash:` per
    /// Android fingerprint, `https://<rpId>` per rpId with an iOS app. An origin an admin added by
    /// hand (source admin/config) is left alone. Each origin added or dropped is audited.
    static func syncAppOrigins(_ t: PostgresConnection, audit: AppOriginAudit) throws {
        // Serialise concurrent syncs so two transactions cannot each miss the other's app.
        try t.execute("SELECT pg_advisory_xact_lock(hashtext('latchkey.apps'))")
        try t.query(SQL.with([
            ("needed", """
                SELECT 'android:apk-key-hash:' || fp AS origin FROM apps, jsonb_array_elements_text(apps.fingerprints) AS fp
                WHERE apps.platform = 'android'
                UNION SELECT 'https://' || rp_id FROM apps WHERE platform = 'ios'
                """),
            ("added", """
                INSERT INTO origins (origin, source) SELECT origin, 'app' FROM needed
                ON CONFLICT (origin) DO NOTHING RETURNING origin
                """),
            ("removed", "DELETE FROM origins WHERE source = 'app' AND origin NOT IN (SELECT origin FROM needed) RETURNING origin"),
        ] + AuditRepository.cte([audit.added.rows(from: "added", subject: "added.origin"),
                                 audit.removed.rows(from: "removed", subject: "removed.origin")]),
            "SELECT 1 AS one"))
    }

    static func app(_ r: Row) throws -> AppRecord {
        AppRecord(rpId: try r.string("rp_id"), platform: try r.string("platform"), appId: try r.string("app_id"),
                  fingerprints: try r.stringArray("fingerprints"), handleAllURLs: try r.bool("handle_all_urls"),
                  createdAt: try r.date("created_at"))
    }

    // MARK: Change feed

    /// Calls `onChange` on every NOTIFY `latchkey_config` and after every (re)connect (a gap may
    /// have hidden changes), from a thread of its own, until `stop()`. LISTEN runs on its own
    /// direct connection, never a pooled one (a pooled connection is reused by other work and would
    /// miss or swallow notifications). Without a listen URL (transaction pooler, no `listenURL`)
    /// nothing listens: `isListening` stays false, and callers' caches must expire on their own.
    /// `feeds` (the outbox's wake-ups) share the connection: one LISTEN session per instance for both.
    public func watch(also feeds: [NotificationWatch.Feed] = [], onChange: @escaping @Sendable () -> Void) -> NotificationWatch {
        NotificationWatch(url: listenURL, channel: ConfigRepository.channel, threadName: "latchkey-config-watcher", also: feeds,
                          onConnect: onChange, onNotifications: { _ in onChange() })
    }
}
