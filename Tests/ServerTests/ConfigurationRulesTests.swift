import Foundation
import LatchkeyServer
import Testing

/// SPEC "Rules that must hold" ("Outside dev mode") and "Configuration": every configuration mistake
/// is refused before the first socket or connection, naming the setting, the value and the fix —
/// the rpId (a host name, not a public suffix), the origins it can carry, booleans, the issuer, the
/// console's origin, the admin key (issue 33, points 4, 5, 7 and 9).
@Suite("Configuration rules")
struct ConfigurationRulesTests {
    static func refusal(_ env: [String: String]) -> String? {
        do { _ = try Configuration.fromEnvironment(env); return nil } catch { return error.description }
    }

    /// A production environment that starts (as far as the environment decides).
    static let production = ["LATCHKEY_RP_ID": "example.com", "LATCHKEY_ORIGINS": "https://example.com"]

    @Test("the Public Suffix List: rules, wildcards, exceptions and IDN rules, from Debian's publicsuffix package")
    func publicSuffixList() throws {
        let list = try #require(PublicSuffixList.system, "install Debian's publicsuffix package (scripts/install-deps.sh)")
        #expect(list.ruleCount > 5000)
        for suffix in ["com", "co.uk", "github.io", "foo.ck", "anything.kawasaki.jp", "xn--55qx5d.cn", "test"] {
            #expect(list.isPublicSuffix(suffix), "\(suffix)")
        }
        for host in ["example.com", "example.co.uk", "www.ck", "city.kawasaki.jp", "shop.xn--55qx5d.cn", "me.github.io"] {
            #expect(!list.isPublicSuffix(host), "\(host)")
        }
        #expect(list.registrableDomain(of: "a.b.example.co.uk") == "example.co.uk")
        #expect(list.registrableDomain(of: "co.uk") == nil)
        #expect(list.publicSuffix(of: "www.ck") == "ck")  // !www.ck
        let small = PublicSuffixList(text: "// comment\nuk\nco.uk\n*.kobe.jp\n!city.kobe.jp\n")
        #expect(small.publicSuffix(of: "x.y.kobe.jp") == "y.kobe.jp")
        #expect(small.publicSuffix(of: "www.city.kobe.jp") == "kobe.jp")
        #expect(small.publicSuffix(of: "shop.example") == "example")  // the implicit rule *
    }

    @Test("LATCHKEY_RP_ID is a host name: no scheme, port, path or trailing dot, no IP, no public suffix", arguments: [
        "https://example.com", "example.com:443", "localhost:19300", "192.0.2.1", "2130706433", "[::1]", "::1", "co.uk", "com",
        "example.com.", "example.com/login", "Example.com", "exa mple.com", "-example.com", "github.io",
    ])
    func rpIdRefused(rpId: String) throws {
        let refusal = try #require(Self.refusal(["LATCHKEY_RP_ID": rpId, "LATCHKEY_DEV": "1"]), "\(rpId) was accepted")
        #expect(refusal.hasPrefix("LATCHKEY_RP_ID=\(rpId.prefix(80))"), "names the setting and the value: \(refusal)")
        #expect(refusal.contains(": "), "and the fix: \(refusal)")
    }

    @Test("accepted rpIds", arguments: ["localhost", "app.localhost", "example.com", "login.example.co.uk", "xn--bcher-kva.example", "me.github.io"])
    func rpIdAccepted(rpId: String) throws {
        #expect(Self.refusal(["LATCHKEY_RP_ID": rpId, "LATCHKEY_DEV": "1", "LATCHKEY_ORIGINS": ""]) == nil)
    }

    @Test("a web origin's host is the rpId or under it, or can be a related origin; android origins are exempt")
    func originsUnderTheRpId() throws {
        let fine = "https://example.com,https://www.example.com:8443,https://example.org,android:apk-key-hash:xT5ZucZJ9N7oq3j3awG8J8pjl3bDJJ1tIJe6Wd6QRYY"
        #expect(Self.refusal(["LATCHKEY_RP_ID": "example.com", "LATCHKEY_ORIGINS": fine]) == nil)
        for (rpId, origin) in [("example.com", "http://localhost:8080"), ("example.com", "https://192.0.2.1"), ("example.com", "https://co.uk"),
                               ("localhost", "https://example.com"), ("app.example.com", "http://localhost:9090")] {
            let refusal = try #require(Self.refusal(["LATCHKEY_RP_ID": rpId, "LATCHKEY_DEV": "1", "LATCHKEY_ORIGINS": origin]), "\(rpId) \(origin)")
            #expect(refusal.hasPrefix("LATCHKEY_ORIGINS: \(origin) can never work for rpId \(rpId)"), "\(refusal)")
        }
        #expect(Configuration.originReachProblem("https://shop.example.com", rpId: "example.com") == nil)
        #expect(Configuration.originReachProblem("android:apk-key-hash:xT5ZucZJ9N7oq3j3awG8J8pjl3bDJJ1tIJe6Wd6QRYY", rpId: "localhost") == nil)
    }

    @Test("booleans: 1/0, true/false, yes/no, on/off in any case; anything else refused, never read as off")
    func booleans() throws {
        for yes in ["1", "true", "TRUE", "Yes", "on", " On "] {
            let c = try Configuration.fromEnvironment(["LATCHKEY_DEV": yes, "LATCHKEY_EMAIL_SIGN_IN": yes, "LATCHKEY_TRUST_PROXY": yes,
                                                       "LATCHKEY_APP_ATTEST_DEVELOPMENT": yes, "LATCHKEY_DEVICE_KEY_REQUIRE_VERIFIED_BOOT": yes,
                                                       "LATCHKEY_WEBHOOK_ALLOW_PRIVATE": yes, "LATCHKEY_CONFORMANCE": yes])
            #expect(c.developmentMode && c.emailSignIn && c.trustProxy && c.appAttestDevelopment && c.requireVerifiedBoot
                    && c.webhookAllowPrivate && c.conformance, "\(yes)")
        }
        for no in ["0", "false", "NO", "off", ""] {
            var env = Self.production
            env["LATCHKEY_TRUST_PROXY"] = no
            env["LATCHKEY_EMAIL_SIGN_IN"] = no
            let c = try Configuration.fromEnvironment(env)
            #expect(!c.trustProxy && !c.emailSignIn && !c.developmentMode, "\(no)")
        }
        for name in Configuration.booleanSettings {
            for bad in ["2", "maybe", "enabled", "y"] {
                var env = Self.production
                env[name] = bad
                let refusal = try #require(Self.refusal(env), "\(name)=\(bad) was accepted")
                #expect(refusal.hasPrefix("\(name)=\(bad) is not a boolean"), "\(refusal)")
            }
        }
        // Every setting the catalogue documents as a `1`: switch is parsed as a boolean.
        let switches = Set(ConfigurationCatalogue.variables.filter { $0.meaning.hasPrefix("`1`") }.map(\.name))
        #expect(switches == Set(Configuration.booleanSettings))
    }

    @Test("outside dev mode the issuer's origin is one of LATCHKEY_ORIGINS")
    func issuerAllowlisted() throws {
        let refusal = try #require(Self.refusal(["LATCHKEY_RP_ID": "example.com", "LATCHKEY_ORIGINS": "https://www.example.com"]))
        #expect(refusal.hasPrefix("LATCHKEY_ISSUER=https://example.com: its origin https://example.com is not among LATCHKEY_ORIGINS"), "\(refusal)")
        #expect(Self.refusal(["LATCHKEY_RP_ID": "example.com", "LATCHKEY_ORIGINS": "https://www.example.com",
                              "LATCHKEY_ISSUER": "https://www.example.com/oidc"]) == nil)
        #expect(Self.refusal(["LATCHKEY_RP_ID": "example.com", "LATCHKEY_ORIGINS": "https://www.example.com", "LATCHKEY_DEV": "1"]) == nil)
    }

    @Test("LATCHKEY_ADMIN_ORIGIN: required outside dev mode with LATCHKEY_ADMIN_LISTEN; allowlisted, host under the rpId")
    func adminOrigin() throws {
        var env = Self.production
        env["LATCHKEY_ADMIN_LISTEN"] = "127.0.0.1:9090"
        #expect(Self.refusal(env)?.hasPrefix("LATCHKEY_ADMIN_LISTEN=127.0.0.1:9090 needs LATCHKEY_ADMIN_ORIGIN") == true, "\(Self.refusal(env) ?? "")")
        env["LATCHKEY_ADMIN_ORIGIN"] = "https://admin.example.com"
        #expect(Self.refusal(env)?.contains("is not among LATCHKEY_ORIGINS") == true)
        env["LATCHKEY_ORIGINS"] = "https://example.com,https://admin.example.com,https://example.org"
        let c = try Configuration.fromEnvironment(env)
        #expect(c.adminOrigin == "https://admin.example.com")
        #expect(c.consoleOrigin(explicit: nil, originsFromEnvironment: true, stored: []) == ("https://admin.example.com", "LATCHKEY_ADMIN_ORIGIN"))
        env["LATCHKEY_ADMIN_ORIGIN"] = "https://example.org"
        #expect(Self.refusal(env)?.contains("its host must be example.com or under it") == true)
        env["LATCHKEY_ADMIN_ORIGIN"] = "http://admin.example.com"
        #expect(Self.refusal(env)?.hasPrefix("LATCHKEY_ADMIN_ORIGIN=http://admin.example.com is not an origin") == true)
        // Development mode with a local rpId: the admin listener itself, allowlisted by default.
        let dev = try Configuration.fromEnvironment(["LATCHKEY_DEV": "1", "LATCHKEY_ADMIN_LISTEN": "127.0.0.1:9090"])
        #expect(dev.adminOrigin == "http://localhost:9090" && dev.origins == ["http://localhost:8080", "http://localhost:9090"])
        #expect(Configuration.enrolmentLink(origin: "https://admin.example.com/", ticket: "t") == "https://admin.example.com/admin/?ticket=t")
    }

    @Test("outside dev mode LATCHKEY_ADMIN_KEY is at least 32 characters and no example value")
    func adminKey() throws {
        for (key, refused) in [("change-me", true), ("CHANGE-ME", true), (String(repeating: "k", count: 31), true),
                               (String(repeating: "k", count: 32), false), ("Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0MTIzNDU2", false)] {
            var env = Self.production
            env["LATCHKEY_ADMIN_KEY"] = key
            let refusal = Self.refusal(env)
            #expect((refusal != nil) == refused, "\(key): \(refusal ?? "accepted")")
            if let refusal { #expect(refusal.hasPrefix("LATCHKEY_ADMIN_KEY") && refusal.contains("openssl rand -base64 32"), "\(refusal)") }
            env["LATCHKEY_DEV"] = "1"
            #expect(Self.refusal(env) == nil, "dev mode: \(key)")
        }
    }

    /// The repository's example files ship no working admin key; every value they hold is refused.
    @Test("every LATCHKEY_ADMIN_KEY value in deploy/ is empty or one of the refused examples")
    func deployFilesShipNoAdminKey() throws {
        let root = TestDatabase.repositoryRoot
        var files = [root.appendingPathComponent("compose.yaml")]
        let deploy = root.appendingPathComponent("deploy")
        for case let url as URL in FileManager.default.enumerator(at: deploy, includingPropertiesForKeys: nil)! { files.append(url) }
        let pattern = try NSRegularExpression(pattern: #"LATCHKEY_ADMIN_KEY[ \t]*[=:][ \t]*"?([^"\s#,}]*)"#)
        var seen = 0
        for file in files {
            guard let text = try? String(contentsOf: file, encoding: .utf8) else { continue }
            for match in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                let value = String(text[Range(match.range(at: 1), in: text)!])
                seen += 1
                #expect(value.isEmpty || Configuration.exampleAdminKeys.contains(value), "\(file.lastPathComponent): \(value)")
                #expect(value.isEmpty, "\(file.lastPathComponent) ships an admin key: \(value)")
            }
        }
        #expect(seen >= 2, "the systemd and Kubernetes files set LATCHKEY_ADMIN_KEY")
    }

    @Test("latchkey config check: the same refusals as serve, each naming the setting and the fix")
    func configCheck() throws {
        let base = ["DATABASE_URL": "postgresql://latchkey@127.0.0.1:1/latchkey", "LATCHKEY_KEY_ENCRYPTION_KEY": TestDatabase.keyEncryptionKeyText]
        for (bad, says) in [(["LATCHKEY_RP_ID": "https://example.com"], "LATCHKEY_RP_ID=https://example.com has a scheme: the rpId is the host name alone"),
                            (["LATCHKEY_RP_ID": "co.uk"], "LATCHKEY_RP_ID=co.uk is a public suffix"),
                            (["LATCHKEY_EMAIL_SIGN_IN": "maybe"], "LATCHKEY_EMAIL_SIGN_IN=maybe is not a boolean"),
                            (["LATCHKEY_ADMIN_KEY": "change-me"], "LATCHKEY_ADMIN_KEY is the example value change-me"),
                            (["LATCHKEY_ADMIN_LISTEN": "127.0.0.1:9090"], "needs LATCHKEY_ADMIN_ORIGIN")] {
            var env = base.merging(Self.production) { $1 }
            env.merge(bad) { $1 }
            let check = try LatchkeyCLI.run(["config", "check"], environment: env)
            #expect(check.status == 1 && check.stdout.contains("refused: latchkey serve would not start: ") && check.stdout.contains(says),
                    "\(bad): \(check)")
        }
        // LATCHKEY_DEV=true is development mode (it used to be read as off).
        let dev = try LatchkeyCLI.run(["config", "check"], environment: ["DATABASE_URL": base["DATABASE_URL"]!, "LATCHKEY_DEV": "true"])
        #expect(dev.status == 0 && dev.stdout.contains("warning: LATCHKEY_DEV=1: development mode"), "\(dev)")
    }

    @Test("latchkey origins add refuses an origin that can never work for the rpId (exit 64, nothing stored)")
    func originsAddRefuses() throws {
        let rpId = "cli-origins-\(uniqueSuffix()).latchkey.test"
        let env = ["DATABASE_URL": try TestDatabase.url(), "LATCHKEY_RP_ID": rpId]
        for (origin, dev) in [("https://192.0.2.7", false), ("http://localhost:4321", true), ("https://co.uk", false)] {
            var e = env
            if dev { e["LATCHKEY_DEV"] = "1" }
            let add = try LatchkeyCLI.run(["origins", "add", origin], environment: e)
            #expect(add.status == 64 && add.stderr.contains("can never work for rpId \(rpId)"), "\(origin): \(add)")
        }
        let related = "https://shop-\(uniqueSuffix()).example"
        let ok = try LatchkeyCLI.run(["origins", "add", "https://www.\(rpId)"], environment: env)
        #expect(ok.status == 0, "\(ok)")
        #expect(try LatchkeyCLI.run(["origins", "add", related], environment: env).status == 0)
        for o in ["https://www.\(rpId)", related] { _ = try LatchkeyCLI.run(["origins", "remove", o], environment: env) }
    }
}
