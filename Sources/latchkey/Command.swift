import LatchkeyServer
import Storage
#if canImport(Glibc)
import Glibc
#endif

enum ExitCode {
    static let success: Int32 = 0
    static let failure: Int32 = 1
    static let usage: Int32 = 64
}

protocol Command {
    static var name: String { get }
    static var summary: String { get }
    static var help: String { get }
    static func run(_ arguments: [String]) -> Int32
}

func usage(_ commands: [any Command.Type]) -> String {
    var text = "usage: latchkey <command> [options]\n\ncommands:\n"
    for c in commands { text += "  " + c.name.padding(12) + c.summary + "\n" }
    text += "\n'latchkey <command> --help' describes a command; 'latchkey --version' prints the version."
    return text
}

func printError(_ text: String) {
    let bytes = Array((text + "\n").utf8)
    _ = bytes.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count) }
}

extension String {
    func padding(_ width: Int) -> String { count >= width ? self + " " : self + String(repeating: " ", count: width - count) }
}

struct UsageError: Error { let message: String }

/// `--kebab-case` options in the swift-argument-parser manner, without the dependency.
struct ParsedArguments {
    var values: [String: [String]] = [:]
    var flags: Set<String> = []
    var positionals: [String] = []

    /// `valued`: options that take a value (`--x v` or `--x=v`); `flags`: options that do not.
    init(_ arguments: [String], valued: Set<String>, flags allowedFlags: Set<String>) throws(UsageError) {
        var i = 0
        while i < arguments.count {
            let arg = arguments[i]
            if arg.hasPrefix("--") {
                var name = String(arg.dropFirst(2))
                var inline: String? = nil
                if let eq = name.firstIndex(of: "=") {
                    inline = String(name[name.index(after: eq)...])
                    name = String(name[..<eq])
                }
                if valued.contains(name) {
                    let value: String
                    if let inline { value = inline } else {
                        i += 1
                        guard i < arguments.count else { throw UsageError(message: "--\(name) needs a value") }
                        value = arguments[i]
                    }
                    values[name, default: []].append(value)
                } else if allowedFlags.contains(name), inline == nil {
                    flags.insert(name)
                } else {
                    throw UsageError(message: "unknown option --\(name)")
                }
            } else if arg == "-h" {
                flags.insert("help")
            } else {
                positionals.append(arg)
            }
            i += 1
        }
    }

    func value(_ name: String) -> String? { values[name]?.last }
    func all(_ name: String) -> [String] { values[name] ?? [] }
    func has(_ flag: String) -> Bool { flags.contains(flag) }
}

/// Reads `fd` to its end; nil on a read error or once more than `limit` bytes arrived.
func readAll(fd: Int32, limit: Int = 1 << 22) -> [UInt8]? {
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = read(fd, &buffer, buffer.count)
        if n < 0 { if errno == EINTR { continue }; return nil }
        if n == 0 { return out }
        out.append(contentsOf: buffer[0..<n])
        if out.count > limit { return nil }
    }
}

func readAllStandardInput(limit: Int = 1 << 22) -> [UInt8]? { readAll(fd: 0, limit: limit) }

func readFile(_ path: String, limit: Int = 1 << 22) -> [UInt8]? {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    return readAll(fd: fd, limit: limit)
}

/// Runs `body` on the database in DATABASE_URL through a one-connection pool, migrated first (under
/// the advisory lock) unless `migrate` is false, and shuts the pool down afterwards. `applied` is
/// what the migration applied. Without DATABASE_URL prints "<command>: <unset>" and returns 64
/// (usage); when migrating fails prints "<command>: <error>" and returns 1.
func withDatabase<E: Error>(_ command: String, unset: String = "DATABASE_URL is not set", migrate: Bool = true,
                            _ body: (_ database: Database, _ applied: [Int]) throws(E) -> Int32) throws(E) -> Int32 {
    guard let url = Configuration.processEnvironment()["DATABASE_URL"], !url.isEmpty else {
        printError("\(command): \(unset)"); return ExitCode.usage
    }
    let pooler = Configuration.processEnvironment()["LATCHKEY_DB_POOLER"].flatMap(PoolerMode.init(rawValue:)) ?? .none
    let database = Database(url: url, connections: 1, pooler: pooler)
    defer { database.shutdown() }
    var applied: [Int] = []
    if migrate {
        do { applied = try database.migrate() } catch {
            printError("\(command): \(error)"); return ExitCode.failure
        }
    }
    return try body(database, applied)
}
