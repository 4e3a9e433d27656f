import Crypto
import Foundation
import LatchkeyServer
import JSON
import Receipts
import Transparency
import WebAuthn
#if canImport(Glibc)
import Glibc
#endif

/// `latchkey receipts verify <file>`: checks a receipt offline (SPEC "Evidence" → "Offline";
/// docs/evidence.md) — its signed challenge against `sub`, the key binding, `display` and
/// `actionHash`, and its signature under the approver's key — and prints each check.
enum ReceiptsCommand: Command {
    static let name = "receipts"
    static let summary = "verify receipts offline; export a user's evidence pack"
    static let help = """
        usage: latchkey receipts verify <receipt.json | -> [--log-key <vkey>] [--witness-key <vkey> …]
                                        [--min-witnesses N]
               latchkey receipts verify --pack <pack.tar> --log-key <vkey> [--witness-key <vkey> …]
                                        [--min-witnesses N]
               latchkey receipts verify --approval <pack.tar> --log-key <vkey> [--witness-key <vkey> …]
                                        [--min-witnesses N]
               latchkey receipts export --user <id or username> [--since <RFC 3339 time>] [--out <pack.tar>]
               latchkey receipts export --approval <id> [--out <pack.tar>]

        Reads a receipt document (a bare receipt, or the {"receipt":{…},"log":…} answer of the receipt
        endpoints) from the file, or from stdin with '-', and checks it without Latchkey's database:
        the signed challenge ("LKSTEPUP", its version and nonce) against sub, evidence.keyBinding,
        display and actionHash (SHA-256 of the action's RFC 8785 form), approver.id among a passkey's
        bound credentialIds and rpId, and the signature under approver.publicKey. Prints one line per
        check, then the receipt's commitment (SHA-256 of its RFC 8785 bytes).
        With --log-key (the log's note verifier key, GET /v1/transparency/key) the file's "log" (a
        c2sp.org/tlog-proof@v1) is checked too: the checkpoint's signature, the cosignatures of the
        --witness-key witnesses (cosignature/v1 keys; at least --min-witnesses must verify) and the
        inclusion of the receipt's commitment. Without --log-key the log is not checked, and says so.
        --pack checks an evidence pack as a whole: every receipt in receipts.jsonl as above, each
        with its proofs/<id>.tlog-proof, and the pack's checkpoint signed by the log (a receipt
        without a proof fails). export writes that pack (a tar: receipts.jsonl, proofs/<id>.tlog-proof,
        checkpoint) for one account from DATABASE_URL, to --out or stdout; receipts are personal data,
        so it warns on stderr and the audit log records the export (actor cli, receipts.exported).
        export --approval writes an approval pack (approval.json, its approvers' receipts and proofs,
        the checkpoint); verify --approval checks the pack and the quorum: at least `needed`
        receipts of distinct accounts (the subject never counts), each for exactly this approval's
        action ({"type":"latchkey.approval","approvalId","actionHash"}), each in the log.
        Exit status: 0 every check holds, 1 one does not, 64 bad usage or an unreadable file.

        options:
          --log-key <vkey>              the transparency log's verifier key: check the log proof too
          --witness-key <vkey>          a witness's cosignature/v1 verifier key (repeatable)
          --min-witnesses <N>           cosignatures that must verify (default 0)
          --pack <pack.tar>             verify an evidence pack instead of one receipt
          --approval <pack.tar | id>    verify: an approval pack; export: the approval to pack
          --user <id or username>       export: the account whose receipts are packed
          --since <time>                export: only receipts approved at or after it (RFC 3339)
          --out <file>                  export: write the pack there (default: stdout)
          -h, --help                    show this help
        """

    static func run(_ arguments: [String]) -> Int32 {
        let path: String
        var pack = false
        var quorum = false
        var logPolicy: LogPolicy? = nil
        do throws(UsageError) {
            let args = try ParsedArguments(arguments, valued: ["log-key", "witness-key", "min-witnesses", "pack", "user", "since", "out",
                                                              "approval"],
                                           flags: ["help"])
            if args.has("help") { print(help); return ExitCode.success }
            if args.positionals.first == "export" { return try export(args) }
            guard args.positionals.first == "verify" else { throw UsageError(message: "say 'verify' or 'export'") }
            if let packPath = args.value("pack") ?? args.value("approval") {
                quorum = args.value("approval") != nil
                guard args.value("pack") == nil || !quorum else { throw UsageError(message: "give --pack or --approval, not both") }
                guard args.positionals.count == 1 else { throw UsageError(message: "verify --pack takes the pack alone") }
                guard args.value("log-key") != nil else { throw UsageError(message: "verify --pack needs --log-key: a pack is checked against the log") }
                (path, pack) = (packPath, true)
            } else {
                guard args.positionals.count == 2 else { throw UsageError(message: "verify takes one receipt file ('-' for stdin)") }
                path = args.positionals[1]
            }
            let witnesses = args.all("witness-key")
            var minimum = 0
            if let text = args.value("min-witnesses") {
                guard let n = Int(text), n >= 0, n <= 64 else { throw UsageError(message: "--min-witnesses takes a number 0…64") }
                minimum = n
            }
            if let key = args.value("log-key") {
                guard minimum <= witnesses.count else {
                    throw UsageError(message: "--min-witnesses \(minimum) needs at least \(minimum) --witness-key")
                }
                logPolicy = LogPolicy(logKey: key, witnessKeys: witnesses, minWitnesses: minimum)
            } else if !witnesses.isEmpty || minimum > 0 {
                throw UsageError(message: "--witness-key and --min-witnesses check a log proof: give --log-key too")
            }
        } catch {
            printError("latchkey receipts: \(error.message)\n\n\(help)")
            return ExitCode.usage
        }
        if pack, let logPolicy {
            // A pack of a few thousand receipts is a few MiB; 256 MiB is far past any real one.
            guard let bytes = readFile(path, limit: 1 << 28) else {
                printError("latchkey receipts verify: cannot read \(path) (or it is over 256 MiB)")
                return ExitCode.usage
            }
            let (text, passed) = quorum ? verifyApproval(bytes, log: logPolicy) : verifyPack(bytes, log: logPolicy)
            print(text, terminator: "")
            return passed ? ExitCode.success : ExitCode.failure
        }
        // A receipt is a few KiB; 1 MiB is far past any real one.
        guard let bytes = path == "-" ? readAllStandardInput(limit: 1 << 20) : readFile(path, limit: 1 << 20) else {
            printError("latchkey receipts verify: cannot read \(path) (or it is over 1 MiB)")
            return ExitCode.usage
        }
        let parsed: JSONValue
        do { parsed = try JSONParser.parse(bytes) } catch {
            printError("latchkey receipts verify: \(path) is not JSON: \(error.reason)")
            return ExitCode.usage
        }
        let (text, passed) = verify(parsed, log: logPolicy)
        print(text, terminator: "")
        return passed ? ExitCode.success : ExitCode.failure
    }

    /// The report for a parsed file: a bare receipt, or `{"receipt":{…},"log":…}`.
    static func verify(_ file: JSONValue, log policy: LogPolicy? = nil) -> (text: String, passed: Bool) {
        let receipt: JSONValue
        if let wrapped = file["receipt"], file["v"] == nil { receipt = wrapped } else { receipt = file }
        var checks = ReceiptChecker.check(receipt)
        var logNote: String? = nil
        if let policy {
            checks += logChecks(receipt: receipt, log: file["v"] == nil ? file["log"] : nil, policy: policy)
        } else {
            logNote = "log: not checked (give --log-key to check the receipt's inclusion in the transparency log)\n"
        }
        var text = ""
        for check in checks { text += (check.passed ? "ok    " : "FAIL  ") + check.name + ": " + check.detail + "\n" }
        let passed = ReceiptChecker.allPassed(checks)
        if let logNote { text += logNote }
        if receipt.objectValue != nil { text += "commitment: " + Hex.encode(ReceiptChecker.commitment(receipt)) + "\n" }
        text += passed ? "receipt verified\n" : "receipt NOT verified\n"
        return (text, passed)
    }

    /// `verify --pack`: every receipt of the pack with its proof, and the pack's checkpoint.
    static func verifyPack(_ archive: [UInt8], log policy: LogPolicy) -> (text: String, passed: Bool) {
        let result = checkPack(archive, log: policy)
        return (result.text + (result.passed ? "pack verified: \(result.count) receipts\n" : "pack NOT verified\n"), result.passed)
    }

    /// `verify --approval`: the pack as `verifyPack` checks it, and the quorum its approval.json states.
    static func verifyApproval(_ archive: [UInt8], log policy: LogPolicy) -> (text: String, passed: Bool) {
        let result = checkPack(archive, log: policy)
        var text = result.text
        var passed = result.passed
        func line(_ ok: Bool, _ name: String, _ detail: String) {
            text += (ok ? "ok    " : "FAIL  ") + name + ": " + detail + "\n"
            passed = passed && ok
        }
        guard let bytes = result.files["approval.json"], let approval = try? JSONParser.parse(bytes), let id = approval["id"]?.stringValue,
              let action = approval["action"], let actionHash = approval["actionHash"]?.stringValue, let needed = approval["needed"]?.intValue
        else {
            line(false, "approval", "the pack has no approval.json with id, action, actionHash and needed")
            return (text + "approval NOT verified\n", false)
        }
        let computed = Base64URL.encode(Digest.sha256(action.canonicalized()))
        line(computed == actionHash, "approval action hash", computed == actionHash
             ? "actionHash is SHA-256 of the approval's action in RFC 8785 form" : "actionHash \(actionHash) is not the action's (\(computed))")
        // A vote counts when its receipt verified and approved exactly this approval's action.
        let vote = JSONValue.object([("type", "latchkey.approval"), ("approvalId", .string(id)), ("actionHash", .string(actionHash))]).canonicalized()
        let subject = approval["subject"]?.stringValue
        var approvers: Set<String> = []
        for receipt in result.verified {
            let rid = receipt["id"]?.stringValue ?? "?"
            guard let sub = receipt["sub"]?.stringValue, receipt["action"]?.canonicalized() == vote else {
                line(false, "vote \(rid)", "its action is not this approval's vote {\"type\":\"latchkey.approval\",\"approvalId\":\"\(id)\",…}")
                continue
            }
            guard sub != subject else { line(false, "vote \(rid)", "made by the approval's subject, who never counts"); continue }
            approvers.insert(sub)
        }
        line(approvers.count >= needed, "quorum", "\(approvers.count) distinct accounts approved this action (\(needed) needed)"
             + (approvers.isEmpty ? "" : ": " + approvers.sorted().joined(separator: ", ")))
        text += passed ? "approval verified: \(approvers.count) of \(needed) approvers, each in the log\n" : "approval NOT verified\n"
        return (text, passed)
    }

    /// Every receipt of a pack with its proof, and the pack's checkpoint; the receipts that passed.
    static func checkPack(_ archive: [UInt8], log policy: LogPolicy)
        -> (text: String, passed: Bool, count: Int, verified: [JSONValue], files: [String: [UInt8]]) {
        let files: [String: [UInt8]]
        do {
            files = Dictionary(try Tar.entries(archive).map { ($0.name, $0.bytes) }, uniquingKeysWith: { first, _ in first })
        } catch {
            return ("FAIL  pack: not a tar this command reads: \(error)\n", false, 0, [], [:])
        }
        var text = ""
        var passed = true
        func line(_ ok: Bool, _ name: String, _ detail: String) {
            text += (ok ? "ok    " : "FAIL  ") + name + ": " + detail + "\n"
            passed = passed && ok
        }
        // The pack's checkpoint: signed by the log, with the cosignatures asked for.
        var packSize: UInt64? = nil
        if let checkpoint = files["checkpoint"] {
            do throws(TransparencyError) {
                let logKey = try VerifierKey(parsing: policy.logKey)
                let witnesses = try policy.witnessKeys.map { key throws(TransparencyError) in try VerifierKey(parsing: key) }
                let opened = try Checkpoint.open(String(decoding: checkpoint, as: UTF8.self), logKey: logKey, witnesses: witnesses)
                packSize = opened.checkpoint.size
                let enough = opened.cosigners.count >= policy.minWitnesses
                line(enough, "checkpoint", "\(opened.checkpoint.origin) size \(opened.checkpoint.size), signed by the log, cosigned by "
                     + "\(opened.cosigners.count) of the witnesses given (\(policy.minWitnesses) required)")
            } catch {
                line(false, "checkpoint", error.reason)
            }
        } else {
            line(false, "checkpoint", "the pack has no checkpoint file")
        }
        guard let jsonl = files["receipts.jsonl"] else {
            line(false, "receipts", "the pack has no receipts.jsonl")
            return (text, false, 0, [], files)
        }
        var count = 0
        var verified: [JSONValue] = []
        for raw in jsonl.split(separator: 0x0A, omittingEmptySubsequences: true) {
            count += 1
            let receipt: JSONValue
            do { receipt = try JSONParser.parse(Array(raw)) } catch {
                line(false, "receipt \(count)", "line \(count) of receipts.jsonl is not JSON: \(error.reason)")
                continue
            }
            let id = receipt["id"]?.stringValue ?? "line \(count)"
            var checks = ReceiptChecker.check(receipt)
            let proof = isReceiptId(id) ? files["proofs/\(id).tlog-proof"].map { String(decoding: $0, as: UTF8.self) } : nil
            checks += logChecks(receipt: receipt, log: proof.map(JSONValue.string), policy: policy)
            if let proof, let packSize, let size = try? Checkpoint(text: SignedNote(parsing: TlogProof(parsing: proof).checkpoint).text).size,
               size > packSize {
                checks.append(ReceiptChecker.Check(name: "log", passed: false,
                                                   detail: "its proof's checkpoint (size \(size)) is newer than the pack's (size \(packSize))"))
            }
            let failed = checks.filter { !$0.passed }
            if failed.isEmpty {
                verified.append(receipt)
                line(true, "receipt \(id)", "\(checks.count) checks hold (signature evidence and log inclusion)")
            } else {
                for check in failed { line(false, "receipt \(id)", check.name + ": " + check.detail) }
            }
        }
        if count == 0 { line(false, "receipts", "receipts.jsonl holds no receipt") }
        return (text, passed, count, verified, files)
    }

    /// A receipt id as Latchkey makes them (base64url, at most 64 characters): safe in a file name.
    static func isReceiptId(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 64 && id.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D || $0 == 0x5F }
    }

    /// `export --user U [--since T] [--out F]`.
    static func export(_ args: ParsedArguments) throws(UsageError) -> Int32 {
        let approvalId = args.value("approval")
        let user = args.value("user")
        guard (user?.isEmpty == false) != (approvalId?.isEmpty == false) else {
            throw UsageError(message: "export needs --user <id or username> or --approval <id>")
        }
        guard approvalId == nil || args.value("since") == nil else { throw UsageError(message: "--since is for --user") }
        var since: Date? = nil
        if let text = args.value("since") {
            guard let seconds = Inspection.parseISO8601(text) else { throw UsageError(message: "--since takes an RFC 3339 time, such as 2026-01-01T00:00:00Z") }
            since = Date(timeIntervalSince1970: Double(seconds))
        }
        let out = args.value("out")
        return withDatabase("latchkey receipts export") { database, _ in
            let contents: EvidencePack.Contents
            do {
                if let approvalId { contents = try EvidencePack.export(database: database, approval: approvalId) }
                else { contents = try EvidencePack.export(database: database, user: user ?? "", since: since) }
            } catch {
                printError("latchkey receipts export: \(error)")
                return ExitCode.failure
            }
            let archive: [UInt8]
            do { archive = try Tar.archive(contents.files.map { Tar.Entry(name: $0.name, bytes: $0.bytes) }, modified: Int(Date().timeIntervalSince1970)) } catch {
                printError("latchkey receipts export: \(error)")
                return ExitCode.failure
            }
            printError("latchkey receipts export: WARNING: an evidence pack is personal data (what the person approved, when, with "
                       + "which key); the audit log records this export. Keep it and hand it over as such.")
            if let out {
                guard FileManager.default.createFile(atPath: out, contents: Data(archive), attributes: [.posixPermissions: 0o600]) else {
                    printError("latchkey receipts export: cannot write \(out)")
                    return ExitCode.failure
                }
            } else {
                var written = 0
                while written < archive.count {
                    let n = archive.withUnsafeBufferPointer { write(1, $0.baseAddress! + written, $0.count - written) }
                    guard n > 0 else { printError("latchkey receipts export: cannot write the pack to stdout"); return ExitCode.failure }
                    written += n
                }
            }
            var summary = "latchkey receipts export: \(contents.receipts) receipts"
            if !contents.unlogged.isEmpty {
                summary += "; \(contents.unlogged.count) not in the log yet (no proof; export again in a few seconds): "
                    + contents.unlogged.joined(separator: ", ")
            }
            printError(summary)
            return ExitCode.success
        }
    }

    /// What the log proof is checked against (`--log-key`, `--witness-key`, `--min-witnesses`).
    struct LogPolicy {
        let logKey: String
        let witnessKeys: [String]
        let minWitnesses: Int
    }

    /// The transparency log's checks of `log` (a C2SP tlog-proof for the receipt's commitment): the
    /// checkpoint's signature, its cosignatures and the commitment's inclusion. A receipt the log
    /// has not integrated yet (`log` null or absent) fails: there is nothing to check it against.
    static func logChecks(receipt: JSONValue, log: JSONValue?, policy: LogPolicy) -> [ReceiptChecker.Check] {
        guard let text = log?.stringValue else {
            return [ReceiptChecker.Check(name: "log", passed: false,
                                         detail: "the file holds no log proof (null until the log integrates the receipt; fetch it again)")]
        }
        return TlogProofVerifier.verify(proofText: text, commitment: ReceiptChecker.commitment(receipt), logKey: policy.logKey,
                                        witnessKeys: policy.witnessKeys, minWitnesses: policy.minWitnesses)
            .map { ReceiptChecker.Check(name: "log " + $0.name, passed: $0.passed, detail: $0.detail) }
    }
}
