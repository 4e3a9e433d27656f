import JSON
import Storage

extension PortabilityService {
    /// The most accounts one batch holds, and about the most bytes they may take (`ImportBatch`):
    /// a batch is one read and one write, whatever its accounts.
    public static let batchSize = 250
    public static let batchBytes = 1 << 20

    /// The outcomes of `entries` (a batch, in file order), one each, in their order. A refusal the
    /// file carries is reported as it is, and a credential id of an earlier account of the file
    /// (`seen`) is `duplicate_credential_id`; the others are read in one query, decided in order,
    /// and those to create are written in one statement, each whole or not at all. An account
    /// decided earlier in the batch is in the way of a later one as it would be had it been
    /// written first (`BatchClaims`), so a batch decides as one account at a time would; a dry run
    /// writes nothing, and decides each account against the database alone.
    public func importBatch(_ entries: [PortableEntry], run: ImportRun, seen: inout some CredentialIdsSeen) throws(StorageError) -> [ImportOutcome] {
        var outcomes = [ImportOutcome?](repeating: nil, count: entries.count)
        var candidates: [(index: Int, account: PortableAccount)] = []
        for (i, entry) in entries.enumerated() {
            switch entry.account {
            case .failure(let refusal):
                outcomes[i] = ImportOutcome(line: entry.line, username: refusal.username, outcome: .refused, reason: refusal.reason)
            case .success(var account):
                let ids = account.passkeys.map(\.credentialId)
                guard !ids.contains(where: seen.contains) else {
                    outcomes[i] = ImportOutcome(line: entry.line, username: account.username, outcome: .refused, reason: "duplicate_credential_id")
                    continue
                }
                for id in ids { seen.insert(id) }
                // An imported address is unverified unless the operator trusts the file's verifications.
                if !run.trustVerifiedEmails, account.email != nil { account.email?.verifiedAt = nil }
                candidates.append((i, account))
            }
        }
        let presences = try store.importPresences(candidates.map(\.account))
        var claims = BatchClaims()
        var creations: [(index: Int, account: PortableAccount, audit: AuditRecord)] = []
        for (candidate, stored) in zip(candidates, presences) {
            let (i, account) = candidate
            let presence = run.dryRun ? stored : claims.presence(stored, of: account)
            if let refusal = Self.decide(account, presence, policy) {
                outcomes[i] = ImportOutcome(line: entries[i].line, username: account.username, outcome: refusal.kind, reason: refusal.reason)
            } else if run.dryRun {
                outcomes[i] = ImportOutcome(line: entries[i].line, username: account.username, outcome: .created, reason: nil)
            } else {
                claims.claim(account)
                let audit = AuditRecord(.accountImported, actor: run.actor, subject: account.id,
                                        detail: [("sha256", .string(run.sha256)), ("passkeys", .number(Double(account.passkeys.count))),
                                                 ("deviceKeys", .number(Double(account.deviceKeys.count)))])
                creations.append((i, account, audit))
            }
        }
        if !creations.isEmpty {
            let written = try store.importAccounts(creations.map { ($0.account, $0.audit) })
            for (creation, created) in zip(creations, written) {
                outcomes[creation.index] = created
                    ? ImportOutcome(line: entries[creation.index].line, username: creation.account.username, outcome: .created, reason: nil)
                    : ImportOutcome(line: entries[creation.index].line, username: creation.account.username, outcome: .conflict,
                                    reason: "changed_during_import")
            }
        }
        return try outcomes.map { outcome throws(StorageError) in
            guard let outcome else { throw StorageError.undecodable(column: "import batch") }
            return outcome
        }
    }
}

/// The identifiers of the accounts a batch is to create, by the id of the account that holds
/// each: what the database would hold, for the later accounts of the batch, had the earlier ones
/// been written one at a time.
struct BatchClaims {
    private var accounts: [String: PortableAccount] = [:]
    private var usernames: [String: String] = [:]
    private var handles: [[UInt8]: String] = [:]
    private var externalIds: [String: String] = [:]
    private var emails: [String: String] = [:]
    private var credentials: [[UInt8]: String] = [:]
    private var deviceKeys: [String: String] = [:]

    mutating func claim(_ a: PortableAccount) {
        accounts[a.id] = a
        usernames[a.username] = a.id
        handles[a.userHandle] = a.id
        if let external = a.externalId { externalIds[external] = a.id }
        if let email = a.email { emails[email.address] = a.id }
        for p in a.passkeys { credentials[p.credentialId] = a.id }
        for d in a.deviceKeys { deviceKeys[d.id] = a.id }
    }

    /// `stored` (the database's answer for `a`) with the claims added: an earlier account of the
    /// batch under `a`'s id is the one stored there, and an identifier another one claimed is taken.
    func presence(_ stored: ImportPresence, of a: PortableAccount) -> ImportPresence {
        var p = stored
        if p.existing == nil, let earlier = accounts[a.id] { p.existing = earlier }
        func other(_ owner: String?) -> Bool { owner.map { $0 != a.id } ?? false }
        p.usernameTaken = p.usernameTaken || other(usernames[a.username])
        p.userHandleTaken = p.userHandleTaken || other(handles[a.userHandle])
        p.externalIdTaken = p.externalIdTaken || other(a.externalId.flatMap { externalIds[$0] })
        p.emailTaken = p.emailTaken || other(a.email.flatMap { emails[$0.address] })
        p.credentialTaken = p.credentialTaken || a.passkeys.contains { other(credentials[$0.credentialId]) }
        p.deviceKeyTaken = p.deviceKeyTaken || a.deviceKeys.contains { other(deviceKeys[$0.id]) }
        return p
    }
}

/// Entries gathered into batches for `importBatch`: at most `PortabilityService.batchSize`
/// accounts, and closed once their lines reach about `PortabilityService.batchBytes`.
public struct ImportBatch {
    public private(set) var entries: [PortableEntry] = []
    private var bytes = 0
    private let size: Int
    private let maxBytes: Int

    public init(size: Int = PortabilityService.batchSize, maxBytes: Int = PortabilityService.batchBytes) {
        self.size = size
        self.maxBytes = maxBytes
        entries.reserveCapacity(size)
    }

    /// Adds `entry` (`bytes`: the length of its line in the file, or an estimate); the batch
    /// when it is full, then started again.
    public mutating func add(_ entry: PortableEntry, bytes: Int) -> [PortableEntry]? {
        entries.append(entry)
        self.bytes += bytes
        guard entries.count >= size || self.bytes >= maxBytes else { return nil }
        return take()
    }

    /// `add`, the bytes estimated from the account.
    public mutating func add(_ entry: PortableEntry) -> [PortableEntry]? {
        add(entry, bytes: Self.estimate(entry))
    }

    /// What is gathered (nil when nothing), the batch started again.
    public mutating func take() -> [PortableEntry]? {
        guard !entries.isEmpty else { return nil }
        defer { entries.removeAll(keepingCapacity: true); bytes = 0 }
        return entries
    }

    /// About the bytes an account's line takes (what a batch's statement carries of it).
    static func estimate(_ entry: PortableEntry) -> Int {
        guard case .success(let a) = entry.account else { return 64 }
        let passkeys = a.passkeys.reduce(0) { $0 + 4 * ($1.credentialId.count + $1.publicKey.count) / 3 + $1.name.utf8.count + 300 }
        let devices = a.deviceKeys.reduce(0) { $0 + 4 * $1.publicKey.count / 3 + $1.deviceId.utf8.count + 200 }
        return 200 + a.username.utf8.count + a.displayName.utf8.count + (a.email?.address.utf8.count ?? 0) + passkeys + devices
    }
}

/// One import's accounts in file order, gathered into batches (`ImportBatch`) and each batch
/// decided and written by `importBatch` once full; the file's credential ids are remembered across
/// batches. The command line and `POST /admin/v1/import` both import through it.
public struct ImportPass {
    let service: PortabilityService
    let run: PortabilityService.ImportRun
    private var seen = CredentialIdDigests()
    private var batch = ImportBatch()
    /// The first line of the batch whose write failed (the batches before it are done).
    public private(set) var failedFrom: Int? = nil

    public init(_ service: PortabilityService, run: PortabilityService.ImportRun) {
        self.service = service
        self.run = run
    }

    /// Adds an account (`bytes`: its line's length, when the file has lines, else estimated); the
    /// outcomes of the batch it completes, empty while the batch fills.
    public mutating func add(_ entry: PortableEntry, bytes: Int? = nil) throws(StorageError) -> [ImportOutcome] {
        guard let full = bytes.map({ batch.add(entry, bytes: $0) }) ?? batch.add(entry) else { return [] }
        return try write(full)
    }

    /// The outcomes of the last, partly filled batch.
    public mutating func finish() throws(StorageError) -> [ImportOutcome] {
        guard let rest = batch.take() else { return [] }
        return try write(rest)
    }

    private mutating func write(_ entries: [PortableEntry]) throws(StorageError) -> [ImportOutcome] {
        do {
            return try service.importBatch(entries, run: run, seen: &seen)
        } catch {
            failedFrom = entries.first?.line
            throw error
        }
    }
}
