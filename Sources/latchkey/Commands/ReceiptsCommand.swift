import Crypto
import JSON
import Receipts
import Transparency

/// `latchkey receipts verify <file>`: checks a receipt offline (SPEC "Evidence" → "Offline";
/// docs/evidence.md) — its signed challenge against `sub`, the key binding, `display` and
/// `actionHash`, and its signature under the approver's key — and prints each check.
enum ReceiptsCommand: Command {
    static let name = "receipts"
    static let summary = "verify a step-up receipt offline and print each check"
    static let help = """
        usage: latchkey receipts verify <receipt.json | -> [--log-key <vkey>] [--witness-key <vkey> …]
                                        [--min-witnesses N]

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
        Exit status: 0 every check holds, 1 one does not, 64 bad usage or an unreadable file.

        options:
          --log-key <vkey>              the transparency log's verifier key: check the log proof too
          --witness-key <vkey>          a witness's cosignature/v1 verifier key (repeatable)
          --min-witnesses <N>           cosignatures that must verify (default 0)
          -h, --help                    show this help
        """

    static func run(_ arguments: [String]) -> Int32 {
        let path: String
        var logPolicy: LogPolicy? = nil
        do throws(UsageError) {
            let args = try ParsedArguments(arguments, valued: ["log-key", "witness-key", "min-witnesses"], flags: ["help"])
            if args.has("help") { print(help); return ExitCode.success }
            guard args.positionals.first == "verify" else { throw UsageError(message: "say 'verify'") }
            guard args.positionals.count == 2 else { throw UsageError(message: "verify takes one receipt file ('-' for stdin)") }
            path = args.positionals[1]
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
