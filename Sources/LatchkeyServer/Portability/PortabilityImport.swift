import JSON
import Storage

/// The file formats an import reads (SPEC "Portability" → Import), by the body's media type over
/// HTTP: Latchkey's JSON Lines, Keycloak's realm export, CSV.
public enum ImportFormat: String, Sendable, CaseIterable {
    case latchkey, keycloak, csv

    /// `application/jsonl` → Latchkey's, `application/json` → Keycloak's, `text/csv` → CSV.
    public init?(mediaType: String?) {
        switch mediaType {
        case "application/jsonl": self = .latchkey
        case "application/json": self = .keycloak
        case "text/csv": self = .csv
        default: return nil
        }
    }
}

/// One account of a file, parsed: the account to decide on, or the account refused as it stands
/// (`refused` with the reason), each with its 1-based number in the file.
public enum ImportItem: Sendable {
    case account(number: Int, PortableAccount)
    case refused(number: Int, username: String?, reason: String)
}

/// Why a whole file is not imported: refused before any account (`truncated`,
/// `checksum_mismatch`, a file that is not the format), or a format this build cannot read.
public enum ImportFileError: Error, Sendable, Equatable {
    case refused(String)
    case unsupported(ImportFormat)
}

/// The one dispatch from a file's format to its accounts; pure. Latchkey's format checks the
/// trailer first (a broken file is refused whole), then reads each line. Keycloak's and CSV's
/// readers are not part of this build: they answer `.unsupported`.
public enum PortableImport {
    public static func items(format: ImportFormat, bytes: [UInt8], rpId: String,
                             newUserHandle: () -> [UInt8]) throws(ImportFileError) -> [ImportItem] {
        switch format {
        case .latchkey: return try latchkey(bytes, rpId: rpId, newUserHandle: newUserHandle)
        case .keycloak, .csv: throw .unsupported(format)
        }
    }

    /// Formats `items` reads in this build.
    public static let readable: [ImportFormat] = [.latchkey]

    static func latchkey(_ bytes: [UInt8], rpId: String, newUserHandle: () -> [UInt8]) throws(ImportFileError) -> [ImportItem] {
        let lines = splitLines(bytes)
        if let reason = PortableFile.verify(lines: lines.lazy.map { Array($0) }).reason { throw .refused(reason) }
        var items: [ImportItem] = []
        items.reserveCapacity(max(0, lines.count - 1))
        for (index, line) in lines.dropLast().enumerated() {
            do throws(PortableFile.Refusal) {
                items.append(.account(number: index + 1, try PortableFile.account(Array(line.dropLast()), rpId: rpId, newUserHandle: newUserHandle)))
            } catch {
                items.append(.refused(number: index + 1, username: error.username, reason: error.reason))
            }
        }
        return items
    }

    /// The lines of `bytes`, each with its `\n` (a last line without one as it is).
    static func splitLines(_ bytes: [UInt8]) -> [ArraySlice<UInt8>] {
        var out: [ArraySlice<UInt8>] = []
        var start = bytes.startIndex
        while start < bytes.endIndex {
            let end = bytes[start...].firstIndex(of: 0x0A).map { $0 + 1 } ?? bytes.endIndex
            out.append(bytes[start..<end])
            start = end
        }
        return out
    }
}

/// An import over HTTP, parsed at the edge: the file, its format and SHA-256 (what the step-up
/// names), and whether to write.
public struct ImportCommand: Sendable {
    public let format: ImportFormat
    public let body: [UInt8]
    public let sha256: String
    public let dryRun: Bool

    public init(format: ImportFormat, body: [UInt8], sha256: String, dryRun: Bool) {
        self.format = format
        self.body = body
        self.sha256 = sha256
        self.dryRun = dryRun
    }
}

extension PortabilityService {
    /// `POST /admin/v1/import`: the file read (a broken one is refused whole, nothing used up),
    /// the step-up used up with the run's audit line, then each account decided on one read and
    /// created in one write. Never trusts the file's verifications of addresses (only the command
    /// line may). The outcomes, one per account, in file order.
    func importFile(_ command: ImportCommand, by admin: AdminCaller) throws(ServiceError) -> [ImportOutcome] {
        let items: [ImportItem]
        do {
            items = try PortableImport.items(format: command.format, bytes: command.body, rpId: policy.rpId,
                                             newUserHandle: { runtime.random(32) })
        } catch {
            switch error {
            case .refused(let reason): return [ImportOutcome(line: 0, username: nil, outcome: .refused, reason: reason)]
            case .unsupported(let format): throw Self.unsupported(format)
            }
        }
        do {
            try store.begin(redeeming: admin.redemption,
                            audit: admin.record(.accountsImported, subject: nil,
                                                detail: [("sha256", .string(command.sha256)), ("format", .string(command.format.rawValue)),
                                                         ("dryRun", .bool(command.dryRun)), ("accounts", .number(Double(items.count)))]))
            let run = ImportRun(sha256: command.sha256, actor: admin.actor, dryRun: command.dryRun, trustVerifiedEmails: false)
            var seen = Set<[UInt8]>()
            var outcomes: [ImportOutcome] = []
            outcomes.reserveCapacity(items.count)
            for item in items {
                switch item {
                case .account(let number, let account):
                    outcomes.append(try importAccount(account, number: number, run: run, seen: &seen))
                case .refused(let number, let username, let reason):
                    outcomes.append(ImportOutcome(line: number, username: username, outcome: .refused, reason: reason))
                }
            }
            return outcomes
        } catch {
            throw ServiceError(error)
        }
    }

    /// 415 for a format this build does not read.
    static func unsupported(_ format: ImportFormat) -> ServiceError {
        ServiceError(.unsupportedMediaType, "this server does not read \(format.rawValue) files yet: send application/jsonl (Latchkey's export)")
    }

    /// `GET /admin/v1/export`, before any account is read: the step-up used up with the audit
    /// line (a used or wrong one refuses the export here, before the answer starts).
    func beginExport(by admin: AdminCaller) throws(ServiceError) {
        do {
            try store.begin(redeeming: admin.redemption, audit: admin.record(.accountsExported, subject: nil, detail: [("via", .string("http"))]))
        } catch {
            throw ServiceError(error)
        }
    }
}
