import Foundation
import JSON
import Storage
import WellKnown

/// `/.well-known/apple-app-site-association`, `assetlinks.json` and `webauthn`: built from the
/// declared apps and the allowlist (cached ≤ 1 s, and dropped at once on this instance's changes and
/// on the change feed) — unless the operator pinned a folder (`LATCHKEY_WELLKNOWN_DIR`), whose
/// files then win; `pinnedDisagreements()` says where they differ from the declarations.
public final class WellKnownService: Sendable {
    let store: any AppStore
    /// The rpId the association files are built for.
    let rpId: String
    /// `LATCHKEY_WELLKNOWN_DIR`: the operator's pinned files, which win over the built ones.
    let pinnedDirectory: String?
    private let files: RefreshingCache<[String: [UInt8]]>

    /// Built files are re-read at most this often without a notification (same bound as OriginCache).
    static let maxAge = 1.0
    static let names = ["apple-app-site-association", "assetlinks.json", "webauthn"]

    init(store: any AppStore, relyingParty: RelyingParty, pinnedDirectory: String?, runtime: Runtime) {
        self.store = store
        rpId = relyingParty.id
        self.pinnedDirectory = pinnedDirectory
        files = RefreshingCache(maxAge: Self.maxAge, clock: runtime.uptime)
    }

    func invalidate() { files.invalidate() }

    /// The file served at `/.well-known/<name>`: the pinned folder's, else the built one.
    func file(_ name: String) throws(ServiceError) -> [UInt8] {
        var bytes = pinnedFile(name)
        if bytes == nil { bytes = try builtFiles()[name] }
        guard let bytes else { throw ServiceError.notFound(name) }
        return bytes
    }

    /// A file of the pinned folder (`LATCHKEY_WELLKNOWN_DIR`), nil when none is pinned or the file is absent.
    func pinnedFile(_ name: String) -> [UInt8]? {
        guard let directory = pinnedDirectory else { return nil }
        return FileManager.default.contents(atPath: directory + "/" + name).map { [UInt8]($0) }
    }

    /// Where the pinned folder's files disagree with the declared apps (an app declared but not in
    /// them, or in them but not declared): `serve` prints these as start-up warnings. Empty when
    /// nothing is pinned.
    public func pinnedDisagreements() throws(ServiceError) -> [AssociationProblem] {
        guard pinnedDirectory != nil else { return [] }
        let apps = AppDeclarations.apps(try storage { () throws(StorageError) in try store.apps(rpId: rpId) })
        let documents = Self.names.map { WellKnownDocument(name: $0, body: pinnedFile($0)) }
        return AssociationChecker(rpId: rpId).checkDeclared(documents, apps: apps)
    }

    /// The three files built from this rpId's apps and the allowlist.
    public func builtFiles() throws(ServiceError) -> [String: [UInt8]] {
        try files.get { () throws(ServiceError) -> [String: [UInt8]] in
            let rows = try storage { () throws(StorageError) in try store.declarations(rpId: rpId) }
            var fresh: [String: [UInt8]] = [:]
            for f in AssociationFiles.build(apps: AppDeclarations.apps(rows.apps), origins: rows.origins.map(\.origin), rpId: rpId) {
                fresh[f.name] = f.bytes
            }
            return fresh
        }
    }

    /// What `preview` reads, for the caller's resolution to read with an admin user's role.
    var previewRead: AdminPageRequest { .declarations(rpId: rpId) }

    /// `POST /admin/v1/wellknown/preview` `{"app": <declaration>?}`: the three files that would be
    /// served — now, or once `app` is declared (replacing the app with its id) — with the allowlist
    /// that would follow, and the problems `latchkey wellknown check` would report on them. Reads only.
    /// `loaded`: the declarations the admin's caller resolution read with the role (`previewRead`,
    /// `GuardLoads.adminPage`).
    func preview(candidate: AssociatedApp?, loaded: AdminPageRead? = nil) throws(ServiceError) -> WellKnownPreview {
        let rows: AppDeclarationRows
        if case .declarations(let read)? = loaded {
            rows = read
        } else {
            rows = try storage { () throws(StorageError) in try store.declarations(rpId: rpId) }
        }
        var apps = AppDeclarations.apps(rows.apps)
        if let candidate {
            apps.removeAll { $0.identifier == candidate.identifier }
            apps.append(candidate)
        }
        // The allowlist as ConfigRepository.syncAppOrigins would leave it: hand-added origins, plus what the apps need.
        var allowlist = rows.origins.filter { $0.source != "app" }.map(\.origin)
        for origin in apps.flatMap({ $0.origins(rpId: rpId) }) where !allowlist.contains(origin) { allowlist.append(origin) }
        allowlist.sort()
        var documents: [WellKnownDocument] = []
        var files: [WellKnownPreview.File] = []
        for built in AssociationFiles.build(apps: apps, origins: allowlist, rpId: rpId) {
            // A file in LATCHKEY_WELLKNOWN_DIR is what is served, whatever the declarations say.
            let kept = pinnedFile(built.name)
            let bytes = kept ?? built.bytes
            documents.append(WellKnownDocument(name: built.name, body: bytes))
            files.append(WellKnownPreview.File(name: built.name, content: bytes, built: kept == nil ? nil : built.bytes))
        }
        let problems = AssociationChecker(rpId: rpId, origins: allowlist).check(documents)
        return WellKnownPreview(rpId: rpId, origins: allowlist, files: files, problems: problems)
    }
}

/// What `POST /admin/v1/wellknown/preview` shows: the files that would be served, the allowlist
/// that would follow, and what `latchkey wellknown check` would report on them.
struct WellKnownPreview: Sendable {
    struct File: Sendable {
        let name: String
        /// What is served: the built file, or the one kept in LATCHKEY_WELLKNOWN_DIR.
        let content: [UInt8]
        /// What the declarations build, when a kept file overrides it.
        let built: [UInt8]?
    }

    let rpId: String
    let origins: [String]
    let files: [File]
    let problems: [AssociationProblem]
    var ok: Bool { problems.isEmpty }
}
