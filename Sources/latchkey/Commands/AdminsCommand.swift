import Foundation
import LatchkeyServer
import Storage

/// `latchkey admins add|list|remove`: the admin role, straight in PostgreSQL (DATABASE_URL).
enum AdminsCommand: Command {
    static let name = "admins"
    static let summary = "add, list or remove admin console users (DATABASE_URL)"
    static let help = """
        usage: latchkey admins add <username> [--origin URL]
               latchkey admins list
               latchkey admins remove <username>

        add     gives <username> the admin role (creating the user when there is none) and prints, as
                its last line, the one-time enrolment link <origin>/admin/?ticket=<ticket> for the
                admin's first passkey: single use, 10 minutes. <origin> is --origin, else the first
                web origin of LATCHKEY_ORIGINS, else LATCHKEY_ISSUER.
        list    one admin a line: username, user id, since, granted by.
        remove  takes the role away (the user and their passkeys stay).
        """

    static func run(_ arguments: [String]) -> Int32 {
        let args: ParsedArguments
        do { args = try ParsedArguments(arguments, valued: ["origin"], flags: ["help"]) } catch {
            printError("latchkey admins: \(error.message)\n\n\(help)"); return ExitCode.usage
        }
        if args.has("help") { print(help); return ExitCode.success }
        let verb = args.positionals.first
        let target = args.positionals.dropFirst().first
        switch verb {
        case "list": break
        case "add", "remove": if target == nil { printError("latchkey admins: \(verb!) needs a username\n\n\(help)"); return ExitCode.usage }
        default: printError("latchkey admins: say add, list or remove\n\n\(help)"); return ExitCode.usage
        }
        let configuration: Configuration
        do { configuration = try Configuration.fromEnvironment() } catch {
            printError("latchkey admins: \(error)"); return ExitCode.usage
        }
        let origin = args.value("origin")
            ?? configuration.origins.first { $0.hasPrefix("https://") || $0.hasPrefix("http://") }
            ?? configuration.issuer
        return withDatabase("latchkey admins", unset: "DATABASE_URL is not set\n\n\(help)") { database, _ in
            let admin = AdminService(database: database, configuration: configuration)
            do throws(ServiceError) {
                switch verb {
                case "add":
                    let added = try admin.addAdmin(username: target!, by: .named("cli"))
                    print(added.granted ? "\(added.user.username) is now an admin (user \(added.user.id))"
                                        : "\(added.user.username) was already an admin (user \(added.user.id))")
                    print("enrolment link, single use, until \(ISO8601DateFormatter().string(from: added.expiresAt)):")
                    var base = origin
                    while base.hasSuffix("/") { base.removeLast() }
                    print("\(base)/admin/?ticket=\(added.ticket)")
                case "remove":
                    guard try admin.removeAdmin(username: target!, by: .named("cli")) else {
                        printError("latchkey admins: \(target!) is not an admin"); return ExitCode.failure
                    }
                    print("removed the admin role from \(target!)")
                default:
                    for a in try admin.listAdmins() {
                        print("\(a.user.username)\t\(a.user.id)\t\(ISO8601DateFormatter().string(from: a.createdAt))\t\(a.createdBy)")
                    }
                }
                return ExitCode.success
            } catch where error.code == .invalidRequest || error.code == .conflict {
                printError("latchkey admins: \(error.detail)"); return ExitCode.usage
            } catch {
                printError("latchkey admins: \(error)"); return ExitCode.failure
            }
        }
    }
}
