import Foundation
import JSON
import LatchkeyServer
import Storage

extension AccountsCommand {
    /// A Latchkey file, streamed: the checksum checked on a first pass, then its account lines
    /// read again a batch at a time (`ImportRunner`), so memory holds one batch however long the file.
    static func importFile(_ path: String, _ args: ParsedArguments, _ configuration: Configuration) -> Int32 {
        guard let first = LineReader(path: path) else { printError("latchkey accounts: cannot read \(path)"); return ExitCode.failure }
        let verdict = PortableFile.verify(lines: first)
        guard let sha = verdict.sha256 else { return refused(path, verdict.reason ?? "truncated") }
        return withDatabase("latchkey accounts") { database, _ in
            guard let runner = ImportRunner(database, configuration, sha256: sha, args) else { return ExitCode.failure }
            guard let lines = LineReader(path: path) else { printError("latchkey accounts: cannot read \(path)"); return ExitCode.failure }
            var pending: [UInt8]? = nil
            var number = 0
            // Every line but the last (the trailer, already checked) is an account.
            for line in lines {
                if let account = pending {
                    number += 1
                    guard runner.add(runner.service.entry(line: Array(account.dropLast()), number: number), bytes: account.count) else {
                        return ExitCode.failure
                    }
                }
                pending = line
            }
            return runner.finish()
        }
    }

    /// The largest Keycloak or CSV file read (whole, as its format needs); Latchkey files stream.
    static let wholeFileLimit = 1 << 30

    /// A Keycloak or CSV file: read, then its accounts decided and created as `importFile` does.
    static func importWhole(_ path: String, _ format: PortableFormat, _ args: ParsedArguments, _ configuration: Configuration) -> Int32 {
        guard let bytes = readFile(path, limit: wholeFileLimit) else {
            printError("latchkey accounts: cannot read \(path) (or it is over \(wholeFileLimit >> 20) MiB)"); return ExitCode.failure
        }
        return withDatabase("latchkey accounts") { database, _ in
            let context = PortabilityService(store: database.portability, policy: PortabilityPolicy(configuration))
                .readContext(statedRpId: args.value("rp-id"))
            switch format.read(bytes, context) {
            case .refused(let reason): return refused(path, reason)
            case .accounts(let sha, let entries):
                guard let runner = ImportRunner(database, configuration, sha256: sha, args) else { return ExitCode.failure }
                for entry in entries { guard runner.add(entry) else { return ExitCode.failure } }
                return runner.finish()
            }
        }
    }

    /// A file refused whole: its one outcome line, and nothing imported.
    static func refused(_ path: String, _ reason: String) -> Int32 {
        print(String(decoding: PortabilityRenderer.fileRefused(reason).serialized(), as: UTF8.self))
        printError("latchkey accounts: \(path) refused (\(reason)): nothing imported")
        return ExitCode.failure
    }
}

/// One import on the command line: the file's accounts in file order, decided and created a batch
/// at a time (`PortabilityService.importBatch`: one read and one write a batch), one outcome line
/// each on standard output, the progress line on standard error.
final class ImportRunner {
    let service: PortabilityService
    let run: PortabilityService.ImportRun
    private var pass: ImportPass
    private var counts: [ImportOutcome.Kind: Int] = [:]
    private var done = 0
    private let progress: AccountsProgress

    /// Nil (said on standard error) when `LATCHKEY_MDS_BLOB` is set and does not load: nothing is
    /// imported without the metadata's revocations.
    init?(_ database: Database, _ configuration: Configuration, sha256: String, _ args: ParsedArguments) {
        let policy: PortabilityPolicy
        switch PortabilityPolicy.loadingMetadata(configuration, database: database) {
        case .success(let loaded): policy = loaded
        case .failure(let error):
            printError("latchkey accounts: LATCHKEY_MDS_BLOB did not load (\(error)): nothing imported"); return nil
        }
        service = PortabilityService(store: database.portability, policy: policy)
        run = PortabilityService.ImportRun(sha256: sha256, actor: "cli", dryRun: args.has("dry-run"),
                                           trustVerifiedEmails: args.has("trust-verified-emails"))
        pass = ImportPass(service, run: run)
        progress = AccountsProgress(verb: run.dryRun ? "decided" : "imported")
    }

    /// Adds an account (`bytes`: its line's length, when the file has lines); false when the
    /// database failed (said on standard error: the batches before are done).
    func add(_ entry: PortableEntry, bytes: Int? = nil) -> Bool {
        report { () throws(StorageError) in try pass.add(entry, bytes: bytes) }
    }

    /// The last batch written, the summary said; the exit status.
    func finish() -> Int32 {
        guard report({ () throws(StorageError) in try pass.finish() }) else { return ExitCode.failure }
        progress.end()
        let summary = [ImportOutcome.Kind.created, .skipped, .conflict, .refused].map { "\(counts[$0, default: 0]) \($0.rawValue)" }
        printError("latchkey accounts: \(done) account(s)\(run.dryRun ? " (dry run: nothing written)" : ""): " + summary.joined(separator: ", "))
        return counts[.conflict, default: 0] + counts[.refused, default: 0] == 0 ? ExitCode.success : ExitCode.failure
    }

    /// The outcome lines of what `step` decided, printed; false when the database failed.
    private func report(_ step: () throws(StorageError) -> [ImportOutcome]) -> Bool {
        let outcomes: [ImportOutcome]
        do {
            outcomes = try step()
        } catch {
            printError("latchkey accounts: import stopped at the batch from line \(pass.failedFrom ?? 0): \(error) "
                       + "(the lines before it are done; a re-run skips them)")
            return false
        }
        guard !outcomes.isEmpty else { return true }
        var text = ""
        for outcome in outcomes {
            counts[outcome.outcome, default: 0] += 1
            text += String(decoding: PortabilityRenderer.outcome(outcome).serialized(), as: UTF8.self) + "\n"
        }
        print(text, terminator: "")
        done += outcomes.count
        progress.tick(done)
        return true
    }
}
