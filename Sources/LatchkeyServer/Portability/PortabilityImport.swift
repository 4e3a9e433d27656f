import JSON
import Storage

/// An import over HTTP, parsed at the edge: the file, its format and SHA-256 (what the step-up
/// names), and whether to write.
public struct ImportCommand: Sendable {
    public let format: PortableFormat
    public let body: [UInt8]
    public let sha256: String
    public let dryRun: Bool

    public init(format: PortableFormat, body: [UInt8], sha256: String, dryRun: Bool) {
        self.format = format
        self.body = body
        self.sha256 = sha256
        self.dryRun = dryRun
    }
}

extension PortabilityService {
    /// `POST /admin/v1/import`: the file read (a broken one is refused whole, nothing used up),
    /// the step-up used up with the run's audit line, then the accounts a batch at a time, each
    /// batch decided on one read and created in one write (`importBatch`). Never trusts the file's verifications of addresses (only the command
    /// line may). The outcomes, one per account, in file order.
    func importFile(_ command: ImportCommand, by admin: AdminCaller) throws(ServiceError) -> [ImportOutcome] {
        let entries: [PortableEntry]
        switch command.format.read(command.body, readContext(statedRpId: nil)) {
        case .refused(let reason): return [ImportOutcome(line: 0, username: nil, outcome: .refused, reason: reason)]
        case .accounts(_, let read): entries = read
        }
        do {
            try store.begin(redeeming: admin.redemption,
                            audit: admin.record(.accountsImported, subject: nil,
                                                detail: [("sha256", .string(command.sha256)), ("format", .string(command.format.rawValue)),
                                                         ("dryRun", .bool(command.dryRun)), ("accounts", .number(Double(entries.count)))]))
            let run = ImportRun(sha256: command.sha256, actor: admin.actor, dryRun: command.dryRun, trustVerifiedEmails: false)
            var pass = ImportPass(self, run: run)
            var outcomes: [ImportOutcome] = []
            outcomes.reserveCapacity(entries.count)
            for entry in entries { outcomes += try pass.add(entry) }
            return outcomes + (try pass.finish())
        } catch {
            throw ServiceError(error)
        }
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
