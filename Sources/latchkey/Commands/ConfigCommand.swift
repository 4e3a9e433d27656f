import LatchkeyServer

/// `latchkey config check|--markdown`: the configuration `serve` would use, without serving.
enum ConfigCommand: Command {
    static let name = "config"
    static let summary = "check the configuration serve would use, or print its table (--markdown)"
    static let help = """
        usage: latchkey config check
               latchkey config --markdown

        check       reads the environment as `latchkey serve` does and prints every setting with its
                    value and source ([environment], [default], a file), secrets redacted, then the
                    warnings serve would print and whether serve would start. Touches no database.
                    Exit 0 it would start (warnings or not), 1 it would refuse, 64 bad usage.
        --markdown  the table of every setting (docs/operator.md holds this output).
        """

    static func run(_ arguments: [String]) -> Int32 {
        let args: ParsedArguments
        do { args = try ParsedArguments(arguments, valued: [], flags: ["help", "markdown"]) } catch {
            printError("latchkey config: \(error.message)\n\n\(help)"); return ExitCode.usage
        }
        if args.has("help") { print(help); return ExitCode.success }
        if args.has("markdown") {
            guard args.positionals.isEmpty else { printError(help); return ExitCode.usage }
            print(ConfigurationCatalogue.markdown(), terminator: "")
            return ExitCode.success
        }
        guard args.positionals == ["check"] else { printError("latchkey config: say check or --markdown\n\n\(help)"); return ExitCode.usage }
        let env = Configuration.processEnvironment()
        var configuration: Configuration? = nil
        var refusal: String? = nil
        var keyFile: String? = nil
        do {
            let c = try Configuration.fromEnvironment(env)
            // serve would generate (or read) the development key file; say which, without writing it.
            if c.keyEncryptionKey == nil, c.developmentMode { keyFile = developmentKeyFile(env) }
            configuration = c
        } catch {
            refusal = error.description
        }
        let report = ConfigurationReport(environment: env, configuration: configuration, refusal: refusal, developmentKeyFile: keyFile)
        print(report.text, terminator: "")
        return report.refusal == nil ? ExitCode.success : ExitCode.failure
    }
}

/// `latchkey healthcheck`: GET /healthz on this instance; for a container's HEALTHCHECK (no shell,
/// no curl in the image). Exit 0 healthy, 1 not.
enum HealthcheckCommand: Command {
    static let name = "healthcheck"
    static let summary = "exit 0 when this instance's /healthz answers 200 (container HEALTHCHECK)"
    static let help = """
        usage: latchkey healthcheck [--url http://127.0.0.1:8080/healthz]

        Fetches --url, by default /healthz on LATCHKEY_LISTEN (0.0.0.0 and :: mean 127.0.0.1), with
        a 5-second timeout. Exit 0 when it answers 200, 1 otherwise (the reason on stderr).
        """

    static func run(_ arguments: [String]) -> Int32 {
        let args: ParsedArguments
        do { args = try ParsedArguments(arguments, valued: ["url"], flags: ["help"]) } catch {
            printError("latchkey healthcheck: \(error.message)\n\n\(help)"); return ExitCode.usage
        }
        if args.has("help") { print(help); return ExitCode.success }
        guard args.positionals.isEmpty else { printError(help); return ExitCode.usage }
        let url = args.value("url") ?? defaultURL(Configuration.processEnvironment()["LATCHKEY_LISTEN"])
        do {
            let answer = try HTTPFetcher(timeout: 5).send("GET", url)
            guard answer.status == 200 else {
                printError("latchkey healthcheck: \(url) answered \(answer.status)"); return ExitCode.failure
            }
            print("ok: \(url) \(String(decoding: answer.body.prefix(200), as: UTF8.self))")
            return ExitCode.success
        } catch {
            printError("latchkey healthcheck: \(error.description)")
            return ExitCode.failure
        }
    }

    static func defaultURL(_ listen: String?) -> String {
        var host = "127.0.0.1", port = "8080"
        if let listen, let colon = listen.lastIndex(of: ":") {
            let h = String(listen[..<colon]).trimmingBrackets
            port = String(listen[listen.index(after: colon)...])
            if !h.isEmpty, h != "0.0.0.0", h != "::", h != "localhost" { host = h.contains(":") ? "[\(h)]" : h }
        }
        return "http://\(host):\(port)/healthz"
    }
}

extension String {
    var trimmingBrackets: String { hasPrefix("[") && hasSuffix("]") ? String(dropFirst().dropLast()) : self }
}
