import Storage
import WebAuthn

/// The origin allowlist from PostgreSQL. Invalidated at once by this instance's own changes and by
/// the change feed from any other (`ConfigRepository.watch`), and re-read at least every second
/// anyway, so an admin change applies on every instance within one second even without the feed
/// (which is what happens behind a transaction pooler, where no LISTEN runs).
public final class OriginCache: Sendable {
    let config: ConfigRepository
    private let cache: RefreshingCache<OriginPolicy>

    init(config: ConfigRepository, runtime: Runtime) {
        self.config = config
        cache = RefreshingCache(maxAge: 1, clock: runtime.uptime)
    }

    /// The allowlist (≤ 1 s old); the last one read when the database is unreachable.
    public func policy() -> OriginPolicy {
        (try? cache.get { () throws(StorageError) -> OriginPolicy in OriginPolicy(try config.origins().map(\.origin)) })
            ?? cache.stale ?? OriginPolicy([String]())
    }

    public func invalidate() { cache.invalidate() }
}
