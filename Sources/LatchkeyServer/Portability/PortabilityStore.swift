import Storage

/// What export and import need of the database: pages of accounts, one account by username, an
/// import's one read and its one write, an HTTP run's start (`PortabilityRepository` in PostgreSQL).
public protocol PortabilityStore: Sendable {
    func exportPage(after: String?, limit: Int) throws(StorageError) -> [PortableAccount]
    func exportAccount(username: String) throws(StorageError) -> PortableAccount?
    func importPresence(_ account: PortableAccount) throws(StorageError) -> ImportPresence
    func importAccount(_ account: PortableAccount, audit: AuditRecord) throws(StorageError) -> Bool
    /// An HTTP export's or import's start: the step-up redeemed with the audit line, in one write
    /// (`.conflict(.stepUpUsed)` when it cannot be).
    func begin(redeeming redemption: StepUpRedemption?, audit: AuditRecord) throws(StorageError)
}

extension PortabilityRepository: PortabilityStore {}
