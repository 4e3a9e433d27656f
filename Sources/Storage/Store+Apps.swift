import Foundation
import JSON
import PostgreSQL

/// An associated app as stored: validated by the WellKnown module before it gets here.
public struct AppRecord: Sendable, Hashable {
    public var rpId: String
    public var platform: String       // ios | android
    public var appId: String          // iOS: TEAMID.bundle.id; Android: package name
    public var fingerprints: [String] // Android: base64url SHA-256 of each signing certificate
    public var handleAllURLs: Bool
    public var createdAt: Date?

    public init(rpId: String, platform: String, appId: String, fingerprints: [String] = [], handleAllURLs: Bool = false,
                createdAt: Date? = nil) {
        self.rpId = rpId
        self.platform = platform
        self.appId = appId
        self.fingerprints = fingerprints
        self.handleAllURLs = handleAllURLs
        self.createdAt = createdAt
    }
}

extension Store {
    /// NOTIFY channel raised (by trigger) whenever `origins` or `apps` change.
    public static let configChannel = "latchkey_config"

    public enum AppChange: Sendable, Equatable { case created, updated, unchanged }

    static func app(_ r: Row) throws -> AppRecord {
        let fps = (try? JSONParser.parse(try r.string("fingerprints")))?.arrayValue?.compactMap(\.stringValue) ?? []
        return AppRecord(rpId: try r.string("rp_id"), platform: try r.string("platform"), appId: try r.string("app_id"),
                         fingerprints: fps, handleAllURLs: try r.bool("handle_all_urls"), createdAt: try r.date("created_at"))
    }

    /// The apps associated with one rpId (nil: every rpId), iOS first, then by id.
    public func apps(rpId: String?) throws -> [AppRecord] {
        try pool.withConnection { c in
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
            return try rows.map(Store.app)
        }
    }

    /// Creates or replaces an app, then brings the app-derived origins in line, audited, in one
    /// transaction (so the allowlist and the files never disagree, even for a moment).
    public func putApp(_ app: AppRecord, actor: String) throws -> AppChange {
        let fingerprints = JSONValue.array(app.fingerprints.map { .string($0) }).text
        return try pool.withConnection { c in
            try c.transaction { t in
                let existing = try t.query("""
                    SELECT fingerprints::text AS fingerprints, handle_all_urls FROM apps
                    WHERE rp_id = \(app.rpId) AND platform = \(app.platform) AND app_id = \(app.appId) FOR UPDATE
                    """).first
                let change: AppChange
                if let existing {
                    let oldFps = (try? JSONParser.parse(try existing.string("fingerprints")))?.arrayValue?.compactMap(\.stringValue) ?? []
                    if oldFps == app.fingerprints, try existing.bool("handle_all_urls") == app.handleAllURLs { return AppChange.unchanged }
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
                let detail = JSONValue.object([("rpId", .string(app.rpId)), ("platform", .string(app.platform)),
                                               ("fingerprints", .array(app.fingerprints.map { .string($0) })),
                                               ("handleAllUrls", .bool(app.handleAllURLs))]).text
                try Store.audit(t, actor: actor, action: change == .created ? "app.added" : "app.updated",
                                subject: app.platform + ":" + app.appId, detail: detail)
                try Store.syncAppOrigins(t, actor: actor)
                return change
            }
        }
    }

    public func removeApp(rpId: String, platform: String, appId: String, actor: String) throws -> Bool {
        try pool.withConnection { c in
            try c.transaction { t in
                let n = try t.execute("DELETE FROM apps WHERE rp_id = \(rpId) AND platform = \(platform) AND app_id = \(appId)")
                guard n > 0 else { return false }
                let detail = JSONValue.object([("rpId", .string(rpId)), ("platform", .string(platform))]).text
                try Store.audit(t, actor: actor, action: "app.removed", subject: platform + ":" + appId, detail: detail)
                try Store.syncAppOrigins(t, actor: actor)
                return true
            }
        }
    }

    /// Origins with source 'app' = exactly those the apps need: one `android:apk-key-hash:` per
    /// Android fingerprint, `https://<rpId>` per rpId with an iOS app. An origin an admin added by
    /// hand (source admin/config) is left alone. Each origin added or dropped is audited.
    static func syncAppOrigins(_ t: PostgresConnection, actor: String) throws {
        // Serialise concurrent syncs so two transactions cannot each miss the other's app.
        try t.execute("SELECT pg_advisory_xact_lock(hashtext('latchkey.apps'))")
        let needed = """
            SELECT 'android:apk-key-hash:' || fp AS origin FROM apps, jsonb_array_elements_text(apps.fingerprints) AS fp
            WHERE apps.platform = 'android'
            UNION SELECT 'https://' || rp_id FROM apps WHERE platform = 'ios'
            """
        let added = try t.query(SQL(unsafeRaw: """
            INSERT INTO origins (origin, source) SELECT origin, 'app' FROM (\(needed)) AS needed
            ON CONFLICT (origin) DO NOTHING RETURNING origin
            """))
        let removed = try t.query(SQL(unsafeRaw: """
            DELETE FROM origins WHERE source = 'app' AND origin NOT IN (\(needed)) RETURNING origin
            """))
        for (rows, action) in [(added, "origin.added"), (removed, "origin.removed")] {
            for r in rows {
                try Store.audit(t, actor: actor, action: action, subject: try r.string("origin"), detail: #"{"source":"app"}"#)
            }
        }
    }
}
