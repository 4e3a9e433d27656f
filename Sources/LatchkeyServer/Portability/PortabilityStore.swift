import Storage

/// What export and import need of the database: pages of accounts, one account by username, an
/// import's one read and its one write (`PortabilityRepository` in PostgreSQL).
public protocol PortabilityStore: Sendable {
    func exportPage(after: String?, limit: Int) throws(StorageError) -> [PortableAccount]
    func exportAccount(username: String) throws(StorageError) -> PortableAccount?
    func importPresence(_ account: PortableAccount) throws(StorageError) -> ImportPresence
    func importAccount(_ account: PortableAccount, audit: AuditRecord) throws(StorageError) -> Bool
}

extension PortabilityRepository: PortabilityStore {}
