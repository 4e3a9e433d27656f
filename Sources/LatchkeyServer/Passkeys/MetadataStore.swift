import Crypto
import Foundation
import Storage
import Synchronization
import WebAuthn

/// Why the configured metadata files could not be used (`latchkey mds check` prints it).
public struct MetadataLoadError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Reading LATCHKEY_MDS_BLOB / _ROOT / _CRLS from disk; the core verifies what they hold.
public enum MetadataFiles {
    public static let maxFileBytes = ParsedMetadataBLOB.maxBytes

    /// The BLOB's signing root(s): the PEM file at `path`, or the shipped FIDO Alliance root.
    public static func roots(path: String?) throws(MetadataLoadError) -> [Certificate] {
        guard let path else { return FIDOMetadataRoot.certificates }
        let bytes = try read(path)
        do { return try Certificate.parsePEM(String(decoding: bytes, as: UTF8.self)) } catch {
            throw MetadataLoadError("\(path): \(error.reason)")
        }
    }

    /// Every CRL in the folder (each file DER or PEM, in name order; hidden files skipped).
    public static func crls(directory: String?) throws(MetadataLoadError) -> [CertificateRevocationList] {
        guard let directory else { return [] }
        let names: [String]
        do { names = try FileManager.default.contentsOfDirectory(atPath: directory).filter { !$0.hasPrefix(".") }.sorted() } catch {
            throw MetadataLoadError("\(directory): cannot list the CRL folder")
        }
        var out: [CertificateRevocationList] = []
        for name in names {
            let path = directory + "/" + name
            do { out += try CertificateRevocationList.parse(try read(path)) } catch let e as MetadataLoadError { throw e } catch {
                throw MetadataLoadError("\(path): not a CRL (DER or PEM)")
            }
        }
        return out
    }

    /// Reads and verifies the configured BLOB at `now` (signed by a certificate naming `signer`).
    public static func load(blobPath: String, rootPath: String?, crlDirectory: String?, signer: String = MetadataBLOB.defaultSigner,
                            maxStaleSeconds: Int64, at now: Int64,
                            trace: VerificationTrace? = nil) throws(MetadataLoadError) -> (blob: MetadataBLOB, crls: [CertificateRevocationList]) {
        let roots = try roots(path: rootPath)
        let crls = try crls(directory: crlDirectory)
        let bytes = try read(blobPath)
        do {
            return (try MetadataBLOB.verify(bytes: bytes, roots: roots, crls: crls, signer: signer, maxStaleSeconds: maxStaleSeconds,
                                            at: now, trace: trace), crls)
        } catch {
            throw MetadataLoadError("\(blobPath): \(error.reason)")
        }
    }

    /// The key a BLOB's number is kept under: SHA-256 of the root its signer's chain ends at (the
    /// FIDO Alliance's numbers are its own; a conformance tool's BLOBs under another root are another list).
    public static func ledgerKey(_ blob: MetadataBLOB) -> [UInt8] { Digest.sha256(blob.signerChain.last?.der ?? []) }

    /// SPEC "no rollback": `blob`'s number becomes the last accepted one under its root unless a
    /// higher one is stored (then it is refused); a database that cannot answer refuses it too.
    public static func recordAccepted(_ blob: MetadataBLOB, in ledger: MetadataStateRepository, path: String) throws(MetadataLoadError) {
        let acceptance: MetadataBLOBAcceptance
        do { acceptance = try ledger.accept(number: blob.number, root: ledgerKey(blob)) } catch {
            throw MetadataLoadError("\(path): cannot check BLOB number \(blob.number) against the last one accepted (database: \(error)); refused")
        }
        if case .rollback(let last) = acceptance { throw rollback(blob, lastAccepted: last, path: path) }
    }

    public static func rollback(_ blob: MetadataBLOB, lastAccepted: Int, path: String) -> MetadataLoadError {
        MetadataLoadError("\(path): BLOB number \(blob.number) is older than the last BLOB accepted (\(lastAccepted)): no rollback to an older list")
    }

    static func olderThanInUse(_ blob: MetadataBLOB, _ old: MetadataBLOB, path: String) -> MetadataLoadError {
        MetadataLoadError("\(path): BLOB number \(blob.number) is older than the one in use (\(old.number))")
    }

    static func read(_ path: String) throws(MetadataLoadError) -> [UInt8] {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path) else { throw MetadataLoadError("\(path): cannot read") }
        if let size = attributes[.size] as? Int, size > maxFileBytes { throw MetadataLoadError("\(path): larger than \(maxFileBytes) bytes") }
        guard let data = FileManager.default.contents(atPath: path) else { throw MetadataLoadError("\(path): cannot read") }
        return [UInt8](data)
    }
}

/// The authenticator metadata this instance uses (SPEC "Authenticator metadata"): kept in memory,
/// reloaded on SIGHUP (`reload()`) or when a file changes (`reloadIfChanged()`, polled). A BLOB
/// that fails verification never replaces a good one, nor does an older BLOB: its `no` must not be
/// below the one in use here, nor below the last one any instance accepted under the same root
/// (`MetadataStateRepository`, in PostgreSQL, so a restart with an older file is refused too; when
/// the database cannot say, the BLOB is refused). Configured but never loaded, `policy()` says
/// `.unavailable`, and attested registrations fail closed.
public final class MetadataStore: Sendable {
    struct State {
        var blob: MetadataBLOB? = nil
        /// The BLOB's statement icons that are a PNG or SVG `ProviderIcon`, by AAGUID: decoded once
        /// when the BLOB is taken, not on every login and passkey list that shows whether one exists.
        var icons: [[UInt8]: ProviderIcon] = [:]
        var crls: [CertificateRevocationList] = []
        var lastError: String? = nil
        var stamp: [Int64] = []
        var policy: MetadataPolicy
    }

    let configuration: Configuration
    let runtime: Runtime
    let ledger: MetadataStateRepository
    private let state: Mutex<State>
    private let watching = Mutex<Bool>(false)

    init(configuration: Configuration, runtime: Runtime, ledger: MetadataStateRepository) {
        self.configuration = configuration
        self.runtime = runtime
        self.ledger = ledger
        var initial = State(policy: .off)
        initial.policy = Self.policy(configuration, blob: nil, crls: [], error: "not loaded yet")
        state = Mutex(initial)
    }

    public var isConfigured: Bool { configuration.mdsBlobPath != nil }

    /// The policy for one registration.
    public func policy() -> MetadataPolicy { state.withLock { $0.policy } }

    /// The BLOB in use, if any, and the last load's refusal.
    public var current: (blob: MetadataBLOB?, lastError: String?) { state.withLock { ($0.blob, $0.lastError) } }

    /// The statement `description` for an AAGUID, when the BLOB in use has one (passkey `provider`).
    public func description(aaguid: [UInt8]) -> String? {
        state.withLock { $0.blob?.entry(aaguid: aaguid)?.statement?.description }
    }

    /// The latest status of an AAGUID's entry in the BLOB in use when it is one that refuses a
    /// registration (`AuthenticatorStatus.refusing`), else nil.
    public func refusingStatus(aaguid: [UInt8]) -> String? {
        state.withLock { state -> String? in
            guard let status = state.blob?.entry(aaguid: aaguid)?.latestStatus?.status, AuthenticatorStatus.refusing.contains(status) else { return nil }
            return status.rawValue
        }
    }

    /// The statement `icon` for an AAGUID (a `data:` URL), when the BLOB in use has one that is a
    /// PNG or SVG `ProviderIcon` (passkey `providerIcon`, both themes).
    func icon(aaguid: [UInt8]) -> ProviderIcon? {
        state.withLock { $0.icons[aaguid] }
    }

    /// Every icon `icon(aaguid:)` answers for `blob`: each AAGUID's entry as the BLOB looks it up.
    static func icons(of blob: MetadataBLOB) -> [[UInt8]: ProviderIcon] {
        var icons: [[UInt8]: ProviderIcon] = [:]
        for aaguid in Set(blob.entries.compactMap(\.aaguid)) {
            if let url = blob.entry(aaguid: aaguid)?.statement?.icon, let icon = ProviderIcon(dataURL: url) { icons[aaguid] = icon }
        }
        return icons
    }

    /// Reads and verifies the files now. On success the new BLOB replaces the old one (unless it is
    /// older); on failure the old one stays and the error is kept and returned.
    @discardableResult
    public func reload() -> Result<MetadataBLOB, MetadataLoadError> {
        guard let path = configuration.mdsBlobPath else { return .failure(MetadataLoadError("LATCHKEY_MDS_BLOB is not set")) }
        let stamp = fileStamp()
        let result: Result<MetadataBLOB, MetadataLoadError>
        do {
            let (blob, crls) = try MetadataFiles.load(blobPath: path, rootPath: configuration.mdsRootPath,
                                                      crlDirectory: configuration.mdsCRLDirectory, signer: configuration.mdsSigner,
                                                      maxStaleSeconds: Int64(configuration.mdsMaxStale), at: runtime.unixTime)
            try refuseOlderThanInUse(blob, path: path)
            try MetadataFiles.recordAccepted(blob, in: ledger, path: path)
            let icons = Self.icons(of: blob)
            result = state.withLock { s in
                s.stamp = stamp
                if let old = s.blob, blob.number < old.number {
                    let e = MetadataFiles.olderThanInUse(blob, old, path: path)
                    s.lastError = e.description
                    return .failure(e)
                }
                s.blob = blob
                s.icons = icons
                s.crls = crls
                s.lastError = nil
                s.policy = Self.policy(configuration, blob: blob, crls: crls, error: nil)
                return .success(blob)
            }
        } catch {
            result = state.withLock { s in
                s.stamp = stamp
                s.lastError = error.description
                s.policy = Self.policy(configuration, blob: s.blob, crls: s.crls, error: error.description)
                return .failure(error)
            }
        }
        switch result {
        case .success(let b): log("metadata BLOB \(b.number) loaded (\(b.entries.count) entries, nextUpdate \(b.nextUpdate))")
        case .failure(let e): log("metadata BLOB refused, keeping the previous one: \(e.description)")
        }
        return result
    }

    /// The in-memory rule first (no database round trip for a BLOB this instance already outgrew).
    private func refuseOlderThanInUse(_ blob: MetadataBLOB, path: String) throws(MetadataLoadError) {
        if let old = state.withLock({ $0.blob }), blob.number < old.number { throw MetadataFiles.olderThanInUse(blob, old, path: path) }
    }

    /// Reloads when the BLOB, root or CRL folder changed since the last load (size or mtime).
    public func reloadIfChanged() {
        guard isConfigured else { return }
        let stamp = fileStamp()
        if state.withLock({ $0.stamp != stamp }) { reload() }
    }

    /// Loads now, then polls every `LATCHKEY_MDS_POLL` seconds on a thread of its own until `stopWatching()`.
    public func startWatching() {
        guard isConfigured else { return }
        reload()
        let interval = configuration.mdsPollSeconds
        guard interval > 0, watching.withLock({ w in defer { w = true }; return !w }) else { return }
        let thread = Thread { [self] in
            while watching.withLock({ $0 }) {
                Thread.sleep(forTimeInterval: Double(interval))
                if watching.withLock({ $0 }) { reloadIfChanged() }
            }
        }
        thread.name = "latchkey-mds-watch"
        thread.start()
    }

    public func stopWatching() { watching.withLock { $0 = false } }

    private func fileStamp() -> [Int64] {
        [configuration.mdsBlobPath, configuration.mdsRootPath, configuration.mdsCRLDirectory].flatMap { path -> [Int64] in
            guard let path else { return [0, 0, 0] }
            var st = stat()
            guard stat(path, &st) == 0 else { return [-1, -1, -1] }
            return [Int64(st.st_mtim.tv_sec), Int64(st.st_mtim.tv_nsec), Int64(st.st_size)]
        }
    }

    static func policy(_ c: Configuration, blob: MetadataBLOB?, crls: [CertificateRevocationList], error: String?) -> MetadataPolicy {
        let source: MetadataPolicy.Source
        if c.mdsBlobPath == nil { source = .off } else if let blob { source = .loaded(blob) } else {
            source = .unavailable(reason: error ?? "not loaded yet")
        }
        return MetadataPolicy(source: source, allowedAAGUIDs: c.authenticatorsAllow.map(Set.init), deniedAAGUIDs: Set(c.authenticatorsDeny),
                              requiredCertification: c.requireCertified, crls: crls)
    }

    private func log(_ message: String) {
        FileHandle.standardError.write(Data("latchkey: \(message)\n".utf8))
    }
}
