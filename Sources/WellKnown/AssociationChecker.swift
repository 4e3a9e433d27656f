import JSON

/// One association file as the checker sees it: its bytes (nil: absent) and, for a live
/// deployment, how it was served.
public struct WellKnownDocument: Sendable {
    public struct Served: Sendable {
        public var url: String
        public var status: Int
        public var contentType: String?
        /// `Location` of a redirect (the fetcher must not follow redirects).
        public var location: String?
        public init(url: String, status: Int, contentType: String?, location: String? = nil) {
            self.url = url
            self.status = status
            self.contentType = contentType
            self.location = location
        }
    }

    public var name: String
    public var body: [UInt8]?
    public var served: Served?

    public init(name: String, body: [UInt8]?, served: Served? = nil) {
        self.name = name
        self.body = body
        self.served = served
    }
}

/// One problem, printed as one line naming the file, what is wrong and the fix.
public struct AssociationProblem: Sendable, Hashable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let notHTTPS = Code("not_https")
        public static let hostIsSubdomain = Code("host_is_subdomain")
        public static let hostMismatch = Code("host_mismatch")
        public static let redirect = Code("redirect")
        public static let httpStatus = Code("http_status")
        public static let missingFile = Code("missing_file")
        public static let wrongContentType = Code("wrong_content_type")
        public static let emptyFile = Code("empty_file")
        public static let invalidJSON = Code("invalid_json")
        public static let aasaShape = Code("aasa_no_webcredentials")
        public static let appIDWithoutTeam = Code("appid_without_team")
        public static let assetLinksShape = Code("assetlinks_shape")
        public static let missingRelation = Code("missing_relation")
        public static let malformedFingerprint = Code("malformed_fingerprint")
        public static let fingerprintNotAllowlisted = Code("fingerprint_not_allowlisted")
        public static let originWithoutApp = Code("origin_without_app")
        public static let iosOriginNotAllowlisted = Code("ios_origin_not_allowlisted")
        public static let relatedOriginsShape = Code("related_origins_shape")
        public static let relatedOriginInvalid = Code("related_origin_invalid")
        public static let tooManyLabels = Code("related_origins_labels")
    }

    public let code: Code
    public let file: String
    public let message: String
    public let fix: String

    public var description: String { "\(file): \(message) — fix: \(fix)" }
}

/// What `latchkey wellknown check` verifies (issue: native-app association, point 3), as a pure
/// function of the documents, the rpId and (optionally) the origin allowlist. Platform rules from
/// seed 002: the files must sit on the rpId's own host, over HTTPS, 200, `application/json`, no
/// redirect; subdomains inherit nothing.
public struct AssociationChecker: Sendable {
    public var rpId: String
    /// The allowlist to cross-check `assetlinks.json` and the AASA against; nil skips those checks.
    public var origins: [String]?

    public init(rpId: String, origins: [String]? = nil) {
        self.rpId = rpId.lowercased()
        self.origins = origins
    }

    static let required: Set<String> = [AssociationFiles.appleAppSiteAssociation, AssociationFiles.assetLinks]

    public func check(_ documents: [WellKnownDocument]) -> [AssociationProblem] {
        var problems: [AssociationProblem] = []
        func report(_ code: AssociationProblem.Code, _ file: String, _ message: String, _ fix: String) {
            problems.append(AssociationProblem(code: code, file: file, message: message, fix: fix))
        }
        var assetLinkFingerprints: [SigningCertificateFingerprint] = []
        var assetLinksParsed = false
        var iosApps: [String] = []

        if let served = documents.compactMap(\.served).first { checkHost(served.url, report) }

        for doc in documents {
            let name = doc.name
            if let s = doc.served {
                if (300...399).contains(s.status) {
                    report(.redirect, name, "\(s.url) answers \(s.status) redirecting to \(s.location ?? "?"); Apple and Google do not follow redirects",
                           "serve the file itself with status 200 at exactly this URL (no http→https, apex→www or trailing-slash redirect)")
                    continue
                }
                if s.status == 404 || doc.body == nil {
                    if Self.required.contains(name) {
                        report(.missingFile, name, "\(s.url) answers \(s.status)", "publish the file at /.well-known/\(name) (latchkey wellknown build)")
                    }
                    continue
                }
                if s.status != 200 {
                    report(.httpStatus, name, "\(s.url) answers \(s.status), not 200", "serve the file with status 200 without authentication")
                    continue
                }
                let media = s.contentType?.split(separator: ";").first.map { String($0).trimmingSpaces.lowercased() }
                if media != "application/json" {
                    report(.wrongContentType, name, "Content-Type is '\(s.contentType ?? "none")', not application/json",
                           "configure the web server to send Content-Type: application/json for /.well-known/\(name)")
                }
            }
            guard let body = doc.body else {
                if Self.required.contains(name) {
                    report(.missingFile, name, "the file is missing", "create it (latchkey wellknown build --out DIR) and publish it at /.well-known/\(name)")
                }
                continue
            }
            if body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
                report(.emptyFile, name, "the file is empty", "write the JSON document into it (latchkey wellknown build)")
                continue
            }
            let json: JSONValue
            do {
                json = try JSONParser.parse(body)
            } catch {
                report(.invalidJSON, name, "not valid JSON (\(error.reason) at byte \(error.offset))",
                       "fix the syntax; platforms ignore a file that does not parse (regenerate with latchkey wellknown build)")
                continue
            }
            switch name {
            case AssociationFiles.appleAppSiteAssociation:
                iosApps = checkAASA(json, report)
            case AssociationFiles.assetLinks:
                if let fps = checkAssetLinks(json, report) {
                    assetLinkFingerprints = fps
                    assetLinksParsed = true
                }
            case AssociationFiles.webauthn:
                checkRelatedOrigins(json, report)
            default:
                break
            }
        }

        // The allowlist and the files say the same thing (issue point 3, "and vice versa").
        if let origins {
            let allowed = Set(origins)
            var listed = Set<String>()
            for fp in assetLinkFingerprints {
                listed.insert(fp.origin)
                if !allowed.contains(fp.origin) {
                    report(.fingerprintNotAllowlisted, AssociationFiles.assetLinks,
                           "fingerprint \(fp.keytool) is not allowlisted, so the server refuses that app's credentials (origin \(fp.origin))",
                           "declare the app (latchkey apps add android --package … --fingerprint \(fp.keytool)) or run latchkey origins add \(fp.origin)")
                }
            }
            if assetLinksParsed {
                for origin in origins.sorted() where !listed.contains(origin) {
                    guard let fp = SigningCertificateFingerprint(origin: origin) else { continue }
                    report(.originWithoutApp, AssociationFiles.assetLinks,
                           "allowlisted origin \(origin) (fingerprint \(fp.keytool)) has no app in assetlinks.json, so Android will not offer passkeys to it",
                           "add the app with that fingerprint to assetlinks.json (latchkey apps add android …), or remove the origin (latchkey origins remove \(origin))")
                }
            }
            let iosOrigin = "https://" + rpId
            if !iosApps.isEmpty && !allowed.contains(iosOrigin) {
                report(.iosOriginNotAllowlisted, AssociationFiles.appleAppSiteAssociation,
                       "iOS apps \(iosApps.joined(separator: ", ")) report origin \(iosOrigin), which is not allowlisted",
                       "run latchkey origins add \(iosOrigin) (latchkey apps add ios does it for you)")
            }
        }
        return problems
    }

    // MARK: Where the files are served

    func checkHost(_ url: String, _ report: (AssociationProblem.Code, String, String, String) -> Void) {
        let lower = url.lowercased()
        let scheme = lower.hasPrefix("https://") ? "https" : lower.hasPrefix("http://") ? "http" : ""
        let afterScheme = lower.drop { $0 != "/" }.drop { $0 == "/" }
        let authority = afterScheme.prefix { $0 != "/" }
        guard let host = RelatedOrigins.host(of: "x://" + authority) else { return }
        // `localhost` may be checked over plain http (the dev server).
        if scheme != "https" && !(scheme == "http" && (host == "localhost" || host == "127.0.0.1")) {
            report(.notHTTPS, "\(authority)", "the files are fetched over \(scheme.isEmpty ? "an unknown scheme" : scheme); platforms only fetch https",
                   "serve https://\(authority)/.well-known/… with a publicly trusted certificate")
        }
        if host == rpId { return }
        if host.hasSuffix("." + rpId) {
            report(.hostIsSubdomain, "\(authority)",
                   "the files are on \(host) but the rpId is \(rpId); subdomains inherit nothing, platforms fetch https://\(rpId)/.well-known/…",
                   "serve the files on \(rpId) itself (or make the rpId \(host))")
        } else if host != "127.0.0.1" || rpId != "localhost" {
            report(.hostMismatch, "\(authority)", "the files are on \(host) but the rpId is \(rpId); platforms only read https://\(rpId)/.well-known/…",
                   "check --url https://\(rpId) or correct LATCHKEY_RP_ID")
        }
    }

    // MARK: apple-app-site-association

    func checkAASA(_ json: JSONValue, _ report: (AssociationProblem.Code, String, String, String) -> Void) -> [String] {
        let file = AssociationFiles.appleAppSiteAssociation
        guard let apps = json["webcredentials"]?["apps"]?.arrayValue else {
            report(.aasaShape, file, "no webcredentials.apps array, so iOS will not offer passkeys for \(rpId) in any app",
                   #"add {"webcredentials":{"apps":["TEAMID.bundle.id"]}} (latchkey apps add ios --team-id … --bundle-id …)"#)
            return []
        }
        var good: [String] = []
        for entry in apps {
            guard let id = entry.stringValue else {
                report(.aasaShape, file, "webcredentials.apps holds a non-string entry", "list appIDs as strings: \"TEAMID.bundle.id\"")
                continue
            }
            do {
                _ = try IOSApp(appID: id)
                good.append(id)
            } catch {
                report(.appIDWithoutTeam, file, "appID '\(id.prefix(120))' is not TEAMID.bundle.id (\(error.reason))",
                       "prefix the bundle id with the 10-character Team ID, e.g. ABCDE12345.\(id.split(separator: ".").count > 1 ? String(id.prefix(80)) : "com.example.app")")
            }
        }
        return good
    }

    // MARK: assetlinks.json

    /// The fingerprints of every statement that grants `get_login_creds` to an Android app, or nil
    /// when the file's shape is wrong.
    func checkAssetLinks(_ json: JSONValue, _ report: (AssociationProblem.Code, String, String, String) -> Void) -> [SigningCertificateFingerprint]? {
        let file = AssociationFiles.assetLinks
        guard let statements = json.arrayValue else {
            report(.assetLinksShape, file, "the top level is not a JSON array of statements", #"write [{"relation":[…],"target":{…}}, …]"#)
            return nil
        }
        var out: [SigningCertificateFingerprint] = []
        for (i, statement) in statements.enumerated() {
            guard let target = statement["target"], target["namespace"]?.stringValue == "android_app" else { continue }
            let package = target["package_name"]?.stringValue ?? "statement \(i)"
            let relations = statement["relation"]?.arrayValue?.compactMap(\.stringValue) ?? []
            let grantsLogin = relations.contains(AssociationFiles.getLoginCreds)
            if !grantsLogin {
                report(.missingRelation, file, "\(package) lacks the relation \(AssociationFiles.getLoginCreds), so Credential Manager will not use passkeys for \(rpId) in it",
                       "add \"\(AssociationFiles.getLoginCreds)\" to that statement's relation array")
            }
            if target["package_name"]?.stringValue == nil {
                report(.assetLinksShape, file, "statement \(i) has no target.package_name", "set package_name to the app's applicationId")
            }
            guard let fps = target["sha256_cert_fingerprints"]?.arrayValue, !fps.isEmpty else {
                report(.assetLinksShape, file, "\(package) lists no sha256_cert_fingerprints",
                       "add every signing key's SHA-256 (upload key and Play app-signing key), as keytool -list -v prints it")
                continue
            }
            for value in fps {
                let text = value.stringValue ?? "\(value.text)"
                if let fp = Self.assetLinksFingerprint(text) {
                    if grantsLogin { out.append(fp) }
                } else {
                    report(.malformedFingerprint, file, "\(package): fingerprint '\(text.prefix(120))' is not 32 colon-separated hex bytes",
                           "copy the SHA-256 line from keytool -list -v or the Play Console (AB:CD:…:EF, 32 bytes); latchkey apk-key-hash checks one")
                }
            }
        }
        return out
    }

    /// assetlinks.json takes the keytool form only: 32 colon-separated hex pairs.
    static func assetLinksFingerprint(_ text: String) -> SigningCertificateFingerprint? {
        guard text.contains(":") else { return nil }
        return try? SigningCertificateFingerprint(parsing: text)
    }

    // MARK: webauthn (related origins)

    func checkRelatedOrigins(_ json: JSONValue, _ report: (AssociationProblem.Code, String, String, String) -> Void) {
        let file = AssociationFiles.webauthn
        guard let list = json["origins"]?.arrayValue else {
            report(.relatedOriginsShape, file, "no origins array (WebAuthn L3 §5.11 expects {\"origins\":[…]})",
                   #"write {"origins":["https://other.example"]} (latchkey wellknown build)"#)
            return
        }
        var valid: [String] = []
        for entry in list {
            guard let o = entry.stringValue, o.lowercased().hasPrefix("https://"), RelatedOrigins.host(of: o) != nil else {
                report(.relatedOriginInvalid, file, "'\((entry.stringValue ?? entry.text).prefix(120))' is not an https://host[:port] origin",
                       "list origins as https://host[:port] without path")
                continue
            }
            valid.append(o)
        }
        let labels = RelatedOrigins.labels(valid)
        if labels.count > RelatedOrigins.maxLabels {
            report(.tooManyLabels, file,
                   "\(labels.count) distinct labels (\(labels.joined(separator: ", "))); clients only honour the first \(RelatedOrigins.maxLabels)",
                   "keep at most \(RelatedOrigins.maxLabels) registrable-domain labels; origins beyond them will fail")
        }
    }
}

extension String {
    var trimmingSpaces: String {
        String(drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }
}
