import LatchkeyServer
import Storage

/// `latchkey log reset --i-understand`: the transparency log starts again under a new origin and key.
enum LogCommand: Command {
    static let name = "log"
    static let summary = "start the transparency log again under a new origin and key (DATABASE_URL)"
    static let help = """
        usage: latchkey log reset --i-understand

        reset   The transparency log starts again as `<origin>/<n+1>` with a new Ed25519 key (sealed
                under LATCHKEY_KEY_ENCRYPTION_KEY): its tree is emptied and every receipt is appended
                to the new log. For a log that cannot go on (its database restored from a backup that
                is behind its last checkpoint, so `serve` refuses to start): proofs from the old log
                stay valid but cannot be renewed. Prints the new origin and verifier key, the lines to
                give each witness and each verifier. Set LATCHKEY_LOG_ORIGIN to the new origin.
        """

    static func run(_ arguments: [String]) -> Int32 {
        do throws(UsageError) {
            let args = try ParsedArguments(arguments, valued: [], flags: ["help", "i-understand"])
            if args.has("help") { print(help); return ExitCode.success }
            guard args.positionals == ["reset"] else { throw UsageError(message: "say reset") }
            guard args.has("i-understand") else {
                throw UsageError(message: "reset starts a new log (a new origin and key; witnesses and verifiers must be told): add --i-understand")
            }
            let env = Configuration.processEnvironment()
            var configuration = Configuration()
            do throws(Configuration.Invalid) {
                configuration.developmentMode = try Configuration.developmentMode(env)
                if let v = env["LATCHKEY_KEY_ENCRYPTION_KEY"], !v.isEmpty {
                    configuration.keyEncryptionKey = try KeyEncryptionKey.parse(v, name: "LATCHKEY_KEY_ENCRYPTION_KEY", readFile: { readFile($0) })
                }
                try resolveDevelopmentKEK(&configuration, environment: env, announce: false)
            } catch {
                printError("latchkey log: \(error.description)"); return ExitCode.usage
            }
            return withDatabase("latchkey log") { database, _ in
                do {
                    let (origin, key) = try TransparencyLogAdministration.reset(database: database, kek: configuration.keyEncryptionKey)
                    printError("latchkey log: the transparency log starts again; set LATCHKEY_LOG_ORIGIN=\(origin) and restart every instance")
                    print("origin \(origin)")
                    print("vkey \(key)")
                    return ExitCode.success
                } catch {
                    printError("latchkey log: \(error)")
                    return ExitCode.failure
                }
            }
        } catch {
            printError("latchkey log: \(error.message)\n\n\(help)")
            return ExitCode.usage
        }
    }
}
