import Foundation
import LatchkeyServer
import Storage

/// `latchkey admins add|link|grant|list|remove`: the admin role, straight in PostgreSQL (DATABASE_URL).
enum AdminsCommand: Command {
    static let name = "admins"
    static let summary = "add, link, grant, list or remove admin console users (DATABASE_URL)"
    static let help = """
        usage: latchkey admins add <username> [--origin URL]
               latchkey admins link <username> [--origin URL]
               latchkey admins grant <username> [--despite-pending]
               latchkey admins list
               latchkey admins remove <username>

        add     creates the user <username> with the admin role and prints, as its last line, the
                one-time enrolment link <origin>/admin/?ticket=<ticket> for the admin's first
                passkey: single use, 10 minutes. <origin> is --origin, else LATCHKEY_ADMIN_ORIGIN
                (required outside development mode with LATCHKEY_ADMIN_LISTEN: exit 64 without it),
                else the admin listener (LATCHKEY_ADMIN_LISTEN, for rpId localhost), else the first web origin of
                LATCHKEY_ORIGINS, else the first allowlisted web origin on the rpId's host in the
                database (what a running dev server seeded: http://localhost:8080), else
                LATCHKEY_ISSUER; the line before it says which. A username that exists is
                refused (exit 1): use grant for an existing account, link for an admin whose
                link expired. A registration that fails does not use the link up.
        link    prints, as its last line, a fresh enrolment link (as add does) for the admin
                <username> who has no passkey yet, replacing any unused one. An admin with a
                passkey, an account that is no admin, or an unknown username: exit 1.
        grant   gives the existing account <username> the admin role, without asking: it first
                prints the account's passkeys (id, provider, created, last used; a held one with
                its heldUntil), pending recoveries and device keys, which is what the role will
                trust, then grants — only if they are still exactly those (else nothing changes,
                exit 1). While a passkey is held or a recovery is pending someone may be taking
                the account over: refused (exit 1) unless --despite-pending. Unknown username: exit 1.
        list    one admin a line: username, user id, since, granted by.
        remove  takes the role away (the user and their passkeys stay).

        Every change is in the audit log with actor `cli` (admin.added, ticket.issued, admin.granted,
        admin.removed).
        Exit status: 0 done, 1 refused (exists, unknown, not an admin, has a passkey, changed,
        pending), 64 bad usage.
        """

    static func run(_ arguments: [String]) -> Int32 {
        let args: ParsedArguments
        do { args = try ParsedArguments(arguments, valued: ["origin"], flags: ["help", "despite-pending"]) } catch {
            printError("latchkey admins: \(error.message)\n\n\(help)"); return ExitCode.usage
        }
        if args.has("help") { print(help); return ExitCode.success }
        let verb = args.positionals.first
        let target = args.positionals.dropFirst().first
        switch verb {
        case "list":
            if args.positionals.count > 1 { printError("latchkey admins: list takes no arguments\n\n\(help)"); return ExitCode.usage }
        case "add", "link", "grant", "remove":
            if target == nil { printError("latchkey admins: \(verb!) needs a username\n\n\(help)"); return ExitCode.usage }
            if args.positionals.count > 2 { printError("latchkey admins: \(verb!) takes one username\n\n\(help)"); return ExitCode.usage }
        default: printError("latchkey admins: say add, link, grant, list or remove\n\n\(help)"); return ExitCode.usage
        }
        if verb != "add", verb != "link", args.value("origin") != nil {
            printError("latchkey admins: --origin applies to add and link\n\n\(help)"); return ExitCode.usage
        }
        if verb != "grant", args.has("despite-pending") {
            printError("latchkey admins: --despite-pending applies to grant\n\n\(help)"); return ExitCode.usage
        }
        let configuration: Configuration
        do { configuration = try Configuration.fromEnvironment() } catch {
            printError("latchkey admins: \(error)"); return ExitCode.usage
        }
        return withDatabase("latchkey admins", unset: "DATABASE_URL is not set\n\n\(help)") { database, _ in
            let stored = (try? database.config.origins().map(\.origin)) ?? []
            let (origin, from) = configuration.consoleOrigin(explicit: args.value("origin"),
                                                             originsFromEnvironment: Configuration.processEnvironment()["LATCHKEY_ORIGINS"] != nil,
                                                             stored: stored)
            let admin = AdminService(database: database, configuration: configuration)
            do throws(ServiceError) {
                switch verb {
                case "add":
                    let added = try admin.addAdmin(username: target!, by: .named("cli"))
                    print("\(added.user.username) is now an admin (user \(added.user.id))")
                    printEnrolmentLink(origin: origin, from: from, ticket: added.ticket, expiresAt: added.expiresAt)
                case "link":
                    let linked = try admin.adminLink(username: target!, by: .named("cli"))
                    print("a new enrolment link for \(linked.user.username) (user \(linked.user.id)); any earlier unused link no longer works")
                    printEnrolmentLink(origin: origin, from: from, ticket: linked.ticket, expiresAt: linked.expiresAt)
                case "grant":
                    let preview = try admin.adminGrantPreview(username: target!)
                    printTrusted(preview)
                    if try admin.grantAdmin(preview, despitePending: args.has("despite-pending"), by: .named("cli")) {
                        print("\(preview.user.username) is now an admin (user \(preview.user.id))")
                    } else {
                        print("\(preview.user.username) was already an admin (user \(preview.user.id)); nothing changed")
                    }
                case "remove":
                    guard try admin.removeAdmin(username: target!, by: .named("cli")) else {
                        printError("latchkey admins: \(target!) is not an admin"); return ExitCode.failure
                    }
                    print("removed the admin role from \(target!)")
                default:
                    for a in try admin.listAdmins() {
                        print("\(a.user.username)\t\(a.user.id)\t\(iso(a.createdAt))\t\(a.createdBy)")
                    }
                }
                return ExitCode.success
            } catch where error.code == .conflict || error.code == .notFound {
                // An existing username for add, an unknown one for grant, an account that changed mid-grant.
                printError("latchkey admins: \(error.detail)"); return ExitCode.failure
            } catch where error.code == .invalidRequest {
                printError("latchkey admins: \(error.detail)"); return ExitCode.usage
            } catch {
                printError("latchkey admins: \(error)"); return ExitCode.failure
            }
        }
    }

    /// The enrolment link `add` and `link` print, as the last line, with the line that says where
    /// its origin came from: the one place the link is built.
    static func printEnrolmentLink(origin: String, from: String, ticket: String, expiresAt: Date) {
        print("enrolment link (origin from \(from); --origin URL to change it), single use, until \(iso(expiresAt)):")
        print(Configuration.enrolmentLink(origin: origin, ticket: ticket))
    }

    /// The account `grant` is about to trust: one line per passkey (a held one with its
    /// `heldUntil`), per pending recovery and per device key.
    static func printTrusted(_ preview: AdminGrantPreview) {
        print("\(preview.user.username) (user \(preview.user.id)): the admin role will trust")
        let passkeys = preview.passkeys
        print("passkeys (\(passkeys.count)):" + (passkeys.isEmpty ? " none" : ""))
        for p in passkeys {
            var line = "  \(p.id)\tprovider \(p.provider ?? "unknown (AAGUID \(p.aaguid))")\tcreated \(iso(p.createdAt))"
                + "\tlast used \(p.lastUsedAt.map(iso) ?? "never")\tname \(p.name)"
            if let until = p.heldUntil { line += "\theld: heldUntil \(iso(until)) (approves nothing until then)" }
            print(line)
        }
        let recoveries = preview.pendingRecoveries
        print("pending recoveries (\(recoveries.count)):" + (recoveries.isEmpty ? " none" : ""))
        for r in recoveries {
            print("  \(r.id)\tby \(r.method.rawValue)\tnotBefore \(iso(r.notBefore))\texpires \(iso(r.expiresAt))")
        }
        let keys = preview.deviceKeys
        print("device keys (\(keys.count)):" + (keys.isEmpty ? " none" : ""))
        for k in keys {
            print("  \(k.id)\t\(k.platform) \(k.name)\tattestation \(k.attestationFormat) (\(k.securityLevel))\tcreated \(iso(k.createdAt))"
                  + "\tlast used \(k.lastUsedAt.map(iso) ?? "never")")
        }
    }

    static func iso(_ date: Date) -> String { ISO8601DateFormatter().string(from: date) }
}

