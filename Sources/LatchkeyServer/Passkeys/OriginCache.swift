import Storage
import WebAuthn

/// The origin allowlist from PostgreSQL. Invalidated at once by this instance's own changes and by
/// the change feed from any other (`ConfigRepository.watch`), and re-read at least every second
/// anyway, so an admin change applies on every instance within one second even without the feed
/// (which is what happens behind a transaction pooler, where no LISTEN runs).
///
/// Outside development mode a stored `http://` origin is ignored (SPEC "Assurance": it can only have
/// come from a dev-mode instance on the same database): the policy leaves it out, so a ceremony from it
/// is `origin_not_allowed`, and `serve` names it at start-up (`ignoredOrigins`).
public final class OriginCache: Sendable {
    let config: ConfigRepository
    let developmentMode: Bool
    private let cache: RefreshingCache<OriginPolicy>

    init(config: ConfigRepository, developmentMode: Bool, runtime: Runtime) {
        self.config = config
        self.developmentMode = developmentMode
        cache = RefreshingCache(maxAge: 1, clock: runtime.uptime)
    }

    /// The allowlist (≤ 1 s old); the last one read when the database is unreachable.
    public func policy() -> OriginPolicy {
        (try? cache.get { () throws(StorageError) -> OriginPolicy in
            OriginPolicy(try config.origins().map(\.origin).filter { !ignores($0) })
        }) ?? cache.stale ?? OriginPolicy([String]())
    }

    /// Stored origins this instance does not honour: `http://…` outside development mode.
    public func ignoredOrigins() throws(StorageError) -> [String] { try config.origins().map(\.origin).filter(ignores) }

    private func ignores(_ origin: String) -> Bool { !developmentMode && origin.lowercased().hasPrefix("http://") }

    public func invalidate() { cache.invalidate() }
}
