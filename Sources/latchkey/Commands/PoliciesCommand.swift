import Foundation
import LatchkeyServer
import Storage

/// `latchkey policies list|get|set|delete`: quorum approval policies (SPEC "Quorum approvals"),
/// straight in PostgreSQL (DATABASE_URL); every change is in the audit log with actor `cli`.
enum PoliciesCommand: Command {
    static let name = "policies"
    static let summary = "list, get, set or delete quorum approval policies (DATABASE_URL)"
    static let help = """
        usage: latchkey policies list
               latchkey policies get <name>
               latchkey policies set <name> <policy JSON | @file | - (stdin)>
               latchkey policies delete <name>

        A policy is {"approvers":[{"user":<user id>}|{"role":"admin"}…],"requesters":[…],"needed":M,
        "delay":seconds,"expires":seconds,"notifyOwner":bool,"breakGlass":bool,"requesterCounts":bool}
        (every member required; breakGlass needs needed 1 and delay 0). list prints one policy a line
        as JSON; get prints one; set creates or replaces it; delete removes it (approvals already open
        keep the policy they were opened under).
        Exit status: 0 done, 1 refused (invalid or unknown), 64 bad usage.
        """

    static func run(_ arguments: [String]) -> Int32 {
        let args: ParsedArguments
        do { args = try ParsedArguments(arguments, valued: [], flags: ["help"]) } catch {
            printError("latchkey policies: \(error.message)\n\n\(help)"); return ExitCode.usage
        }
        if args.has("help") { print(help); return ExitCode.success }
        let p = args.positionals
        let arity = ["list": 1, "get": 2, "set": 3, "delete": 2]
        guard let verb = p.first, let n = arity[verb], p.count == n else {
            printError("latchkey policies: say list, get <name>, set <name> <JSON> or delete <name>\n\n\(help)"); return ExitCode.usage
        }
        var document: [UInt8] = []
        if verb == "set" {
            let source = p[2]
            if source == "-" {
                document = Array(FileHandle.standardInput.readDataToEndOfFile())
            } else if source.hasPrefix("@") {
                guard let data = FileManager.default.contents(atPath: String(source.dropFirst())) else {
                    printError("latchkey policies: cannot read \(source.dropFirst())"); return ExitCode.usage
                }
                document = Array(data)
            } else {
                document = Array(source.utf8)
            }
        }
        let configuration: Configuration
        do { configuration = try Configuration.fromEnvironment() } catch { printError("latchkey policies: \(error)"); return ExitCode.usage }
        return withDatabase("latchkey policies", unset: "DATABASE_URL is not set\n\n\(help)") { database, _ in
            let policies = ApprovalPolicyConsole(database: database, configuration: configuration)
            do throws(ServiceError) {
                switch verb {
                case "list": for line in try policies.list() { print(line) }
                case "get": print(try policies.get(p[1]))
                case "set": print(try policies.set(p[1], json: document) ? "created \(p[1])" : "replaced \(p[1])")
                default:
                    try policies.delete(p[1])
                    print("deleted \(p[1])")
                }
                return ExitCode.success
            } catch {
                printError("latchkey policies: \(error.detail)")
                return ExitCode.failure
            }
        }
    }
}
