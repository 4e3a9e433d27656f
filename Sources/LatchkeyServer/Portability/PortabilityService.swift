import Foundation
import Crypto
import JSON
import Storage

/// The settings export and import decide with (SPEC "Portability"): this deployment's rpId (a
/// file's must equal it), the passkey limit, the authenticator deny list and the metadata's
/// revocations an import obeys.
public struct PortabilityPolicy: Sendable {
    public var rpId: String
    public var maxPasskeys: Int
    public var authenticatorsDeny: [[UInt8]]
    /// The refusing status (SPEC "Authenticator metadata": `REVOKED`, `USER_VERIFICATION_BYPASS`,
    /// the compromises) of an AAGUID's latest status report in the metadata in use, nil when none:
    /// a passkey registration would refuse is not imported either.
    public var metadataRefusal: @Sendable ([UInt8]) -> String?

    public init(rpId: String, maxPasskeys: Int, authenticatorsDeny: [[UInt8]],
                metadataRefusal: @escaping @Sendable ([UInt8]) -> String? = { _ in nil }) {
        self.rpId = rpId
        self.maxPasskeys = maxPasskeys
        self.authenticatorsDeny = authenticatorsDeny
        self.metadataRefusal = metadataRefusal
    }

    public init(_ c: Configuration, metadata: MetadataStore? = nil) {
        self.init(rpId: c.rpId, maxPasskeys: c.maxPasskeys, authenticatorsDeny: c.authenticatorsDeny,
                  metadataRefusal: { aaguid in metadata?.refusingStatus(aaguid: aaguid) })
    }

    /// The command line's policy: with `LATCHKEY_MDS_BLOB` set, its metadata loaded first (as
    /// `serve` would); a BLOB that does not load is the error's text, and nothing is imported.
    public static func loadingMetadata(_ c: Configuration, database: Database) -> Result<PortabilityPolicy, MetadataLoadError> {
        guard c.mdsBlobPath != nil else { return .success(PortabilityPolicy(c)) }
        let metadata = MetadataStore(configuration: c, runtime: .system, ledger: database.metadataState)
        return metadata.reload().map { _ in PortabilityPolicy(c, metadata: metadata) }
    }
}

/// One account line's outcome: `created`, `skipped` (a re-run), `conflict` (something here
/// already; nothing merged) or `refused` (the line itself is bad), with the reason.
public struct ImportOutcome: Sendable, Equatable {
    public enum Kind: String, Sendable { case created, skipped, conflict, refused }
    public let line: Int
    public let username: String?
    public let outcome: Kind
    public let reason: String?

    public init(line: Int, username: String?, outcome: Kind, reason: String?) {
        self.line = line
        self.username = username
        self.outcome = outcome
        self.reason = reason
    }
}

/// Export and import of whole accounts. Export pages through users (`pageSize` at a time, so the
/// accounts are never all in memory); import takes the accounts a batch at a time
/// (`importBatch`): one read for the batch, each account decided, one write creating those to
/// create, each whole or not at all.
public struct PortabilityService: Sendable {
    public static let pageSize = 500

    let store: any PortabilityStore
    let policy: PortabilityPolicy
    let runtime: Runtime

    public init(store: any PortabilityStore, policy: PortabilityPolicy, runtime: Runtime = .system) {
        self.store = store
        self.policy = policy
        self.runtime = runtime
    }

    /// Writes the export (the accounts `usernames` names, or every account when nil; an unknown
    /// username is skipped) to `write`, line by line, then the trailer. Returns the count and the
    /// file's SHA-256 (hex).
    public func export(usernames: [String]?, write: ([UInt8]) throws -> Void) throws -> (count: Int, sha256: String) {
        let checksum = StreamingDigestLines()
        func emit(_ account: PortableAccount) throws {
            let line = PortableFile.line(account, rpId: policy.rpId)
            checksum.add(line)
            try write(line)
        }
        if let usernames {
            for name in usernames {
                if let account = try store.exportAccount(username: name) { try emit(account) }
            }
        } else {
            var after: String? = nil
            while true {
                let page = try store.exportPage(after: after, limit: Self.pageSize)
                for account in page { try emit(account) }
                guard page.count == Self.pageSize, let last = page.last else { break }
                after = last.id
            }
        }
        let (count, digest) = checksum.finish()
        try write(PortableFile.trailer(count: count, sha256: digest))
        return (count, PortableFile.hex(digest))
    }

    /// The context the formats read a file in: this deployment's rpId, the rpId the operator
    /// states for a file that names none (`--rp-id`), the clock and randomness.
    public func readContext(statedRpId: String?) -> PortableFormat.Context {
        PortableFormat.Context(rpId: policy.rpId, statedRpId: statedRpId, now: runtime.now(), random: runtime.random)
    }

    /// Options of one import run: what the file's sha256 is (audited with each account), who runs
    /// it, whether to write, and whether stated verifications of addresses are trusted (only on the
    /// command line).
    public struct ImportRun: Sendable {
        public var sha256: String
        public var actor: String
        public var dryRun: Bool
        public var trustVerifiedEmails: Bool

        public init(sha256: String, actor: String, dryRun: Bool, trustVerifiedEmails: Bool) {
            self.sha256 = sha256
            self.actor = actor
            self.dryRun = dryRun
            self.trustVerifiedEmails = trustVerifiedEmails
        }
    }

    /// The outcome of account line `number` (1-based) of a Latchkey file whose checksum was verified.
    /// `seen`: the credential ids of the lines before, so that an id twice in one file is refused.
    public func importLine(_ bytes: [UInt8], number: Int, run: ImportRun, seen: inout some CredentialIdsSeen) throws(StorageError) -> ImportOutcome {
        try importBatch([entry(line: bytes, number: number)], run: run, seen: &seen)[0]
    }

    /// Account line `number` (1-based, without its `\n`) of a Latchkey file whose checksum was
    /// verified, read as an entry for `importBatch`.
    public func entry(line bytes: [UInt8], number: Int) -> PortableEntry {
        let context = PortableFormat.Context(rpId: policy.rpId, now: runtime.now(), random: runtime.random)
        return PortableEntry(line: number, account: PortableFile.parse(bytes, context))
    }

    /// The outcome of one account of any format (`PortableFormat.read`), as `importBatch` decides it.
    public func importEntry(_ entry: PortableEntry, run: ImportRun, seen: inout some CredentialIdsSeen) throws(StorageError) -> ImportOutcome {
        try importBatch([entry], run: run, seen: &seen)[0]
    }

    /// The decision, pure: nil to create the account, else `skipped` (the same account is here: a
    /// re-run) or `conflict` with what is in the way. Never a merge.
    static func decide(_ a: PortableAccount, _ p: ImportPresence, _ policy: PortabilityPolicy) -> (kind: ImportOutcome.Kind, reason: String)? {
        if let existing = p.existing {
            return sameAccount(existing, a) ? (.skipped, "already_imported") : (.conflict, "user_id_exists")
        }
        if p.usernameTaken { return (.conflict, "username_exists") }
        if p.userHandleTaken { return (.conflict, "user_handle_exists") }
        if p.externalIdTaken { return (.conflict, "external_id_exists") }
        if p.emailTaken { return (.conflict, "email_exists") }
        if p.credentialTaken { return (.conflict, "credential_exists") }
        if p.deviceKeyTaken { return (.conflict, "device_key_exists") }
        if a.passkeys.count > policy.maxPasskeys { return (.conflict, "max_passkeys") }
        if a.passkeys.contains(where: { policy.authenticatorsDeny.contains($0.aaguid) }) { return (.conflict, "authenticator_denied") }
        for p in a.passkeys {
            if let status = policy.metadataRefusal(p.aaguid) { return (.conflict, "metadata_" + status.lowercased()) }
        }
        return nil
    }

    /// A re-run: the stored account is the line's (user, passkeys and device keys by id and key).
    /// Counters and last uses may have moved on since; they do not make it another account.
    static func sameAccount(_ stored: PortableAccount, _ line: PortableAccount) -> Bool {
        func keys(_ a: PortableAccount) -> [[UInt8]] { a.passkeys.map { $0.credentialId + [0] + $0.publicKey }.sorted { $0.lexicographicallyPrecedes($1) } }
        func devices(_ a: PortableAccount) -> [String] { a.deviceKeys.map { $0.id + "\u{0}" + $0.publicKey.map(String.init).joined(separator: ".") }.sorted() }
        let handleMatches = line.passkeys.isEmpty || stored.userHandle == line.userHandle
        return stored.username == line.username && stored.displayName == line.displayName && stored.externalId == line.externalId
            && handleMatches && keys(stored) == keys(line) && devices(stored) == devices(line)
    }
}

/// The credential ids of a file's accounts so far, for `duplicate_credential_id`.
public protocol CredentialIdsSeen {
    func contains(_ id: [UInt8]) -> Bool
    mutating func insert(_ id: [UInt8])
}

extension Set: CredentialIdsSeen where Element == [UInt8] {
    public mutating func insert(_ id: [UInt8]) { _ = self.insert(id) as (inserted: Bool, memberAfterInsert: [UInt8]) }
}

/// The ids as the first 8 bytes of their SHA-256: 8 bytes an id however long it is, so that a
/// streamed import of any number of accounts holds little more than one line. Two ids of one
/// file share a digest with probability about n²/2⁶⁵ (3·10⁻¹⁰ for 100,000 passkeys); SHA-256
/// leaves no way to make them collide on purpose.
public struct CredentialIdDigests: CredentialIdsSeen {
    private var digests = Set<UInt64>()

    public init() {}

    static func digest(_ id: [UInt8]) -> UInt64 { Digest.sha256(id).prefix(8).reduce(0) { $0 << 8 | UInt64($1) } }

    public func contains(_ id: [UInt8]) -> Bool { digests.contains(Self.digest(id)) }
    public mutating func insert(_ id: [UInt8]) { digests.insert(Self.digest(id)) }
}

/// The export's running checksum: lines counted and hashed as they are written.
final class StreamingDigestLines {
    private let digest = StreamingSHA256()
    private(set) var count = 0

    func add(_ line: [UInt8]) {
        digest.update(line)
        count += 1
    }

    func finish() -> (Int, [UInt8]) { (count, digest.finish()) }
}
