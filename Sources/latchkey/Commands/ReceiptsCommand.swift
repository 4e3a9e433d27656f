import Crypto
import JSON
import Receipts

/// `latchkey receipts verify <file>`: checks a receipt offline (SPEC "Evidence" → "Offline";
/// docs/evidence.md) — its signed challenge against `sub`, the key binding, `display` and
/// `actionHash`, and its signature under the approver's key — and prints each check.
enum ReceiptsCommand: Command {
    static let name = "receipts"
    static let summary = "verify a step-up receipt offline and print each check"
    static let help = """
        usage: latchkey receipts verify <receipt.json | ->

        Reads a receipt document (a bare receipt, or the {"receipt":{…},"log":…} answer of the receipt
        endpoints) from the file, or from stdin with '-', and checks it without Latchkey's database:
        the signed challenge ("LKSTEPUP", its version and nonce) against sub, evidence.keyBinding,
        display and actionHash (SHA-256 of the action's RFC 8785 form), approver.id among a passkey's
        bound credentialIds and rpId, and the signature under approver.publicKey. Prints one line per
        check, then the receipt's commitment (SHA-256 of its RFC 8785 bytes).
        Exit status: 0 every check holds, 1 one does not, 64 bad usage or an unreadable file.

        options:
          -h, --help                    show this help
        """

    static func run(_ arguments: [String]) -> Int32 {
        let path: String
        do throws(UsageError) {
            let args = try ParsedArguments(arguments, valued: [], flags: ["help"])
            if args.has("help") { print(help); return ExitCode.success }
            guard args.positionals.first == "verify" else { throw UsageError(message: "say 'verify'") }
            guard args.positionals.count == 2 else { throw UsageError(message: "verify takes one receipt file ('-' for stdin)") }
            path = args.positionals[1]
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
        let (text, passed) = verify(parsed)
        print(text, terminator: "")
        return passed ? ExitCode.success : ExitCode.failure
    }

    /// The report for a parsed file: a bare receipt, or `{"receipt":{…},"log":…}`.
    static func verify(_ file: JSONValue) -> (text: String, passed: Bool) {
        let receipt: JSONValue
        if let wrapped = file["receipt"], file["v"] == nil { receipt = wrapped } else { receipt = file }
        var checks = ReceiptChecker.check(receipt)
        checks += logChecks(receipt: receipt, log: file["v"] == nil ? file["log"] : nil)
        var text = ""
        for check in checks { text += (check.passed ? "ok    " : "FAIL  ") + check.name + ": " + check.detail + "\n" }
        let passed = ReceiptChecker.allPassed(checks)
        if receipt.objectValue != nil { text += "commitment: " + Hex.encode(ReceiptChecker.commitment(receipt)) + "\n" }
        text += passed ? "receipt verified\n" : "receipt NOT verified\n"
        return (text, passed)
    }

    /// The transparency log's checks of `log` (a C2SP tlog-proof for the receipt's commitment): the
    /// inclusion proof, the checkpoint's signature and its cosignatures. This build has no log
    /// verifier, so a file's `log` member adds no check here.
    static func logChecks(receipt: JSONValue, log: JSONValue?) -> [ReceiptChecker.Check] { [] }
}
