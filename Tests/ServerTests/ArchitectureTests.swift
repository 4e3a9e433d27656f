import Foundation
import Testing

/// ARCHITECTURE.md's rules, read off the source tree: each claim the page makes about where things
/// may live is checked here, so the page cannot drift from the code.
@Suite("ARCHITECTURE.md holds")
struct ArchitectureTests {
    static let root = TestDatabase.repositoryRoot

    /// Every `.swift` file under `folder` (relative to the repository), with its lines.
    static func sources(_ folder: String) throws -> [(path: String, lines: [Substring])] {
        let base = root.appendingPathComponent(folder)
        guard let walker = FileManager.default.enumerator(atPath: base.path) else { return [] }
        var out: [(String, [Substring])] = []
        for case let relative as String in walker where relative.hasSuffix(".swift") {
            let text = try String(contentsOf: base.appendingPathComponent(relative), encoding: .utf8)
            out.append((folder + "/" + relative, text.split(separator: "\n", omittingEmptySubsequences: false)))
        }
        return out.sorted { $0.0 < $1.0 }
    }

    /// A line with its `//` comment dropped (string literals holding `//`, such as URLs, are kept:
    /// a comment starts at `//` outside quotes).
    static func code(_ line: Substring) -> Substring {
        var inString = false
        var previous: Character = " "
        for index in line.indices {
            let c = line[index]
            if c == "\"" && previous != "\\" { inString.toggle() }
            if !inString, c == "/", previous == "/" { return line[..<line.index(before: index)] }
            previous = c
        }
        return line
    }

    @Test("no file in Sources/ is over 400 lines")
    func filesStayShort() throws {
        let long = try Self.sources("Sources").filter { $0.lines.count > 400 }.map { "\($0.path): \($0.lines.count) lines" }
        #expect(long.isEmpty, "\(long)")
    }

    /// ARCHITECTURE.md "Where time and randomness come from": `Runtime` is the one source of wall
    /// time, monotonic time, randomness and host-name lookups in the server and its storage.
    @Test("clocks, randomness and name lookups only in Runtime")
    func timeAndRandomnessComeFromRuntime() throws {
        let patterns = ["Date()", "Date.now", "timeIntervalSinceNow", "SecureRandom", ".random(in:", "Bool.random(", "UUID()", "arc4random",
                        "SystemRandomNumberGenerator", "ContinuousClock", "SuspendingClock", "clock_gettime", "DispatchTime.now",
                        "systemUptime", "getaddrinfo", "monotonicNow()"]
        // The one source, and what it hands out: the resolver behind `Runtime.resolver`, and the
        // command line's generator of a new key-encryption key (no service calls it).
        let allowed: [String: Set<String>] = [
            "Sources/LatchkeyServer/Platform/Runtime.swift": Set(patterns),
            "Sources/LatchkeyServer/Events/HostResolver.swift": ["getaddrinfo"],
            "Sources/LatchkeyServer/Platform/KeyEncryption.swift": ["SecureRandom"],
        ]
        var found: [String] = []
        for folder in ["Sources/LatchkeyServer", "Sources/Storage"] {
            for (path, lines) in try Self.sources(folder) {
                for (n, line) in lines.enumerated() {
                    let code = Self.code(line)
                    for p in patterns where code.contains(p) && !(allowed[path]?.contains(p) ?? false) {
                        found.append("\(path):\(n + 1): \(p)")
                    }
                }
            }
        }
        #expect(found.isEmpty, "\(found)")
    }

    /// ARCHITECTURE.md "Invariants": SQL lives in `Storage` (and the `PostgreSQL` layer under it);
    /// the named exception is `latchkey bench`, which seeds and measures databases of its own.
    @Test("SQL only in Storage, PostgreSQL and latchkey bench")
    func sqlOnlyInStorage() throws {
        let statement = try Regex(#"\b(SELECT\s+[\w*(]|INSERT\s+INTO\s|UPDATE\s+\w+\s+SET\s|DELETE\s+FROM\s|CREATE\s+(TABLE|INDEX|FUNCTION)\s)"#)
        var found: [String] = []
        for (path, lines) in try Self.sources("Sources") {
            if path.hasPrefix("Sources/Storage/") || path.hasPrefix("Sources/PostgreSQL/") || path.hasPrefix("Sources/PostgreSQLTesting/") { continue }
            if path.hasPrefix("Sources/latchkey/Commands/Bench") { continue }
            for (n, line) in lines.enumerated() where Self.code(line).contains(statement) {
                found.append("\(path):\(n + 1)")
            }
        }
        #expect(found.isEmpty, "\(found)")
    }

    /// ARCHITECTURE.md "Invariants": services never see HTTP. The `HTTP` module (`Request`,
    /// `Response`) is imported by the routes, the request pipeline in `Platform/`, and the page
    /// renderers the routes call; nowhere else in the server.
    @Test("Request and Response only in routes, the pipeline and the renderers")
    func noHTTPInServices() throws {
        let pipeline: Set<String> = ["Application.swift", "Pipeline.swift", "PipelineStages.swift", "RouteTable.swift", "RouteGuard.swift", "RouteGuard+AdminChange.swift",
                                     "GuardLookups.swift", "Credentials.swift", "SessionDPoP.swift", "RequestFields.swift", "ServiceError.swift", "Services.swift",
                                     "RequestLog.swift"]
        let renderers: Set<String> = ["OAuth/OAuthPages.swift", "OAuth/OAuthPages+Logout.swift", "OAuth/OPSessionCookie.swift"]
        var found: [String] = []
        for (path, lines) in try Self.sources("Sources/LatchkeyServer") where lines.contains(where: { $0.hasPrefix("import HTTP") }) {
            let name = (path as NSString).lastPathComponent
            let relative = String(path.dropFirst("Sources/LatchkeyServer/".count))
            if name.hasSuffix("Routes.swift") || (relative.hasPrefix("Platform/") && pipeline.contains(name)) || renderers.contains(relative) { continue }
            found.append(path)
        }
        #expect(found.isEmpty, "\(found)")
    }

    /// ARCHITECTURE.md "The server, by feature": every folder of `Sources/LatchkeyServer` has one row.
    @Test("the feature table lists every folder once")
    func featureTableListsEveryFolderOnce() throws {
        let page = try String(contentsOf: Self.root.appendingPathComponent("ARCHITECTURE.md"), encoding: .utf8)
        guard let start = page.range(of: "## The server, by feature") else {
            Issue.record("ARCHITECTURE.md has no section \"The server, by feature\"")
            return
        }
        let rows = page[start.upperBound...].split(separator: "\n").prefix { !$0.hasPrefix("## ") }.filter { $0.hasPrefix("| `") }
        var listed: [String] = []
        for row in rows {
            let first = row.split(separator: "|").first.map(String.init) ?? ""
            listed += first.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "`/")) }
        }
        let folders = try FileManager.default.contentsOfDirectory(atPath: Self.root.appendingPathComponent("Sources/LatchkeyServer").path)
            .filter { !$0.hasPrefix(".") }.sorted()
        for folder in folders {
            #expect(listed.filter { $0 == folder }.count == 1, "\(folder) is listed \(listed.filter { $0 == folder }.count) times")
        }
    }

    /// ARCHITECTURE.md "Which store each feature uses": a feature's code names only the repositories
    /// the table gives it (its own, and the crossings listed there with their reasons), so a new
    /// reach into another feature's store fails here until it is argued for on that page.
    @Test("each feature uses only the stores ARCHITECTURE.md gives it")
    func featuresUseTheirStores() throws {
        let page = try String(contentsOf: Self.root.appendingPathComponent("ARCHITECTURE.md"), encoding: .utf8)
        guard let start = page.range(of: "## Which store each feature uses") else {
            Issue.record("ARCHITECTURE.md has no section \"Which store each feature uses\"")
            return
        }
        var granted: [String: Set<String>] = [:]
        // A crossing "`XRepository` in `File` only" is named in that file alone (the store protocol's PostgreSQL side).
        var confined: [String: [String: String]] = [:]
        let only = try Regex(#"`(\w+Repository)` in `(\w+)` only"#)
        for row in page[start.upperBound...].split(separator: "\n").prefix { !$0.hasPrefix("## ") } where row.hasPrefix("| `") {
            let cells = row.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 2 else { continue }
            let folder = cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`/"))
            let names = try Regex(#"`(\w+Repository)`"#)
            granted[folder] = Set(cells.dropFirst().joined(separator: " ").matches(of: names).map { String($0.output[1].substring ?? "") })
            for match in cells.dropFirst().joined(separator: " ").matches(of: only) {
                confined[folder, default: [:]][String(match.output[1].substring ?? "")] = String(match.output[2].substring ?? "")
            }
        }
        let repository = try Regex(#"\b(\w+Repository)\b"#)
        var found: [String] = []
        for (path, lines) in try Self.sources("Sources/LatchkeyServer") {
            let folder = String(path.dropFirst("Sources/LatchkeyServer/".count).prefix { $0 != "/" })
            let allowed = granted[folder] ?? []
            let file = String(path.split(separator: "/").last ?? "").replacingOccurrences(of: ".swift", with: "")
            for (n, line) in lines.enumerated() {
                for match in Self.code(line).matches(of: repository) {
                    let name = String(match.output[1].substring ?? "")
                    let elsewhere = confined[folder]?[name].map { $0 != file } ?? false
                    if !allowed.contains(name) || elsewhere { found.append("\(path):\(n + 1): \(name)") }
                }
            }
        }
        #expect(found.isEmpty, "\(found)")
    }

    /// A feature with a store protocol names its repositories only where they conform to it: its
    /// service and routes see the protocol alone (and the service tests an in-memory store).
    @Test("Passkeys/, Recovery/, Sessions/, OAuth/, Admin/ and Apps/ name a repository only where it conforms to their store protocol")
    func storeProtocolsHideRepositories() throws {
        let conformances: [String: Set<String>] = [
            // The origin allowlist's and the metadata ledger's caches hold their repositories themselves.
            "Passkeys": ["PasskeyStore.swift", "LoginStore.swift", "PasskeyAssertion.swift", "OriginCache.swift", "MetadataStore.swift"],
            "Recovery": ["RecoveryStore.swift"],
            "Sessions": ["SessionStore.swift", "RevokedSessions.swift", "SigningKeyStore.swift"],
            "OAuth": ["OAuthStore.swift", "PostgresOAuthStore.swift", "RSASigningKey.swift", "CIBAStore.swift"],
            "Admin": ["PostgresAdminStore.swift"],
            "Apps": ["AppStore.swift"],
            "Vault": ["VaultStore.swift"],
        ]
        let repository = try Regex(#"\b(\w+Repository)\b"#)
        var found: [String] = []
        for (folder, allowed) in conformances {
            for (path, lines) in try Self.sources("Sources/LatchkeyServer/" + folder) {
                guard !allowed.contains(String(path.split(separator: "/").last ?? "")) else { continue }
                for (n, line) in lines.enumerated() where Self.code(line).contains(repository) { found.append("\(path):\(n + 1)") }
            }
        }
        #expect(found.isEmpty, "\(found)")
    }

    /// ARCHITECTURE.md "How the services reach each other": each feature decides with its own
    /// settings, read once from the configuration (`CeremonyPolicy`, `StepUpPolicy`, …); outside
    /// Platform/ only what loads files or speaks SMTP from the settings holds the `Configuration`.
    @Test("no service outside Platform/ holds the whole Configuration, only its feature's policy")
    func servicesHoldPolicies() throws {
        // The metadata BLOB and CRL paths, the attestation roots and status file, the SMTP transport.
        let allowed: Set<String> = ["MetadataStore.swift", "AttestationTrust.swift", "MailService.swift"]
        let stored = try Regex(#"^\s*(public |private |fileprivate |internal )?(let|var) \w+: Configuration\b"#)
        var found: [String] = []
        for (path, lines) in try Self.sources("Sources/LatchkeyServer") where !path.hasPrefix("Sources/LatchkeyServer/Platform/") {
            guard !allowed.contains(String(path.split(separator: "/").last ?? "")) else { continue }
            for (n, line) in lines.enumerated() where Self.code(line).contains(stored) { found.append("\(path):\(n + 1)") }
        }
        #expect(found.isEmpty, "\(found)")
    }

    /// ARCHITECTURE.md "How the services reach each other": services return values and one renderer
    /// per resource, beside the routes, turns them into JSON. In these features no function of a
    /// service file (any file not named `*Routes.swift` or `*Renderer.swift`) returns `JSONValue`; an
    /// audit line's detail (`[(key: String, value: JSONValue)]`) is a stored record's members, not an answer.
    @Test("Passkeys/, Sessions/, DeviceKeys/, StepUp/, Recovery/, Admin/, Apps/, the webhook and OAuth client services return values, never JSONValue")
    func servicesReturnValues() throws {
        let services: [(folder: String, file: @Sendable (String) -> Bool)] = [
            ("Passkeys", { _ in true }), ("Sessions", { _ in true }), ("DeviceKeys", { _ in true }), ("StepUp", { _ in true }),
            ("Recovery", { _ in true }), ("Admin", { _ in true }), ("Apps", { _ in true }),
            ("Events", { $0.hasPrefix("WebhookService") }), ("OAuth", { $0 == "OAuthClientService.swift" }),
        ]
        var found: [String] = [], checked = 0
        for (folder, included) in services {
            for (path, lines) in try Self.sources("Sources/LatchkeyServer/" + folder) {
                let name = String(path.split(separator: "/").last ?? "")
                guard included(name), !name.hasSuffix("Routes.swift"), !name.hasSuffix("Renderer.swift") else { continue }
                let code = lines.map { String(Self.code($0)) }.joined(separator: "\n")
                for declaration in code.components(separatedBy: "func ").dropFirst() {
                    checked += 1
                    let returned = Self.returnType(declaration).replacingOccurrences(of: "(key: String, value: JSONValue)", with: "")
                    if returned.contains("JSONValue") { found.append("\(path): func \(declaration.prefix { $0 != "(" })") }
                }
            }
        }
        #expect(checked > 50 && found.isEmpty, "\(found)")
    }

    /// What a declaration's text (after `func `) returns: after its last `->` outside parentheses and
    /// brackets, before the body, a `where` clause or the line's end; "" when it returns nothing.
    static func returnType(_ declaration: String) -> String {
        let signature = declaration.prefix { $0 != "{" }
        var depth = 0, arrow: String.Index? = nil, previous: Character = " "
        for index in signature.indices {
            switch signature[index] {
            case "(", "[": depth += 1
            case ")", "]": depth -= 1
            case ">" where previous == "-" && depth == 0: arrow = signature.index(after: index)
            default: break
            }
            previous = signature[index]
        }
        guard let arrow else { return "" }
        let rest = signature[arrow...].prefix { $0 != "\n" }
        return String(rest.components(separatedBy: " where ").first ?? "")
    }

    @Test("comments in Sources/ state rules, not history (no issue numbers)")
    func commentsStateRules() throws {
        let history = try Regex(#"(?i)\bissue \d+\b|\bschemathesis (found|flagged)\b"#)
        var found: [String] = []
        for (path, lines) in try Self.sources("Sources") {
            for (n, line) in lines.enumerated() {
                guard let slash = line.range(of: "//") else { continue }
                if line[slash.lowerBound...].contains(history) { found.append("\(path):\(n + 1)") }
            }
        }
        #expect(found.isEmpty, "\(found)")
    }
}
