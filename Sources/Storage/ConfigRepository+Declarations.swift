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
            try ConfigRepository.declarations(try c.pipeline(ConfigRepository.readingDeclarations(rpId: rpId))[...])
        }
    }

    /// `declarations(rpId:)`' two statements, for one pipeline.
    static func readingDeclarations(rpId: String) -> [SQL] { [readingApps(rpId: rpId), readingOrigins] }

    /// The rows from what `readingDeclarations`' statements returned, in order.
    static func declarations(_ rows: ArraySlice<[Row]>) throws -> AppDeclarationRows {
        let rows = Array(rows)
        return AppDeclarationRows(apps: try rows[0].map(ConfigRepository.app), origins: try rows[1].map(ConfigRepository.origin))
    }
}
