import Foundation
import JSON
import LatchkeyServer
import Storage
#if canImport(Glibc)
import Glibc
#endif

/// `latchkey accounts export|import`: whole accounts between deployments (DATABASE_URL, LATCHKEY_RP_ID).
enum AccountsCommand: Command {
    static let name = "accounts"
    static let summary = "export or import whole accounts as JSON Lines (DATABASE_URL)"
    static let help = """
        usage: latchkey accounts export [--user U …] [--output FILE]
               latchkey accounts import <file> [--format latchkey|keycloak|csv] [--rp-id R] [--dry-run] [--trust-verified-emails]

        export  writes every account (or those --user names; an unknown one is left out) as JSON
                Lines, one account a line (the user, the address, the live passkeys with their
                counters, the live device keys), then {"v":1,"count":N,"sha256":…}: the SHA-256 of
                every byte before that line. Never a secret. To standard output, or --output FILE.
                The file is personal data: keep it as you keep the database.
        import  creates the accounts of <file> (Latchkey's export), each whole or not at all, and
                prints one {"line","username","outcome","reason"} line per account: created,
                skipped (already here as the line says: a re-run), conflict (its username, user
                handle, external id, address, a credential or device key is here otherwise, or
                LATCHKEY_MAX_PASSKEYS, LATCHKEY_AUTHENTICATORS_DENY or the metadata's status
                (LATCHKEY_MDS_BLOB) refuses a passkey; nothing is merged) or refused (the line
                is bad: rp_id_mismatch, invalid_public_key, two_user_handles,
                duplicate_credential_id, …). A file whose checksum is wrong or that is
                truncated is refused whole (exit 1), nothing imported. Imported device keys are
                unattested; an imported address is kept unverified (it signs nobody in and gets
                no code until its owner verifies it) unless --trust-verified-emails keeps the
                file's verifiedAt. --dry-run decides every line and writes nothing.
                Every created account is audited (account.imported) with the file's sha256.
                --format keycloak: a Keycloak realm export (JSON); its users' webauthn and
                webauthn-passwordless credentials are the passkeys, the user handle is the
                UTF-8 of the user's Keycloak id, and the rpId is the realm's WebAuthn policy's
                (passwordless, else two-factor), else --rp-id. --format csv: a header row, then
                username,userHandle,credentialId,publicKey,signCount,alg rows (RFC 4180); the
                rows of one username are one account; publicKey is COSE, or SPKI with alg;
                the rpId is --rp-id, else LATCHKEY_RP_ID. Either way the rpId must equal
                LATCHKEY_RP_ID, and a file that cannot be read at all is refused whole.

        Exit status: 0 done (import: every line created or skipped), 1 refused or failed (import:
        some line a conflict or refused), 64 bad usage.
        """

    static func run(_ arguments: [String]) -> Int32 {
        let args: ParsedArguments
        do {
            args = try ParsedArguments(arguments, valued: ["user", "output", "format", "rp-id"], flags: ["help", "dry-run", "trust-verified-emails"])
        } catch {
            printError("latchkey accounts: \(error.message)\n\n\(help)"); return ExitCode.usage
        }
        if args.has("help") { print(help); return ExitCode.success }
        let configuration: Configuration
        do { configuration = try Configuration.fromEnvironment() } catch {
            printError("latchkey accounts: \(error)"); return ExitCode.usage
        }
        switch args.positionals.first {
        case "export":
            guard args.positionals.count == 1, args.value("format") == nil, args.value("rp-id") == nil, !args.has("dry-run"),
                  !args.has("trust-verified-emails") else {
                printError("latchkey accounts: export takes --user and --output only\n\n\(help)"); return ExitCode.usage
            }
            return export(args, configuration)
        case "import":
            guard args.positionals.count == 2, args.all("user").isEmpty, args.value("output") == nil else {
                printError("latchkey accounts: import takes one file\n\n\(help)"); return ExitCode.usage
            }
            guard let format = PortableFormat(rawValue: args.value("format") ?? "latchkey") else {
                printError("latchkey accounts: --format is latchkey, keycloak or csv"); return ExitCode.usage
            }
            if format == .latchkey {
                guard args.value("rp-id") == nil else {
                    printError("latchkey accounts: --rp-id is for keycloak and csv files (a Latchkey file names its rpId)"); return ExitCode.usage
                }
                return importFile(args.positionals[1], args, configuration)
            }
            return importWhole(args.positionals[1], format, args, configuration)
        default:
            printError("latchkey accounts: say export or import\n\n\(help)"); return ExitCode.usage
        }
    }

    static func export(_ args: ParsedArguments, _ configuration: Configuration) -> Int32 {
        printError("latchkey accounts: the export is personal data (usernames, addresses, passkeys' public keys): keep it as you keep the database")
        let fd: Int32
        if let path = args.value("output") {
            fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            guard fd >= 0 else { printError("latchkey accounts: cannot write \(path)"); return ExitCode.failure }
        } else {
            fd = 1
        }
        defer { if fd != 1 { close(fd) } }
        let users = args.all("user")
        return withDatabase("latchkey accounts") { database, _ in
            let service = PortabilityService(store: database.portability, policy: PortabilityPolicy(configuration))
            let writer = BufferedWriter(fd: fd)
            let progress = AccountsProgress(verb: "exported")
            var lines = 0
            do {
                let (count, sha) = try service.export(usernames: users.isEmpty ? nil : users) { line in
                    try writer.write(line)
                    lines += 1
                    progress.tick(lines)
                }
                progress.end()
                try writer.flush()
                try database.audit.append(AuditRecord(actor: "cli", action: "accounts.exported", subject: nil,
                                                      detail: .object([("count", .number(Double(count))), ("sha256", .string(sha))])))
                printError("latchkey accounts: exported \(count) account(s), sha256 \(sha)")
                return ExitCode.success
            } catch {
                printError("latchkey accounts: export failed: \(error)"); return ExitCode.failure
            }
        }
    }
}

/// The progress line on standard error: at most one a second, overwritten in place on a terminal.
final class AccountsProgress {
    let verb: String
    let start = monotonicNow()
    var last = monotonicNow()
    var shown = false
    let terminal = isatty(2) != 0

    init(verb: String) { self.verb = verb }

    func tick(_ count: Int) {
        let now = monotonicNow()
        guard now - last >= 1 else { return }
        last = now
        shown = true
        let line = "latchkey accounts: \(count) account(s) \(verb), \(Int(Double(count) / (now - start)))/s"
        if terminal { Self.write("\r" + line) } else { printError(line) }
    }

    func end() { if shown && terminal { Self.write("\n") } }

    static func write(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBufferPointer { Glibc.write(2, $0.baseAddress, $0.count) }
    }
}

/// The lines of a file, each with its `\n` (a last line without one as it is), read in chunks.
struct LineReader: Sequence, IteratorProtocol {
    private let fd: Int32
    private var buffer: [UInt8] = []
    private var start = 0
    private var done = false
    private let closer: FileCloser

    init?(path: String) {
        fd = open(path, O_RDONLY)
        guard fd >= 0 else { return nil }
        closer = FileCloser(fd: fd)
    }

    mutating func next() -> [UInt8]? {
        while true {
            if let nl = buffer[start...].firstIndex(of: 0x0A) {
                let line = Array(buffer[start...nl])
                start = nl + 1
                return line
            }
            if done {
                guard start < buffer.count else { return nil }
                let rest = Array(buffer[start...])
                start = buffer.count
                return rest
            }
            buffer.removeFirst(start)
            start = 0
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = read(fd, &chunk, chunk.count)
            if n < 0 { if errno == EINTR { continue }; done = true; continue }
            if n == 0 { done = true; continue }
            buffer.append(contentsOf: chunk[0..<n])
        }
    }
}

final class FileCloser {
    let fd: Int32
    init(fd: Int32) { self.fd = fd }
    deinit { close(fd) }
}

/// Writes to `fd` in 64 KiB pieces.
final class BufferedWriter {
    let fd: Int32
    var buffer: [UInt8] = []

    init(fd: Int32) { self.fd = fd }

    func write(_ bytes: [UInt8]) throws {
        buffer.append(contentsOf: bytes)
        if buffer.count >= 65536 { try flush() }
    }

    func flush() throws {
        var offset = 0
        while offset < buffer.count {
            let n = buffer[offset...].withUnsafeBufferPointer { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 { if errno == EINTR { continue }; throw UsageError(message: "write failed (errno \(errno))") }
            offset += n
        }
        buffer.removeAll(keepingCapacity: true)
    }
}
