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
            try c.query(ConfigRepository.readingOrigins).map { (try $0.string("origin"), try $0.string("source")) }
        }
    }

    /// `origins()`' statement (the declarations and the admin API's caller resolution pipeline it too).
    static let readingOrigins: SQL = "SELECT origin, source FROM origins ORDER BY origin"

    static func origin(_ r: Row) throws -> AppDeclarationRows.OriginRow {
        AppDeclarationRows.OriginRow(origin: try r.string("origin"), source: try r.string("source"))
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
                rows = try c.query(ConfigRepository.readingApps(rpId: rpId))
            } else {
                rows = try c.query("""
                    SELECT rp_id, platform, app_id, fingerprints::text AS fingerprints, handle_all_urls, created_at
                    FROM apps ORDER BY rp_id, platform DESC, app_id
                    """)
            }
            return try rows.map(ConfigRepository.app)
        }
    }

    /// One rpId's apps, iOS first, then by id (`apps(rpId:)`; the declarations and the admin API's
    /// caller resolution pipeline it too).
    static func readingApps(rpId: String) -> SQL {
        """
        SELECT rp_id, platform, app_id, fingerprints::text AS fingerprints, handle_all_urls, created_at
        FROM apps WHERE rp_id = \(rpId) ORDER BY platform DESC, app_id
        """
    }

    /// Creates or replaces an app and brings the app-derived origins in line, in one round trip
    /// (`synced`): so the allowlist and the association files never disagree, even for a moment.
    /// Writes `created` or `updated` (whichever happened), and `origins` per origin added or
    /// dropped. Unchanged writes nothing but the redemption: that answer is a success too, so it
    /// uses the step-up up, as `addOrigin` does. A redemption that fails: `.conflict(.stepUpUsed)`,
    /// nothing written.
    public func putApp(_ app: AppRecord, created: AuditRecord, updated: AuditRecord, origins: AppOriginAudit,
                       redeeming: StepUpRedemption? = nil) throws(StorageError) -> AppChange {
        let fingerprints = JSONValue.array(app.fingerprints.map { .string($0) }).text
        let key: SQL = "rp_id = \(app.rpId) AND platform = \(app.platform) AND app_id = \(app.appId)"
        let ctes: [(name: String, sql: SQL)] = [("existing", "SELECT 1 FROM apps WHERE \(fragment: key)")]
            + StepUpRedemption.cte(redeeming) + [
            // Only a declaration that differs is written (the DO UPDATE's WHERE): `put` is empty when unchanged.
            ("put", """
                INSERT INTO apps (rp_id, platform, app_id, fingerprints, handle_all_urls)
                SELECT \(app.rpId), \(app.platform), \(app.appId), \(PostgresValue.text(fingerprints))::jsonb,
                       \(app.handleAllURLs)\(fragment: StepUpRedemption.gate(redeeming))
                ON CONFLICT (rp_id, platform, app_id) DO UPDATE
                SET fingerprints = EXCLUDED.fingerprints, handle_all_urls = EXCLUDED.handle_all_urls, updated_at = now()
                WHERE (apps.fingerprints, apps.handle_all_urls) IS DISTINCT FROM (EXCLUDED.fingerprints, EXCLUDED.handle_all_urls)
                RETURNING rp_id, platform, fingerprints
                """),
            ("made", "SELECT 1 FROM put WHERE NOT EXISTS (SELECT 1 FROM existing)"),
            ("replaced", "SELECT 1 FROM put WHERE EXISTS (SELECT 1 FROM existing)"),
            // The apps as they are after this statement: the others as read, and this one as written.
            ("after", """
                SELECT rp_id, platform, fingerprints FROM apps WHERE NOT (\(fragment: key))
                UNION ALL SELECT rp_id, platform, fingerprints FROM put
                """),
        ]
        let statement = SQL.with(ctes + Self.syncAppOrigins(after: "after", onlyIf: "put", audit: origins,
                                                             also: [created.rows(from: "made"), updated.rows(from: "replaced")]),
                                 """
                                 SELECT \(fragment: StepUpRedemption.held(redeeming)) AS redeemed, EXISTS (SELECT 1 FROM made) AS created,
                                        EXISTS (SELECT 1 FROM replaced) AS updated
                                 """)
        return try pool.run { c in
            let row = try Self.synced(statement, on: c)
            guard try row.bool("redeemed") else { throw StorageError.conflict(.stepUpUsed) }
            if try row.bool("created") { return AppChange.created }
            return try row.bool("updated") ? AppChange.updated : AppChange.unchanged
        }
    }

    /// False when there was no such app (nothing written, the step-up not used). Otherwise removed
    /// with `audit` and the redemption, the origins synced as in `putApp`, in one round trip.
    public func removeApp(rpId: String, platform: String, appId: String, audit: AuditRecord,
                          origins: AppOriginAudit, redeeming: StepUpRedemption? = nil) throws(StorageError) -> Bool {
        let key: SQL = "rp_id = \(rpId) AND platform = \(platform) AND app_id = \(appId)"
        let ctes: [(name: String, sql: SQL)] = [("target", "SELECT 1 FROM apps WHERE \(fragment: key)")]
            + StepUpRedemption.cte(redeeming, onlyIf: "target") + [
            ("gone", "DELETE FROM apps\(fragment: StepUpRedemption.gate(redeeming, and: key)) RETURNING 1"),
            ("after", "SELECT rp_id, platform, fingerprints FROM apps WHERE NOT (\(fragment: key))"),
        ]
        let statement = SQL.with(ctes + Self.syncAppOrigins(after: "after", onlyIf: "gone", audit: origins, also: [audit.rows(from: "gone")]),
                                 "SELECT EXISTS (SELECT 1 FROM target) AS present, EXISTS (SELECT 1 FROM gone) AS removed")
        return try pool.run { c in
            let row = try Self.synced(statement, on: c)
            if try row.bool("present"), !(try row.bool("removed")) { throw StorageError.conflict(.stepUpUsed) }
            return try row.bool("removed")
        }
    }

    /// Runs an app change's statement (`syncAppOrigins`) after taking the apps' lock, pipelined in
    /// one round trip and one implicit transaction (nothing between them but the Sync that commits
    /// both): concurrent app changes queue on the lock, and each statement starts after it, so
    /// under READ COMMITTED it reads every app the changes before it committed, and no two syncs
    /// each miss the other's app. Its one row.
    static func synced(_ statement: SQL, on c: PostgresConnection) throws -> Row {
        try c.pipeline(["SELECT pg_advisory_xact_lock(hashtext('latchkey.apps'))", statement])[1][0]
    }

    /// The CTEs that keep origins with source 'app' exactly those the apps need, once `onlyIf` (a
    /// CTE of the statement) returned a row: one `android:apk-key-hash:` per Android fingerprint,
    /// `https://<rpId>` per rpId with an iOS app, the apps being `after` (a CTE of `rp_id`,
    /// `platform`, `fingerprints`: the apps as the change leaves them). An origin an admin added by
    /// hand (source admin/config) is left alone. Each origin added or dropped is audited, in the
    /// one `audit` CTE with the change's own lines (`also`).
    static func syncAppOrigins(after: String, onlyIf: String, audit: AppOriginAudit, also: [AuditRows]) -> [(name: String, sql: SQL)] {
        let gate: SQL = "EXISTS (SELECT 1 FROM \(unsafeRaw: onlyIf))"
        return [
            ("needed", """
                SELECT 'android:apk-key-hash:' || fp AS origin
                FROM \(unsafeRaw: after) AS a, jsonb_array_elements_text(a.fingerprints) AS fp WHERE a.platform = 'android'
                UNION SELECT 'https://' || rp_id FROM \(unsafeRaw: after) WHERE platform = 'ios'
                """),
            ("added", """
                INSERT INTO origins (origin, source) SELECT origin, 'app' FROM needed WHERE \(fragment: gate)
                ON CONFLICT (origin) DO NOTHING RETURNING origin
                """),
            ("removed", """
                DELETE FROM origins WHERE source = 'app' AND origin NOT IN (SELECT origin FROM needed) AND \(fragment: gate)
                RETURNING origin
                """),
        ] + AuditRepository.cte(also + [audit.added.rows(from: "added", subject: "added.origin"),
                                        audit.removed.rows(from: "removed", subject: "removed.origin")])
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
