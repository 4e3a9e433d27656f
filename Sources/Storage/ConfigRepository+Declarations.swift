import PostgreSQL

/// What the association files and the console's preview are built from: one rpId's apps (iOS
/// first, then by id) and the whole origin allowlist (by origin), read together.
public struct AppDeclarationRows: Sendable, Equatable {
    public let apps: [AppRecord]
    public let origins: [OriginRow]

    public struct OriginRow: Sendable, Equatable {
        public let origin: String
        /// `config`, `admin` or `app` (synced from the apps).
        public let source: String

        public init(origin: String, source: String) {
            self.origin = origin
            self.source = source
        }
    }

    public init(apps: [AppRecord], origins: [OriginRow]) {
        self.apps = apps
        self.origins = origins
    }
}

extension ConfigRepository {
    /// `apps(rpId:)` and `origins()` in one round trip (one pipeline).
    public func declarations(rpId: String) throws(StorageError) -> AppDeclarationRows {
        try pool.run { c in
            let rows = try c.pipeline([
                """
                SELECT rp_id, platform, app_id, fingerprints::text AS fingerprints, handle_all_urls, created_at
                FROM apps WHERE rp_id = \(rpId) ORDER BY platform DESC, app_id
                """,
                "SELECT origin, source FROM origins ORDER BY origin",
            ])
            return AppDeclarationRows(apps: try rows[0].map(ConfigRepository.app),
                                      origins: try rows[1].map { .init(origin: try $0.string("origin"), source: try $0.string("source")) })
        }
    }
}
