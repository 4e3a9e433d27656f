import Storage

/// What export and import need of the database: pages of accounts, one account by username, an
/// import's one read and one write for a batch of accounts, an HTTP run's start
/// (`PortabilityRepository` in PostgreSQL).
public protocol PortabilityStore: Sendable {
    func exportPage(after: String?, limit: Int) throws(StorageError) -> [PortableAccount]
    func exportAccount(username: String) throws(StorageError) -> PortableAccount?
    /// What is in the way of each of `accounts`, in their order: one query.
    func importPresences(_ accounts: [PortableAccount]) throws(StorageError) -> [ImportPresence]
    /// Creates each account whole with its audit line, in one statement; per account, whether it
    /// was created (false: another writer took one of its identifiers since the read).
    func importAccounts(_ batch: [(account: PortableAccount, audit: AuditRecord)]) throws(StorageError) -> [Bool]
    /// An HTTP export's or import's start: the step-up redeemed with the audit line, in one write
    /// (`.conflict(.stepUpUsed)` when it cannot be).
    func begin(redeeming redemption: StepUpRedemption?, audit: AuditRecord) throws(StorageError)
}

extension PortabilityRepository: PortabilityStore {}
