import Storage

/// What the association files are built from (ARCHITECTURE.md "Which store each feature uses"):
/// the declared apps and the origin allowlist. `ConfigRepository` in PostgreSQL; the service tests
/// keep the same rows in memory.
protocol AppStore: Sendable {
    /// One rpId's apps, iOS first, then by id.
    func apps(rpId: String) throws(StorageError) -> [AppRecord]
    /// Those apps and the whole allowlist (by origin), in one read.
    func declarations(rpId: String) throws(StorageError) -> AppDeclarationRows
}

extension ConfigRepository: AppStore {
    func apps(rpId: String) throws(StorageError) -> [AppRecord] { try apps(rpId: Optional(rpId)) }
}
