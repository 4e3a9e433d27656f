import JSON

extension AssociationProblem.Code {
    /// A declared app (`latchkey apps add`) that the served or pinned files do not name.
    public static let declaredAppMissing = AssociationProblem.Code("declared_app_missing")
    /// An app in the files that is not declared (the example team or package left in a pinned folder).
    public static let undeclaredApp = AssociationProblem.Code("undeclared_app")
}

extension AssociationChecker {
    /// The files against the declared apps: every declared iOS appID in the AASA's
    /// `webcredentials.apps`, every declared Android package with each of its fingerprints in
    /// `assetlinks.json` — and nothing in them that is not declared. What `serve` warns about at
    /// start-up for a pinned `LATCHKEY_WELLKNOWN_DIR`, and `wellknown check --database` reports.
    /// Files that do not parse are the other checks' business (reported there); here they count as empty.
    public func checkDeclared(_ documents: [WellKnownDocument], apps: [AssociatedApp]) -> [AssociationProblem] {
        func json(_ name: String) -> JSONValue? {
            documents.first { $0.name == name }?.body.flatMap { try? JSONParser.parse($0) }
        }
        let served = Set(json(AssociationFiles.appleAppSiteAssociation)?["webcredentials"]?["apps"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        var packages: [String: Set<SigningCertificateFingerprint>] = [:]
        for statement in json(AssociationFiles.assetLinks)?.arrayValue ?? [] {
            guard let target = statement["target"], target["namespace"]?.stringValue == "android_app",
                  let package = target["package_name"]?.stringValue else { continue }
            let fps = (target["sha256_cert_fingerprints"]?.arrayValue ?? []).compactMap(\.stringValue).compactMap(Self.assetLinksFingerprint)
            packages[package, default: []].formUnion(fps)
        }

        var problems: [AssociationProblem] = []
        let rebuild = "rebuild the files from the declarations (latchkey wellknown build --out DIR), or unset LATCHKEY_WELLKNOWN_DIR so the server serves them built"
        var declaredIOS = Set<String>(), declaredAndroid = Set<String>()
        for app in apps {
            switch app {
            case .ios(let a):
                declaredIOS.insert(a.appID)
                if !served.contains(a.appID) {
                    problems.append(AssociationProblem(code: .declaredAppMissing, file: AssociationFiles.appleAppSiteAssociation,
                                                       message: "the declared app \(a.appID) is not in webcredentials.apps, so iOS will not offer its passkeys",
                                                       fix: rebuild))
                }
            case .android(let a):
                declaredAndroid.insert(a.packageName)
                let have = packages[a.packageName] ?? []
                for fp in a.fingerprints where !have.contains(fp) {
                    problems.append(AssociationProblem(code: .declaredAppMissing, file: AssociationFiles.assetLinks,
                                                       message: "the declared app \(a.packageName) with fingerprint \(fp.keytool) is not in assetlinks.json",
                                                       fix: rebuild))
                }
            }
        }
        for id in served.sorted() where !declaredIOS.contains(id) {
            problems.append(AssociationProblem(code: .undeclaredApp, file: AssociationFiles.appleAppSiteAssociation,
                                               message: "\(id) is in webcredentials.apps but not declared (an example left in place?)",
                                               fix: "declare it (latchkey apps add ios --team-id … --bundle-id …) or \(rebuild)"))
        }
        for package in packages.keys.sorted() where !declaredAndroid.contains(package) {
            problems.append(AssociationProblem(code: .undeclaredApp, file: AssociationFiles.assetLinks,
                                               message: "\(package) is in assetlinks.json but not declared (an example left in place?)",
                                               fix: "declare it (latchkey apps add android --package … --fingerprint …) or \(rebuild)"))
        }
        return problems
    }
}
