import Foundation
import JSON
import LatchkeyServer
import Storage
import WellKnown

/// `latchkey wellknown check|build`: prove in CI (files in a folder) and against a live deployment
/// (its URLs) that the association files are well-formed, served the way the platforms require,
/// and agree with the origin allowlist; and write the files built from the declared apps.
enum WellKnownCommand: Command {
    static let name = "wellknown"
    static let summary = "check or build apple-app-site-association, assetlinks.json, webauthn"
    static let help = """
        usage: latchkey wellknown check (--dir D | --url U) --rp-id R [--origins O[,O…]]… [--database]
               latchkey wellknown build --out D [--rp-id R] [--web-origin W]

        check   --dir D    the files apple-app-site-association, assetlinks.json, webauthn in D
                --url U    a live deployment: fetches U/.well-known/<file> without following
                           redirects; https required (http only for localhost)
                --rp-id R  the relying-party id the files must serve (the exact host)
                --origins  the origin allowlist to compare with (repeatable, comma-separated);
                --database read it from DATABASE_URL instead, and also check the files against the
                           apps declared there (latchkey apps): a declared app missing from them, or
                           an app in them that is not declared, is an error; with neither, those
                           comparisons are skipped
                Prints one line per problem with its fix. Exit 0 clean, 1 problems, 64 bad usage.
        build   writes the three files for rpId R (default LATCHKEY_RP_ID, else localhost) built from
                the apps and origins in DATABASE_URL into folder D, and passkey-endpoints (where a
                credential manager finds the pages to enrol and manage passkeys) naming web origin W
                (default the first web origin of LATCHKEY_ORIGINS, else the allowlist's first on R's
                site, else https://R): serve it at https://R/.well-known/passkey-endpoints where Latchkey is not
                that host.
        """

    static func run(_ arguments: [String]) -> Int32 {
        let args: ParsedArguments
        do {
            args = try ParsedArguments(arguments, valued: ["dir", "url", "rp-id", "origins", "out", "web-origin"], flags: ["help", "database"])
        } catch {
            printError("latchkey wellknown: \(error.message)\n\n\(help)"); return ExitCode.usage
        }
        if args.has("help") { print(help); return ExitCode.success }
        switch args.positionals.first {
        case "check": return check(args)
        case "build": return build(args)
        default: printError("latchkey wellknown: say check or build\n\n\(help)"); return ExitCode.usage
        }
    }

    // MARK: check

    static func check(_ args: ParsedArguments) -> Int32 {
        guard let rpId = args.value("rp-id"), !rpId.isEmpty else { printError("latchkey wellknown check: --rp-id is required\n\n\(help)"); return ExitCode.usage }
        let dir = args.value("dir"), url = args.value("url")
        guard (dir == nil) != (url == nil) else { printError("latchkey wellknown check: give exactly one of --dir or --url\n\n\(help)"); return ExitCode.usage }

        var origins: [String]? = nil
        var declared: [AssociatedApp]? = nil
        let listed = args.all("origins").flatMap { $0.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) } }.filter { !$0.isEmpty }
        if !listed.isEmpty { origins = listed }
        if args.has("database") {
            // Read only: the allowlist as it is, no migration.
            let status = withDatabase("latchkey wellknown check", unset: "--database needs DATABASE_URL", migrate: false) { database, _ in
                do {
                    origins = (origins ?? []) + (try database.config.origins().map(\.origin))
                    declared = AppDeclarations.apps(try database.config.apps(rpId: rpId))
                } catch {
                    printError("latchkey wellknown check: cannot read the allowlist and apps: \(error)"); return ExitCode.failure
                }
                return ExitCode.success
            }
            guard status == ExitCode.success else { return status }
        }

        var documents: [WellKnownDocument] = []
        if let dir {
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: dir, isDirectory: &isDir), isDir.boolValue else {
                printError("latchkey wellknown check: \(dir) is not a folder"); return ExitCode.usage
            }
            for name in AssociationFiles.names {
                documents.append(WellKnownDocument(name: name, body: readFile(dir + "/" + name)))
            }
        } else if let url {
            let lower = url.lowercased()
            guard lower.hasPrefix("https://") || lower.hasPrefix("http://") else {
                printError("latchkey wellknown check: --url must be https://host (http://localhost for a dev server)"); return ExitCode.usage
            }
            var base = url
            while base.hasSuffix("/") { base.removeLast() }
            for name in AssociationFiles.names {
                let target = base + "/.well-known/" + name
                do {
                    let a = try HTTPFetcher().send("GET", target)
                    documents.append(WellKnownDocument(
                        name: name, body: a.status == 404 ? nil : a.body,
                        served: .init(url: target, status: a.status, contentType: a.header("Content-Type"), location: a.header("Location"))))
                } catch {
                    print("\(name): cannot fetch \(target) (\(error)) — fix: make the deployment reachable over https at that URL")
                    return ExitCode.failure
                }
            }
        }

        let checker = AssociationChecker(rpId: rpId, origins: origins)
        let problems = checker.check(documents) + (declared.map { checker.checkDeclared(documents, apps: $0) } ?? [])
        for p in problems { print(p.description) }
        if origins == nil { printError("note: allowlist not compared (pass --origins or --database)") }
        if problems.isEmpty {
            print("ok: \(dir ?? url!) serves valid association files for rpId \(rpId)")
            return ExitCode.success
        }
        return ExitCode.failure
    }

    // MARK: build

    static func build(_ args: ParsedArguments) -> Int32 {
        guard let out = args.value("out") else { printError("latchkey wellknown build: --out D is required\n\n\(help)"); return ExitCode.usage }
        let rpId = args.value("rp-id") ?? Configuration.processEnvironment()["LATCHKEY_RP_ID"].flatMap { $0.isEmpty ? nil : $0 } ?? "localhost"
        let configured = (Configuration.processEnvironment()["LATCHKEY_ORIGINS"] ?? "").split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces) }
        let webOrigin = args.value("web-origin") ?? PasskeyEndpoints.firstWebOrigin(configured)
        return withDatabase("latchkey wellknown build") { database, _ in
            build(out: out, rpId: rpId, webOrigin: webOrigin, config: database.config)
        }
    }

    /// `webOrigin`: the web app's origin for passkey-endpoints; nil: the allowlist's first, else `https://<rpId>`.
    static func build(out: String, rpId: String, webOrigin: String? = nil, config: ConfigRepository) -> Int32 {
        do {
            let apps = AppDeclarations.apps(try config.apps(rpId: rpId))
            let origins = try config.origins().map(\.origin)
            // The allowlist's first web origin on the rpId's own site (the rpId or a host under it).
            let onSite = origins.filter { o in RelatedOrigins.host(of: o).map { $0 == rpId || $0.hasSuffix("." + rpId) } ?? false }
            let endpoints = (name: PasskeyEndpoints.name,
                             bytes: PasskeyEndpoints.bytes(webOrigin: webOrigin ?? PasskeyEndpoints.firstWebOrigin(onSite) ?? "https://\(rpId)"))
            try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
            for file in AssociationFiles.build(apps: apps, origins: origins, rpId: rpId).map({ (name: $0.name, bytes: $0.bytes) }) + [endpoints] {
                guard FileManager.default.createFile(atPath: out + "/" + file.name, contents: Data(file.bytes)) else {
                    printError("latchkey wellknown build: cannot write \(out)/\(file.name)"); return ExitCode.failure
                }
                print("wrote \(out)/\(file.name)")
            }
            return ExitCode.success
        } catch {
            printError("latchkey wellknown build: \(error)")
            return ExitCode.failure
        }
    }
}
