import Foundation
import HTTP
import Storage
import WellKnown

/// `/.well-known/apple-app-site-association`, `assetlinks.json` and `webauthn`: a file kept in
/// `LATCHKEY_WELLKNOWN_DIR` wins; otherwise the one built from the declared apps and the allowlist
/// (cached ≤ 1 s, and dropped at once on this instance's changes and on the change feed).
public final class WellKnownService: Sendable {
    let config: ConfigRepository
    let origins: OriginCache
    let configuration: Configuration
    private let files = RefreshingCache<[String: [UInt8]]>(maxAge: WellKnownService.maxAge)

    /// Built files are re-read at most this often without a notification (same bound as OriginCache).
    static let maxAge = 1.0
    static let names = ["apple-app-site-association", "assetlinks.json", "webauthn"]

    init(config: ConfigRepository, origins: OriginCache, configuration: Configuration) {
        self.config = config
        self.origins = origins
        self.configuration = configuration
    }

    func invalidate() { files.invalidate() }

    func response(for name: String) throws(ServiceError) -> Response {
        let path = configuration.wellKnownDirectory + "/" + name
        var bytes = FileManager.default.contents(atPath: path).map { [UInt8]($0) }
        if bytes == nil { bytes = try builtFiles()[name] }
        guard let bytes else { throw ServiceError.notFound(name) }
        return .json(bytes: bytes, headers: [("Cache-Control", "public, max-age=300")])
    }

    /// The three files built from this rpId's apps and the allowlist.
    public func builtFiles() throws(ServiceError) -> [String: [UInt8]] {
        try files.get { () throws(ServiceError) -> [String: [UInt8]] in
            let rows = try storage { () throws(StorageError) in try config.apps(rpId: configuration.rpId) }
            let allowlist = try storage { () throws(StorageError) in try config.origins() }.map(\.origin)
            var fresh: [String: [UInt8]] = [:]
            for f in AssociationFiles.build(apps: AppDeclarations.apps(rows), origins: allowlist, rpId: configuration.rpId) {
                fresh[f.name] = f.bytes
            }
            return fresh
        }
    }
}
