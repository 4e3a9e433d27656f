import Tokens
import Crypto
import LatchkeyServer
import Storage
#if canImport(Glibc)
import Glibc
#endif

/// `latchkey keys list|rotate`: the token signing keys in PostgreSQL and the key-encryption key
/// (KEK) they are sealed under.
enum KeysCommand: Command {
    static let name = "keys"
    static let summary = "list token signing keys; re-encrypt them under a new KEK or add a new one (DATABASE_URL)"
    static let help = """
        usage: latchkey keys list
               latchkey keys rotate [--new-key <base64 | @/path/to/file>] [--signing-key]

        Token signing keys are stored sealed (AES-256-GCM) under the key-encryption key in
        LATCHKEY_KEY_ENCRYPTION_KEY (base64 of 32 bytes, or @/path/to/file).

        list             kid, created, state (live / retired) and the KEK id each key is sealed under.
        rotate --new-key re-encrypts every signing key, retired ones too, from the current KEK to the new
                         one (also read from LATCHKEY_NEW_KEY_ENCRYPTION_KEY) in one transaction; then
                         restart every instance with LATCHKEY_KEY_ENCRYPTION_KEY set to the new key.
                         Running instances keep the keys they hold until then.
        rotate --signing-key
                         adds a new signing key (sealed under the new KEK when given): it signs on every
                         instance within a minute; the previous key stays live, so tokens it signed
                         keep verifying until they expire.
        """

    static func run(_ arguments: [String]) -> Int32 {
        do throws(UsageError) {
            let args = try ParsedArguments(arguments, valued: ["new-key"], flags: ["help", "signing-key"])
            if args.has("help") { print(help); return ExitCode.success }
            guard let verb = args.positionals.first, args.positionals.count == 1 else { throw UsageError(message: "say list or rotate") }
            let env = Configuration.processEnvironment()
            var configuration = Configuration()
            do { configuration.developmentMode = try Configuration.developmentMode(env) } catch { throw UsageError(message: error.description) }
            var newKEK: KeyEncryptionKey? = nil
            do throws(Configuration.Invalid) {
                if let v = env["LATCHKEY_KEY_ENCRYPTION_KEY"], !v.isEmpty {
                    configuration.keyEncryptionKey = try KeyEncryptionKey.parse(v, name: "LATCHKEY_KEY_ENCRYPTION_KEY",
                                                                              readFile: { readFile($0) })
                }
                if let v = args.value("new-key") ?? env["LATCHKEY_NEW_KEY_ENCRYPTION_KEY"], !v.isEmpty {
                    newKEK = try KeyEncryptionKey.parse(v, name: args.value("new-key") != nil ? "--new-key" : "LATCHKEY_NEW_KEY_ENCRYPTION_KEY",
                                                        readFile: { readFile($0) })
                }
                try resolveDevelopmentKEK(&configuration, environment: env, announce: false)
            } catch {
                printError("latchkey keys: \(error.description)"); return ExitCode.usage
            }
            switch verb {
            case "list": break
            case "rotate": if newKEK == nil && !args.has("signing-key") { throw UsageError(message: "rotate needs --new-key and/or --signing-key") }
            default: throw UsageError(message: "unknown verb \(verb)")
            }
            return withDatabase("latchkey keys") { database, _ in
                do throws(SigningKeyError) {
                    var store = SigningKeyStore(keys: database.keys, kek: configuration.keyEncryptionKey)
                    if verb == "list" {
                        for row in try store.stored() {
                            let sealing = row.sealed.map { SealedSecret.keyID(of: $0).map { "kek \($0)" } ?? "sealed (unknown format)" }
                                ?? "PLAINTEXT (sealed at the next start)"
                            print("\(row.kid)\t\(row.createdAt)\t\(row.retired ? "retired" : "live")\t\(sealing)")
                        }
                        return ExitCode.success
                    }
                    if let newKEK {
                        let count = try store.reencrypt(to: newKEK)
                        // The transparency log's key is sealed the same way; it moves to the new KEK too.
                        if let kek = configuration.keyEncryptionKey {
                            do { try TransparencyLogAdministration.reseal(database: database, from: kek, to: newKEK) } catch {
                                throw SigningKeyError(code: .storage, description: "the signing keys are re-encrypted, the transparency log's key is not: \(error)")
                            }
                        }
                        print("re-encrypted \(count) signing key(s) under \(newKEK); set LATCHKEY_KEY_ENCRYPTION_KEY to the new key and restart every instance")
                        store = SigningKeyStore(keys: database.keys, kek: newKEK)
                    }
                    if args.has("signing-key") {
                        try store.prepare()
                        let kid = try store.addNewKey()
                        print("added signing key \(kid); the previous key stays live for the tokens it signed")
                    }
                    return ExitCode.success
                } catch {
                    printError("latchkey keys: \(error.description)")
                    return ExitCode.failure
                }
            }
        } catch {
            printError("latchkey keys: \(error.message)\n\n\(help)")
            return ExitCode.usage
        }
    }
}

/// Development mode without LATCHKEY_KEY_ENCRYPTION_KEY: a KEK generated once and kept in a file
/// (LATCHKEY_DEV_KEY_FILE, default `data/dev-key-encryption-key`, mode 0600) next to the dev
/// cluster, never in the database — so even the dev database holds no plaintext keys, and the code
/// path is the production one. Outside development mode nothing is filled in (start-up refuses).
func resolveDevelopmentKEK(_ configuration: inout Configuration, environment: [String: String], announce: Bool) throws(Configuration.Invalid) {
    guard configuration.keyEncryptionKey == nil, configuration.developmentMode else { return }
    let path = developmentKeyFile(environment)
    if readFile(path) == nil {
        if let slash = path.lastIndex(of: "/") { mkdir(String(path[..<slash]), 0o700) }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        if fd >= 0 {
            let text = Array((KeyEncryptionKey.generateText() + "\n").utf8)
            _ = text.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count) }
            close(fd)
            if announce { printError("latchkey: development mode: generated a key-encryption key in \(path) (set LATCHKEY_KEY_ENCRYPTION_KEY outside dev mode)") }
        }
    }
    configuration.keyEncryptionKey = try KeyEncryptionKey.parse("@" + path, name: "the development key file \(path) (LATCHKEY_DEV_KEY_FILE)",
                                                                readFile: { readFile($0) })
    if announce { printError("latchkey: development mode: signing keys are sealed under the key-encryption key in \(path)") }
}

/// The development key file as an absolute path (`LATCHKEY_DEV_KEY_FILE`, default
/// `data/dev-key-encryption-key` under the working directory), so every message names one file
/// whatever folder the next command runs in.
func developmentKeyFile(_ environment: [String: String]) -> String {
    let path = environment["LATCHKEY_DEV_KEY_FILE"].flatMap { $0.isEmpty ? nil : $0 } ?? "data/dev-key-encryption-key"
    if path.hasPrefix("/") { return path }
    var buffer = [CChar](repeating: 0, count: 4096)
    guard getcwd(&buffer, buffer.count) != nil else { return path }
    let cwd = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return (cwd == "/" ? "" : cwd) + "/" + path
}
