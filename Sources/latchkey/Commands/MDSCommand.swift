import Crypto
import Curl
import Foundation
import JSON
import LatchkeyServer
import Storage
import WebAuthn
#if canImport(Glibc)
import Glibc
#endif

/// `latchkey mds fetch|check|show`: the FIDO MDS3 BLOB the server uses (SPEC "Authenticator metadata").
enum MDSCommand: Command {
    static let name = "mds"
    static let summary = "FIDO metadata (MDS3) BLOB: fetch, check, show one statement"
    static let help = """
        usage: latchkey mds check [--blob F] [--root F] [--crls D] [--signer NAME] [--max-stale S] [--at TIME]
               latchkey mds show <aaguid> [--blob F] [--root F] [--crls D] [--signer NAME] [--max-stale S] [--at TIME]
               latchkey mds fetch --out F [--url U] [--root F] [--crls D] [--signer NAME] [--max-stale S]

        check   verifies the BLOB (JWS signature, x5c chain to the root with CRLs, a signing
                certificate that names the signer, nextUpdate) and prints its number, nextUpdate and
                entry count, or why it is refused. With DATABASE_URL set it also compares the number
                with the last BLOB accepted under that root (no rollback) and records nothing;
                without it the BLOB is checked alone, and it says so.
        show    prints the statement for one AAGUID and its latest status as JSON.
        fetch   downloads the BLOB over HTTPS (default https://mds3.fidoalliance.org/), verifies it
                and only then replaces F (atomically, so a serving instance never reads half a file).

        Defaults come from the environment: LATCHKEY_MDS_BLOB, LATCHKEY_MDS_ROOT (else the shipped
        FIDO Alliance root), LATCHKEY_MDS_CRLS, LATCHKEY_MDS_SIGNER (else mds.fidoalliance.org: the
        name the signing certificate must carry in a subjectAltName dNSName, else in its CN),
        LATCHKEY_MDS_MAX_STALE (else 2592000 s), DATABASE_URL.
        Exit status: 0 good, 1 refused or not found, 64 bad usage.
        """

    static func run(_ arguments: [String]) -> Int32 {
        do throws(UsageError) {
            let args = try ParsedArguments(arguments, valued: ["blob", "root", "crls", "signer", "max-stale", "at", "out", "url"], flags: ["help"])
            if args.has("help") { print(help); return ExitCode.success }
            guard let verb = args.positionals.first else { throw UsageError(message: "say check, show or fetch") }
            let env = Configuration.processEnvironment()
            let root = args.value("root") ?? env["LATCHKEY_MDS_ROOT"].flatMap { $0.isEmpty ? nil : $0 }
            let crls = args.value("crls") ?? env["LATCHKEY_MDS_CRLS"].flatMap { $0.isEmpty ? nil : $0 }
            let signer = args.value("signer") ?? env["LATCHKEY_MDS_SIGNER"].flatMap { $0.isEmpty ? nil : $0 } ?? MetadataBLOB.defaultSigner
            let staleText = args.value("max-stale") ?? env["LATCHKEY_MDS_MAX_STALE"] ?? "2592000"
            guard let maxStale = Int64(staleText), maxStale >= 0 else { throw UsageError(message: "--max-stale takes seconds") }
            var now = VerificationPolicy.systemClock()
            if let at = args.value("at") {
                guard let t = Inspection.parseISO8601(at) else { throw UsageError(message: "--at is not an ISO 8601 time") }
                now = t
            }
            switch verb {
            case "check", "show":
                guard let blobPath = args.value("blob") ?? env["LATCHKEY_MDS_BLOB"].flatMap({ $0.isEmpty ? nil : $0 }) else {
                    throw UsageError(message: "--blob is required (or LATCHKEY_MDS_BLOB)")
                }
                let blob: MetadataBLOB
                do {
                    blob = try MetadataFiles.load(blobPath: blobPath, rootPath: root, crlDirectory: crls, signer: signer,
                                                  maxStaleSeconds: maxStale, at: now).blob
                } catch {
                    print("refused: \(error.description)")
                    return ExitCode.failure
                }
                if verb == "check" {
                    guard args.positionals.count == 1 else { throw UsageError(message: "check takes no arguments") }
                    let rollback: String
                    switch lastAccepted(blob, env: env) {
                    case .noDatabase:
                        rollback = "rollback: not checked (DATABASE_URL is not set: the BLOB is checked alone)"
                    case .failed(let why):
                        print("refused: \(blobPath): cannot read the last BLOB accepted (DATABASE_URL): \(why)")
                        return ExitCode.failure
                    case .found(nil):
                        rollback = "rollback: none (no BLOB accepted under this root yet)"
                    case .found(let (number, at)?):
                        guard blob.number >= number else {
                            print("refused: \(MetadataFiles.rollback(blob, lastAccepted: number, path: blobPath).description)")
                            return ExitCode.failure
                        }
                        rollback = "rollback: none (last BLOB accepted: number \(number), \(ISO8601DateFormatter().string(from: at)))"
                    }
                    print("ok: BLOB number \(blob.number), nextUpdate \(blob.nextUpdate), \(blob.entries.count) entries"
                          + (blob.skipped.isEmpty ? "" : ", \(blob.skipped.count) skipped"))
                    print("signed by: " + blob.signerChain.map(\.commonName).joined(separator: " → ") + " (names \(signer))")
                    print(rollback)
                    for s in blob.skipped { print("skipped entry \(s.index): \(s.reason)") }
                    return ExitCode.success
                }
                guard args.positionals.count == 2, let aaguid = parseUUID(args.positionals[1]) else {
                    throw UsageError(message: "show takes one AAGUID (8-4-4-4-12 hex)")
                }
                guard let entry = blob.entry(aaguid: aaguid) else {
                    print("no statement for \(formatUUID(aaguid)) in BLOB \(blob.number)")
                    return ExitCode.failure
                }
                print(show(entry).text)
                return ExitCode.success
            case "fetch":
                guard let out = args.value("out") else { throw UsageError(message: "--out is required") }
                let url = args.value("url") ?? "https://mds3.fidoalliance.org/"
                let bytes: [UInt8]
                do { bytes = try HTTPSDownload.get(url) } catch {
                    printError("latchkey mds fetch: \(error.reason)")
                    return ExitCode.failure
                }
                let roots: [Certificate]
                let crlList: [CertificateRevocationList]
                do {
                    roots = try MetadataFiles.roots(path: root)
                    crlList = try MetadataFiles.crls(directory: crls)
                } catch { throw UsageError(message: error.description) }
                let blob: MetadataBLOB
                do { blob = try MetadataBLOB.verify(bytes: bytes, roots: roots, crls: crlList, signer: signer, maxStaleSeconds: maxStale, at: now) } catch {
                    printError("latchkey mds fetch: the downloaded BLOB is refused, \(out) is unchanged: \(error.reason)")
                    return ExitCode.failure
                }
                guard writeAtomically(bytes, to: out) else {
                    printError("latchkey mds fetch: cannot write \(out)")
                    return ExitCode.failure
                }
                print("ok: BLOB number \(blob.number), nextUpdate \(blob.nextUpdate), \(blob.entries.count) entries → \(out)")
                return ExitCode.success
            default:
                throw UsageError(message: "unknown mds command '\(verb)'")
            }
        } catch {
            printError("latchkey mds: \(error.message)\n\n\(help)")
            return ExitCode.usage
        }
    }

    enum LastAccepted {
        case noDatabase
        case failed(String)
        case found((number: Int, at: Date)?)
    }

    /// The last BLOB number accepted under `blob`'s root, read (never written) from DATABASE_URL.
    static func lastAccepted(_ blob: MetadataBLOB, env: [String: String]) -> LastAccepted {
        guard env["DATABASE_URL"].map({ !$0.isEmpty }) == true else { return .noDatabase }
        var outcome = LastAccepted.failed("no answer")
        _ = withDatabase("latchkey mds check", migrate: false) { database, _ in
            do { outcome = .found(try database.metadataState.lastAccepted(root: MetadataFiles.ledgerKey(blob))) } catch {
                outcome = .failed("\(error) (has `latchkey migrate` run?)")
            }
            return ExitCode.success
        }
        return outcome
    }

    static func show(_ entry: MetadataEntry) -> JSONValue {
        let latest: JSONValue = entry.latestStatus.map { r in
            .object([("status", .string(r.status.rawValue)), ("effectiveDate", r.effectiveDate.map { .string($0) } ?? .null)])
        } ?? .null
        return .object([
            ("aaguid", entry.aaguid.map { .string(formatUUID($0)) } ?? .null),
            ("description", entry.statement?.description.map { .string($0) } ?? .null),
            ("latestStatus", latest),
            ("certification", entry.certification.map { .string($0.rawValue) } ?? .null),
            ("statusReports", .array(entry.statusReports.map { r in
                .object([("status", .string(r.status.rawValue)), ("effectiveDate", r.effectiveDate.map { .string($0) } ?? .null)])
            })),
            ("timeOfLastStatusChange", entry.timeOfLastStatusChange.map { .string($0) } ?? .null),
            ("metadataStatement", entry.statement?.json ?? .null),
        ])
    }

    /// Writes `bytes` next to `path` and renames it over `path`.
    static func writeAtomically(_ bytes: [UInt8], to path: String) -> Bool {
        let temporary = path + ".partial-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { return false }
        var written = 0
        while written < bytes.count {
            let n = bytes[written...].withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count) }
            if n <= 0 { close(fd); unlink(temporary); return false }
            written += n
        }
        guard fsync(fd) == 0, close(fd) == 0, rename(temporary, path) == 0 else { unlink(temporary); return false }
        return true
    }
}
