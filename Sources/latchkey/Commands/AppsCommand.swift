import JSON
import LatchkeyServer
import Storage
import WellKnown

/// `latchkey apps list|add|remove`: associated native apps, straight in PostgreSQL (DATABASE_URL)
/// or through a running server's admin API (`--server URL`, key in LATCHKEY_ADMIN_KEY). Adding an
/// app allowlists the origins it needs; removing it drops them; both are audited.
enum AppsCommand: Command {
    static let name = "apps"
    static let summary = "list, add or remove associated iOS/Android apps (DATABASE_URL or --server)"
    static let help = """
        usage: latchkey apps list
               latchkey apps add ios --team-id ABCDE12345 --bundle-id com.example.app   (or --app-id ABCDE12345.com.example.app)
               latchkey apps add android --package com.example.app --fingerprint AB:CD:…:EF [--fingerprint …] [--handle-all-urls]
               latchkey apps remove ios:ABCDE12345.com.example.app | android:com.example.app

        options:
          --rp-id R       the relying party the apps belong to (default LATCHKEY_RP_ID, else localhost)
          --server URL    use a running server's /admin/v1/apps (bearer key from LATCHKEY_ADMIN_KEY)
                          instead of DATABASE_URL

        Fingerprints: the SHA-256 of each signing certificate (upload key, Play app signing key),
        as keytool prints it (AB:CD:…), as 64 hex digits, or as the base64url hash.
        Exit 0 done, 1 refused or failed, 64 bad usage.
        """

    static func run(_ arguments: [String]) -> Int32 {
        let env = Configuration.processEnvironment()
        let args: ParsedArguments
        do {
            args = try ParsedArguments(arguments, valued: ["team-id", "bundle-id", "app-id", "package", "fingerprint", "rp-id", "server"],
                                       flags: ["help", "handle-all-urls"])
        } catch {
            printError("latchkey apps: \(error.message)\n\n\(help)"); return ExitCode.usage
        }
        if args.has("help") { print(help); return ExitCode.success }
        guard let verb = args.positionals.first else { printError("latchkey apps: say list, add or remove\n\n\(help)"); return ExitCode.usage }

        var body: JSONValue? = nil
        var removeId: String? = nil
        switch verb {
        case "list": break
        case "add":
            switch args.positionals.dropFirst().first {
            case "ios":
                if let appId = args.value("app-id") { body = .object([("platform", "ios"), ("appId", .string(appId))]) }
                else if let team = args.value("team-id"), let bundle = args.value("bundle-id") {
                    body = .object([("platform", "ios"), ("teamId", .string(team)), ("bundleId", .string(bundle))])
                } else { printError("latchkey apps add ios: needs --team-id and --bundle-id (or --app-id)"); return ExitCode.usage }
            case "android":
                guard let package = args.value("package"), !args.all("fingerprint").isEmpty else {
                    printError("latchkey apps add android: needs --package and at least one --fingerprint"); return ExitCode.usage
                }
                body = .object([("platform", "android"), ("packageName", .string(package)),
                                ("fingerprints", .array(args.all("fingerprint").map { .string($0) })),
                                ("handleAllUrls", .bool(args.has("handle-all-urls")))])
            default:
                printError("latchkey apps add: say ios or android\n\n\(help)"); return ExitCode.usage
            }
        case "remove":
            guard let id = args.positionals.dropFirst().first else { printError("latchkey apps remove: needs an app id"); return ExitCode.usage }
            removeId = id
        default:
            printError("latchkey apps: unknown verb \(verb)\n\n\(help)"); return ExitCode.usage
        }

        if let server = args.value("server") {
            return viaServer(server, verb: verb, body: body, removeId: removeId, key: env["LATCHKEY_ADMIN_KEY"] ?? "")
        }
        let configuration: Configuration
        do { configuration = try Configuration.site(env, rpId: args.value("rp-id")) } catch {
            printError("latchkey apps: \(error.description)"); return ExitCode.usage
        }
        return withDatabase("latchkey apps", unset: "DATABASE_URL is not set (or use --server URL)") { database, _ in
            viaDatabase(verb, body: body, removeId: removeId, service: AdminService(database: database, configuration: configuration))
        }
    }

    static func viaDatabase(_ verb: String, body: JSONValue?, removeId: String?, service: AdminService) -> Int32 {
        do throws(ServiceError) {
            switch verb {
            case "list":
                for app in try service.listApps() { print(AppRenderer.app(app).text) }
            case "add":
                let (app, created) = try service.putApp(body!, by: .named("cli"))
                print((created ? "added " : "updated ") + AppRenderer.app(app).text)
            default:
                try service.removeApp(removeId!, by: .named("cli"))
                print("removed \(removeId!)")
            }
            return ExitCode.success
        } catch {
            printError("latchkey apps: \(error.detail)")
            return error.code == .invalidRequest ? ExitCode.usage : ExitCode.failure
        }
    }

    static func viaServer(_ base: String, verb: String, body: JSONValue?, removeId: String?, key: String) -> Int32 {
        guard !key.isEmpty else { printError("latchkey apps --server: LATCHKEY_ADMIN_KEY is not set"); return ExitCode.usage }
        let root = base.hasSuffix("/") ? String(base.dropLast()) : base
        let auth = ["Authorization": "Bearer " + key, "Content-Type": "application/json"]
        do {
            let answer: HTTPFetcher.Answer
            switch verb {
            case "list": answer = try HTTPFetcher().send("GET", root + "/admin/v1/apps", headers: auth)
            case "add": answer = try HTTPFetcher().send("POST", root + "/admin/v1/apps", headers: auth, body: body!.serialized())
            default:
                let encoded = removeId!.addingPercentEncodingForPath()
                answer = try HTTPFetcher().send("DELETE", root + "/admin/v1/apps/" + encoded, headers: auth)
            }
            let text = String(decoding: answer.body, as: UTF8.self)
            guard (200...299).contains(answer.status) else {
                printError("latchkey apps: \(answer.status) \(((try? JSONParser.parse(answer.body))?["detail"]?.stringValue) ?? text)")
                return answer.status == 400 ? ExitCode.usage : ExitCode.failure
            }
            if verb == "list" {
                for app in (try? JSONParser.parse(answer.body))?["apps"]?.arrayValue ?? [] { print(app.text) }
            } else {
                print(verb == "remove" ? "removed \(removeId!)" : ((answer.status == 201 ? "added " : "updated ") + text))
            }
            return ExitCode.success
        } catch {
            printError("latchkey apps: \(error)"); return ExitCode.failure
        }
    }
}

extension String {
    /// Percent-encodes everything but unreserved characters (RFC 3986 §2.3).
    func addingPercentEncodingForPath() -> String {
        var out = ""
        for b in utf8 {
            if (0x30...0x39).contains(b) || (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b) || [0x2D, 0x2E, 0x5F, 0x7E].contains(b) {
                out.append(Character(UnicodeScalar(b)))
            } else {
                out += "%" + (b < 16 ? "0" : "") + String(b, radix: 16, uppercase: true)
            }
        }
        return out
    }
}
