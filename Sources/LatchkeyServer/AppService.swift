import Foundation
import HTTP
import JSON
import PostgreSQL
import Storage
import Synchronization
import WellKnown

/// Associated native apps (issue: native-app association): the one declaration the origin
/// allowlist and the three well-known files follow from. Storage keeps apps and their origins in
/// one transaction; a LISTEN connection (`ConfigWatcher`) tells this instance at once when any
/// instance, or the CLI, changed either, and the caches below also expire after one second.
public final class AppService: Sendable {
    let store: Store
    let configuration: Configuration
    let origins: OriginCache
    private let files = RefreshingCache<[String: [UInt8]]>(maxAge: AppService.maxAge)
    private let watcher: ConfigWatcher?

    /// Built files are re-read at most this often without a notification (same bound as OriginCache).
    static let maxAge = 1.0

    public init(store: Store, configuration: Configuration, origins: OriginCache) {
        self.store = store
        self.configuration = configuration
        self.origins = origins
        watcher = configuration.databaseURL.isEmpty ? nil : ConfigWatcher(url: configuration.databaseURL) { [origins, files] in
            origins.invalidate()
            files.invalidate()
        }
    }

    deinit { watcher?.stop() }

    /// True while the change feed is connected (else caches rely on their one-second expiry).
    public var isListening: Bool { watcher?.isListening ?? false }

    // MARK: Declarations

    /// An admin's declaration (API body, or what the CLI assembled from flags) → a validated app.
    /// iOS: `{"platform":"ios","teamId","bundleId"}` or `{"platform":"ios","appId":"TEAMID.bundle.id"}`;
    /// Android: `{"platform":"android","packageName","fingerprints":[…],"handleAllUrls"?}`.
    public static func declaration(_ body: JSONValue) throws(ServiceError) -> AssociatedApp {
        do {
            switch body["platform"]?.stringValue {
            case "ios":
                if let appId = body["appId"]?.stringValue { return .ios(try IOSApp(appID: appId)) }
                guard let team = body["teamId"]?.stringValue, let bundle = body["bundleId"]?.stringValue else {
                    throw ServiceError.invalid("an iOS app needs teamId and bundleId (or appId TEAMID.bundle.id)")
                }
                return .ios(try IOSApp(teamId: team, bundleId: bundle))
            case "android":
                guard let package = body["packageName"]?.stringValue else { throw ServiceError.invalid("an Android app needs packageName") }
                guard let list = body["fingerprints"]?.arrayValue else {
                    throw ServiceError.invalid("an Android app needs fingerprints: [\(SigningCertificateFingerprint.expectedForm)]")
                }
                var fps: [SigningCertificateFingerprint] = []
                for value in list {
                    guard let s = value.stringValue else { throw ServiceError.invalid("fingerprints are strings: \(SigningCertificateFingerprint.expectedForm)") }
                    fps.append(try SigningCertificateFingerprint(parsing: s))
                }
                let handleAll = body["handleAllUrls"]?.boolValue ?? false
                return .android(try AndroidApp(packageName: package, fingerprints: fps, handleAllURLs: handleAll))
            default:
                throw ServiceError.invalid("platform must be ios or android")
            }
        } catch let e as WellKnownError {
            throw ServiceError.invalid(e.reason)
        } catch let e as ServiceError {
            throw e
        } catch {
            throw ServiceError.invalid("invalid app declaration")
        }
    }

    public static func record(_ app: AssociatedApp, rpId: String) -> AppRecord {
        switch app {
        case .ios(let a): AppRecord(rpId: rpId, platform: "ios", appId: a.appID)
        case .android(let a): AppRecord(rpId: rpId, platform: "android", appId: a.packageName,
                                        fingerprints: a.fingerprints.map(\.base64url), handleAllURLs: a.handleAllURLs)
        }
    }

    /// A stored row back into a typed app; rows that no longer validate are skipped (and logged
    /// by the checker as missing entries) rather than served.
    public static func app(_ r: AppRecord) -> AssociatedApp? {
        switch r.platform {
        case "ios": return (try? IOSApp(appID: r.appId)).map { .ios($0) }
        case "android":
            var fps: [SigningCertificateFingerprint] = []
            for f in r.fingerprints { guard let fp = try? SigningCertificateFingerprint(parsing: f) else { return nil }; fps.append(fp) }
            return (try? AndroidApp(packageName: r.appId, fingerprints: fps, handleAllURLs: r.handleAllURLs)).map { .android($0) }
        default: return nil
        }
    }

    public static func json(_ app: AssociatedApp, rpId: String, createdAt: Date? = nil) -> JSONValue {
        var m: [(key: String, value: JSONValue)] = [("id", .string(app.identifier)), ("platform", .string(app.platform))]
        switch app {
        case .ios(let a):
            m += [("appId", .string(a.appID)), ("teamId", .string(a.teamId)), ("bundleId", .string(a.bundleId))]
        case .android(let a):
            m += [("packageName", .string(a.packageName)),
                  ("fingerprints", .array(a.fingerprints.map { .object([("sha256", .string($0.keytool)), ("origin", .string($0.origin))]) })),
                  ("handleAllUrls", .bool(a.handleAllURLs))]
        }
        m.append(("origins", .array(app.origins(rpId: rpId).map { .string($0) })))
        if let createdAt { m.append(("createdAt", .string(iso8601(createdAt)))) }
        return .object(m)
    }

    /// `ios:TEAMID.bundle.id` / `android:package` → (platform, appId).
    public static func parseIdentifier(_ id: String) -> (platform: String, appId: String)? {
        guard let colon = id.firstIndex(of: ":") else { return nil }
        let platform = String(id[..<colon]), appId = String(id[id.index(after: colon)...])
        guard ["ios", "android"].contains(platform), !appId.isEmpty else { return nil }
        return (platform, appId)
    }

    // MARK: Admin

    public func list() throws(ServiceError) -> JSONValue {
        let rows = try db { try store.apps(rpId: configuration.rpId) }
        return .object([("apps", .array(rows.compactMap { r in Self.app(r).map { Self.json($0, rpId: r.rpId, createdAt: r.createdAt) } }))])
    }

    /// Creates or replaces the app (same id) → (app JSON, created?).
    public func put(_ body: JSONValue, actor: String = "admin") throws(ServiceError) -> (JSONValue, Bool) {
        let app = try Self.declaration(body)
        if case .ios = app {
            // SPEC: iOS apps report https://<rpId>; that origin must be a valid allowlist entry.
            if case .failure(let e) = OriginRules.validate("https://" + configuration.rpId, developmentMode: configuration.developmentMode) {
                throw ServiceError.invalid("rpId \(configuration.rpId) cannot carry an iOS app: \(e.reason)")
            }
        }
        let change = try db { try store.putApp(Self.record(app, rpId: configuration.rpId), actor: actor) }
        changed()
        return (Self.json(app, rpId: configuration.rpId), change == .created)
    }

    public func remove(_ id: String, actor: String = "admin") throws(ServiceError) {
        guard let (platform, appId) = Self.parseIdentifier(id) else {
            throw ServiceError.invalid("app ids are ios:TEAMID.bundle.id or android:package.name")
        }
        guard try db({ try store.removeApp(rpId: configuration.rpId, platform: platform, appId: appId, actor: actor) }) else {
            throw ServiceError.notFound("app")
        }
        changed()
    }

    /// This instance sees its own change at once; others hear it through NOTIFY.
    func changed() {
        origins.invalidate()
        files.invalidate()
    }

    // MARK: Well-known

    public func builtFile(_ name: String) throws(ServiceError) -> [UInt8]? { try builtFiles()[name] }

    /// The three files built from this rpId's apps and the allowlist (cached ≤ 1 s).
    public func builtFiles() throws(ServiceError) -> [String: [UInt8]] {
        try files.get { () throws(ServiceError) -> [String: [UInt8]] in
            let rows = try db { try store.apps(rpId: configuration.rpId) }
            let allowlist = try db { try store.origins() }.map(\.origin)
            var fresh: [String: [UInt8]] = [:]
            for f in AssociationFiles.build(apps: rows.compactMap(Self.app), origins: allowlist, rpId: configuration.rpId) {
                fresh[f.name] = f.bytes
            }
            return fresh
        }
    }
}

/// Listens on `latchkey_config` on its own connection and calls `onChange` for every
/// notification, and after every (re)connect since notifications may have been missed.
final class ConfigWatcher: Sendable {
    private let stopped = Mutex(false)
    private let listening = Mutex(false)

    init(url: String, onChange: @escaping @Sendable () -> Void) {
        let thread = Thread { [self] in self.run(url: url, onChange: onChange) }
        thread.name = "latchkey-config-watcher"
        thread.start()
    }

    var isListening: Bool { listening.withLock { $0 } }
    func stop() { stopped.withLock { $0 = true } }

    private func run(url: String, onChange: @escaping @Sendable () -> Void) {
        var backoff = 0.1
        while !stopped.withLock({ $0 }) {
            guard let listener = try? PostgresListener(url: url, channels: [Store.configChannel]) else {
                Thread.sleep(forTimeInterval: backoff)
                backoff = min(backoff * 2, 2)
                continue
            }
            backoff = 0.1
            listening.withLock { $0 = true }
            onChange()
            while !stopped.withLock({ $0 }) {
                do {
                    if !(try listener.wait(timeout: 0.25)).isEmpty { onChange() }
                } catch {
                    break
                }
            }
            listening.withLock { $0 = false }
        }
    }
}
