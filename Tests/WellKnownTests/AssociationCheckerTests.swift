import JSON
import Testing
import WellKnown

/// Issue point 4: a table of broken files, each detected with its own message (and a fix).
struct AssociationCheckerTests {
    static let rpId = "example.com"
    static let fp = try! SigningCertificateFingerprint(parsing: "14:6D:E9:83:C5:73:06:50:D8:EE:B9:95:2F:34:FC:64:16:A0:83:42:E6:1D:BE:A8:8A:04:96:B2:3F:CF:44:E5")
    static let other = try! SigningCertificateFingerprint(bytes: [UInt8](repeating: 7, count: 32))

    /// A deployment that passes: served on the rpId over https, both apps allowlisted.
    struct Scenario: Sendable {
        var host = "https://example.com"
        var aasa = #"{"webcredentials":{"apps":["ABCDE12345.com.example.app"]}}"#
        var assetlinks = """
            [{"relation":["delegate_permission/common.get_login_creds"],"target":{"namespace":"android_app",
              "package_name":"com.example.app","sha256_cert_fingerprints":["\(AssociationCheckerTests.fp.keytool)"]}}]
            """
        var webauthn = #"{"origins":["https://example.co.uk"]}"#
        var status: [String: Int] = [:]
        var contentType: [String: String] = [:]
        var origins = ["https://example.com", AssociationCheckerTests.fp.origin]

        func documents() -> [WellKnownDocument] {
            [(AssociationFiles.appleAppSiteAssociation, aasa), (AssociationFiles.assetLinks, assetlinks),
             (AssociationFiles.webauthn, webauthn)].map { name, body in
                let url = host + "/.well-known/" + name
                let st = status[name] ?? 200
                return WellKnownDocument(name: name, body: Array(body.utf8),
                                         served: .init(url: url, status: st, contentType: contentType[name] ?? "application/json",
                                                       location: (300...399).contains(st) ? "https://www.example.com/.well-known/\(name)" : nil))
            }
        }

        func problems() -> [AssociationProblem] { AssociationChecker(rpId: rpId, origins: origins).check(documents()) }
    }

    struct Broken: Sendable, CustomTestStringConvertible {
        let name: String
        let expected: AssociationProblem.Code
        /// Problems that follow from the same break (a statement the checker cannot use leaves its
        /// allowlisted origin without an app).
        var consequences: [AssociationProblem.Code] = []
        let change: @Sendable (inout Scenario) -> Void
        var testDescription: String { name }
    }

    static let broken: [Broken] = [
        Broken(name: "wrong content type", expected: .wrongContentType) { $0.contentType[AssociationFiles.assetLinks] = "text/html" },
        Broken(name: "redirect", expected: .redirect) { $0.status[AssociationFiles.appleAppSiteAssociation] = 301 },
        Broken(name: "missing relation", expected: .missingRelation, consequences: [.originWithoutApp]) {
            $0.assetlinks = $0.assetlinks.replacingOccurrences("get_login_creds", "handle_all_urls")
        },
        Broken(name: "malformed fingerprint", expected: .malformedFingerprint, consequences: [.originWithoutApp]) {
            $0.assetlinks = $0.assetlinks.replacingOccurrences(fp.keytool, "14:6D:E9:83")
        },
        Broken(name: "appID without team", expected: .appIDWithoutTeam) {
            $0.aasa = #"{"webcredentials":{"apps":["com.example.app"]}}"#
        },
        Broken(name: "subdomain host", expected: .hostIsSubdomain) { $0.host = "https://www.example.com" },
        Broken(name: "fingerprint not allowlisted", expected: .fingerprintNotAllowlisted) { $0.origins = ["https://example.com"] },
        Broken(name: "allowlisted origin with no app", expected: .originWithoutApp) { $0.origins.append(other.origin) },
        Broken(name: "invalid JSON", expected: .invalidJSON) { $0.assetlinks = #"[{"relation": ["#},
        Broken(name: "empty file", expected: .emptyFile) { $0.aasa = "" },
        Broken(name: "plain http on a public host", expected: .notHTTPS) { $0.host = "http://example.com" },
        Broken(name: "another host", expected: .hostMismatch) { $0.host = "https://example.org" },
        Broken(name: "iOS origin not allowlisted", expected: .iosOriginNotAllowlisted) { $0.origins = [fp.origin] },
        Broken(name: "too many related-origin labels", expected: .tooManyLabels) {
            $0.webauthn = #"{"origins":["https://a.com","https://b.com","https://c.co.uk","https://d.de","https://e.fr","https://f.io"]}"#
        },
        Broken(name: "missing file", expected: .missingFile) { $0.status[AssociationFiles.assetLinks] = 404 },
    ]

    @Test func theValidScenarioPasses() {
        #expect(Scenario().problems().map(\.description) == [])
    }

    @Test(arguments: broken)
    func eachBrokenFileIsDetected(_ broken: Broken) {
        var s = Scenario()
        broken.change(&s)
        var problems = s.problems()
        if broken.expected == .missingFile { problems = problems.filter { $0.code == .missingFile } }
        #expect(problems.map(\.code) == [broken.expected] + broken.consequences, "\(problems.map(\.description))")
        for p in problems {
            #expect(!p.fix.isEmpty)
            #expect(!p.description.contains("\n"), "one line per problem")
        }
    }

    @Test func everyMessageIsDistinct() {
        let lines = Self.broken.map { b -> String in
            var s = Scenario()
            b.change(&s)
            return s.problems().map(\.message).joined(separator: "|")
        }
        #expect(Set(lines).count == lines.count)
    }

    @Test func directoryModeHasNoTransportChecks() {
        let docs = [WellKnownDocument(name: AssociationFiles.appleAppSiteAssociation, body: Array(Scenario().aasa.utf8)),
                    WellKnownDocument(name: AssociationFiles.assetLinks, body: nil)]
        #expect(AssociationChecker(rpId: Self.rpId).check(docs).map(\.code) == [.missingFile])
    }

    @Test func localhostMayUseHTTP() {
        var s = Scenario()
        s.host = "http://localhost:8080"
        s.origins = ["https://localhost", Self.fp.origin]
        #expect(AssociationChecker(rpId: "localhost", origins: s.origins).check(s.documents()).map(\.description) == [])
    }
}

struct FingerprintAndBuilderTests {
    static let keytool = "14:6D:E9:83:C5:73:06:50:D8:EE:B9:95:2F:34:FC:64:16:A0:83:42:E6:1D:BE:A8:8A:04:96:B2:3F:CF:44:E5"

    @Test(arguments: [keytool, keytool.lowercased(), keytool.replacingOccurrences(":", ""), "FG3pg8VzBlDY7rmVLzT8ZBagg0LmHb6oigSWsj_PROU",
                      "android:apk-key-hash:FG3pg8VzBlDY7rmVLzT8ZBagg0LmHb6oigSWsj_PROU"])
    func everyAcceptedFormGivesTheSameOrigin(_ input: String) throws {
        let fp = try SigningCertificateFingerprint(parsing: input)
        #expect(fp.keytool == Self.keytool)
        #expect(fp.origin == "android:apk-key-hash:FG3pg8VzBlDY7rmVLzT8ZBagg0LmHb6oigSWsj_PROU")
    }

    @Test(arguments: ["", "AB:CD", String(Self.keytool.dropLast(3)), Self.keytool + ":00", "zz" + String(repeating: "0", count: 62),
                      "FG3pg8VzBlDY7rmVLzT8ZBagg0LmHb6oigSWsj+PROU"])
    func malformedFingerprintsAreRefusedNamingTheForm(_ input: String) {
        #expect(throws: WellKnownError.self) { try SigningCertificateFingerprint(parsing: input) }
        do { _ = try SigningCertificateFingerprint(parsing: input) } catch { #expect(error.reason.contains("keytool")) }
    }

    @Test func filesFollowTheApps() throws {
        let apps: [AssociatedApp] = [
            .ios(try IOSApp(teamId: "ABCDE12345", bundleId: "com.example.app")),
            .android(try AndroidApp(packageName: "com.example.app", fingerprints: [try SigningCertificateFingerprint(parsing: Self.keytool)],
                                    handleAllURLs: true)),
        ]
        let files = Dictionary(uniqueKeysWithValues: AssociationFiles.build(apps: apps, origins: ["https://example.com", "https://shop.example.co.uk"],
                                                                           rpId: "example.com").map { ($0.name, $0.bytes) })
        let aasa = try JSONParser.parse(try #require(files[AssociationFiles.appleAppSiteAssociation]))
        #expect(aasa["webcredentials"]?["apps"] == .array(["ABCDE12345.com.example.app"]))
        let links = try JSONParser.parse(try #require(files[AssociationFiles.assetLinks]))
        #expect(links.arrayValue?.first?["relation"] == .array([.string(AssociationFiles.getLoginCreds), .string(AssociationFiles.handleAllURLs)]))
        #expect(links.arrayValue?.first?["target"]?["sha256_cert_fingerprints"] == .array([.string(Self.keytool)]))
        let related = try JSONParser.parse(try #require(files[AssociationFiles.webauthn]))
        #expect(related["origins"] == .array(["https://shop.example.co.uk"]))
        #expect(RelatedOrigins.labels(["https://a.example.co.uk", "https://b.example.com", "https://x.org"]) == ["example", "x"])
    }
}

extension String {
    func replacingOccurrences(_ a: String, _ b: String) -> String {
        var out = "", rest = Substring(self)
        while let r = rest.firstRange(of: a) { out += rest[..<r.lowerBound] + b; rest = rest[r.upperBound...] }
        return out + rest
    }
}
