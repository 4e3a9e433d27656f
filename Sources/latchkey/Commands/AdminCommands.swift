import JSON
import LatchkeyServer
import Storage

/// `latchkey migrate`: apply pending migrations (safe to run from several instances at once).
enum MigrateCommand: Command {
    static let name = "migrate"
    static let summary = "apply database migrations (DATABASE_URL)"
    static let help = "usage: latchkey migrate\n\nApplies pending migrations under an advisory lock; prints the versions applied."

    static func run(_ arguments: [String]) -> Int32 {
        if arguments.contains("-h") || arguments.contains("--help") { print(help); return ExitCode.success }
        return withDatabase("latchkey migrate") { _, applied in
            print(applied.isEmpty ? "up to date" : "applied: " + applied.map(String.init).joined(separator: ", "))
            return ExitCode.success
        }
    }
}

/// `latchkey origins list|add|remove`: the origin allowlist, straight in PostgreSQL.
enum OriginsCommand: Command {
    static let name = "origins"
    static let summary = "list, add or remove allowed origins (DATABASE_URL)"
    static let help = """
        usage: latchkey origins list
               latchkey origins add <origin> | --android-fingerprint <AB:CD:…>
               latchkey origins remove <origin>

        Origins are https://host[:port], android:apk-key-hash:<base64url SHA-256>, or (with
        LATCHKEY_DEV=1) http://localhost[:port]. A keytool SHA-256 fingerprint is converted.
        add refuses (exit 64) a web origin that can never work for the rpId (LATCHKEY_RP_ID, default
        localhost): its host must be the rpId or under it, or able to be a related origin (https,
        a registrable domain; listed at https://<rpId>/.well-known/webauthn).
        """

    static func run(_ arguments: [String]) -> Int32 {
        do throws(UsageError) {
            let args = try ParsedArguments(arguments, valued: ["android-fingerprint"], flags: ["help"])
            if args.has("help") { print(help); return ExitCode.success }
            guard let verb = args.positionals.first else { throw UsageError(message: "say list, add or remove") }
            let env = Configuration.processEnvironment()
            // The rpId decides which origins can ever work (SPEC: `origins add` refuses the others).
            let configuration: Configuration
            do { configuration = try Configuration.site(env) } catch { throw UsageError(message: error.description) }
            return try withDatabase("latchkey origins", unset: "DATABASE_URL is not set\n\n\(help)") { (database, _) throws(UsageError) in
                let admin = AdminService(database: database, configuration: configuration)
                let target = args.positionals.dropFirst().first
                switch verb {
                case "list": break
                case "add": if target == nil && args.value("android-fingerprint") == nil { throw UsageError(message: "add needs an origin or --android-fingerprint") }
                case "remove": if target == nil { throw UsageError(message: "remove needs an origin") }
                default: throw UsageError(message: "unknown verb \(verb)")
                }
                do throws(ServiceError) {
                    switch verb {
                    case "list":
                        for o in try admin.listOrigins() { print("\(o.origin)\t\(o.source)") }
                    case "add":
                        let body: JSONValue = args.value("android-fingerprint").map { .object([("androidFingerprint", .string($0))]) }
                            ?? .object([("origin", .string(target ?? ""))])
                        let (origin, added) = try admin.addOrigin(body, by: .named("cli"))
                        print(added ? "added \(origin)" : "already present: \(origin)")
                    default:
                        let origin = target ?? ""
                        do throws(ServiceError) { try admin.removeOrigin(origin, by: .named("cli")) } catch {
                            guard error.code == .notFound else { throw error }
                            printError("not present: \(origin)"); return ExitCode.failure
                        }
                        print("removed \(origin)")
                    }
                    return ExitCode.success
                } catch where error.code == .invalidRequest {
                    throw UsageError(message: error.detail)
                } catch {
                    printError("latchkey origins: \(error)")
                    return ExitCode.failure
                }
            }
        } catch {
            printError("latchkey origins: \(error.message)\n\n\(help)")
            return ExitCode.usage
        }
    }
}

/// `latchkey apk-key-hash <fingerprint>`: keytool SHA-256 fingerprint → Android origin.
enum APKKeyHashCommand: Command {
    static let name = "apk-key-hash"
    static let summary = "turn a keytool SHA-256 fingerprint into an android:apk-key-hash origin"
    static let help = """
        usage: latchkey apk-key-hash <AB:CD:…:EF>

        Takes the SHA-256 fingerprint as keytool -list -v or the Play Console (App signing) show it,
        the whole line included (`SHA256: AB:CD:…`, quoted or not), plain hex, or the base64url hash;
        prints the android:apk-key-hash:… origin to allowlist.
        """

    static func run(_ arguments: [String]) -> Int32 {
        if arguments.contains("-h") || arguments.contains("--help") { print(help); return ExitCode.success }
        guard !arguments.isEmpty else { printError(help); return ExitCode.usage }
        // A pasted line unquoted arrives as several arguments (`SHA256:` `AB:CD:…`): read them as one.
        switch OriginRules.androidOrigin(fromFingerprint: arguments.joined(separator: " ")) {
        case .success(let origin): print(origin); return ExitCode.success
        case .failure(let e): printError("latchkey apk-key-hash: \(e.reason)"); return ExitCode.usage
        }
    }
}
