import Foundation
import WellKnown

/// The rules a setting's value must keep (SPEC "Rules that must hold", "Outside dev mode"), each
/// refusal naming the setting, the value and the fix. `fromEnvironment` applies the ones about one
/// raw value; `validate()` the ones between settings.
extension Configuration {
    /// SPEC: boolean settings accept `1/0/true/false/yes/no/on/off` in any case; anything else is
    /// refused, never read as off. Unset or empty: nil (the default).
    static func boolean(_ name: String, _ env: [String: String]) throws(Invalid) -> Bool? {
        guard let raw = env[name], !raw.trimmed.isEmpty else { return nil }
        switch raw.trimmed.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default:
            throw Invalid(description: "\(name)=\(raw.prefix(40)) is not a boolean: write 1 or 0 (true/false, yes/no and on/off are accepted too)")
        }
    }

    /// Every boolean setting (for the test that sweeps them).
    public static let booleanSettings = [
        "LATCHKEY_DEV", "LATCHKEY_APP_ATTEST_DEVELOPMENT", "LATCHKEY_DEVICE_KEY_REQUIRE_VERIFIED_BOOT", "LATCHKEY_TRUST_PROXY",
        "LATCHKEY_WEBHOOK_ALLOW_PRIVATE", "LATCHKEY_EMAIL_SIGN_IN", "LATCHKEY_CONFORMANCE",
    ]

    /// `LATCHKEY_DEV` alone (the CLI commands that read nothing else of the configuration).
    public static func developmentMode(_ env: [String: String]) throws(Invalid) -> Bool { try boolean("LATCHKEY_DEV", env) ?? false }

    /// What the allowlist and apps commands need of the environment: development mode and the rpId
    /// (`rpId` given on the command line wins over `LATCHKEY_RP_ID`), each checked as `serve` checks it.
    public static func site(_ env: [String: String], rpId explicit: String? = nil) throws(Invalid) -> Configuration {
        var c = Configuration()
        c.developmentMode = try developmentMode(env)
        if let v = explicit ?? env["LATCHKEY_RP_ID"].flatMap({ $0.isEmpty ? nil : $0 }) {
            try checkRPId(v)
            c.rpId = v
        }
        return c
    }

    /// Values shipped in this repository as examples (`deploy/`, the docs): never a real admin key.
    /// A test reads every `LATCHKEY_ADMIN_KEY` value in `deploy/` and fails when one is missing here.
    public static let exampleAdminKeys: Set<String> = ["change-me", "changeme", "CHANGE-ME", "admin", "secret"]

    /// SPEC: outside dev mode `LATCHKEY_ADMIN_KEY` is at least 32 characters and no example value.
    static func checkAdminKey(_ key: String, developmentMode: Bool) throws(Invalid) {
        guard !developmentMode else { return }
        let fix = "make one with `openssl rand -base64 32`"
        if exampleAdminKeys.contains(key) || exampleAdminKeys.contains(key.lowercased()) {
            throw Invalid(description: "LATCHKEY_ADMIN_KEY is the example value \(key) shipped with Latchkey: \(fix), or leave it unset (admin API for console admins only)")
        }
        if key.count < 32 {
            throw Invalid(description: "LATCHKEY_ADMIN_KEY is \(key.count) characters; outside development mode it needs at least 32: \(fix)")
        }
    }

    /// SPEC: `LATCHKEY_RP_ID` is a host name — no scheme, port, path or trailing dot, not an IP
    /// literal, not a public suffix (`localhost` and names under it are allowed).
    public static func checkRPId(_ rpId: String, suffixes: PublicSuffixList? = PublicSuffixList.system) throws(Invalid) {
        func refuse(_ why: String, _ fix: String) -> Invalid { Invalid(description: "LATCHKEY_RP_ID=\(rpId.prefix(80)) \(why): \(fix)") }
        if let scheme = rpId.range(of: "://") {
            let host = rpId[scheme.upperBound...].prefix { $0 != "/" && $0 != ":" }
            throw refuse("has a scheme", "the rpId is the host name alone, LATCHKEY_RP_ID=\(host)")
        }
        if rpId.contains("/") { throw refuse("has a path", "the rpId is the host name alone, LATCHKEY_RP_ID=\(rpId.prefix { $0 != "/" })") }
        if rpId.contains("[") || rpId.filter({ $0 == ":" }).count > 1 || isIPv4Literal(rpId) {
            throw refuse("is an IP address", "passkeys need a domain name; use the site's host name (or localhost in development)")
        }
        if rpId.contains(":") { throw refuse("has a port", "the rpId never carries a port, LATCHKEY_RP_ID=\(rpId.prefix { $0 != ":" })") }
        if rpId.hasSuffix(".") { throw refuse("ends with a dot", "write it without the trailing dot, LATCHKEY_RP_ID=\(rpId.dropLast())") }
        let labels = rpId.split(separator: ".", omittingEmptySubsequences: false)
        guard rpId.utf8.count <= 253, labels.allSatisfy({ label in
            (1...63).contains(label.utf8.count) && !label.hasPrefix("-") && !label.hasSuffix("-")
                && label.utf8.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D }
        }) else {
            throw refuse("is not a host name", "lower-case letters, digits and hyphens in dot-separated labels (an IDN in its xn-- form), e.g. example.com")
        }
        if rpId == "localhost" || rpId.hasSuffix(".localhost") { return }
        guard let suffixes else {
            throw refuse("cannot be checked", "the Public Suffix List \(PublicSuffixList.debianPath) is missing: install Debian's publicsuffix package")
        }
        if suffixes.isPublicSuffix(rpId) {
            throw refuse("is a public suffix (Public Suffix List)", "no site may claim it; use your own registrable domain under it, e.g. example.\(rpId)")
        }
    }

    /// `127.0.0.1`, `2130706433`, `0x7f000001`, `127.1`, or any host whose last label is a number:
    /// what a browser's URL parser reads as an IPv4 address (or refuses), never a domain name.
    static func isIPv4Literal(_ host: String) -> Bool { IPAddress.ipv4(host: host[...]) != .name }

    /// Why a web origin can never work for `rpId`, or nil when it can: its host is the rpId or under
    /// it, or it can be a related origin (WebAuthn L3 §5.11: https, a host with a registrable domain,
    /// listed at `https://<rpId>/.well-known/webauthn`, which `AssociationFiles` builds from the
    /// allowlist). `android:apk-key-hash:` origins are not web origins and always pass.
    public static func originReachProblem(_ origin: String, rpId: String, suffixes: PublicSuffixList? = PublicSuffixList.system) -> String? {
        guard !origin.hasPrefix("android:") else { return nil }
        guard let host = RelatedOrigins.host(of: origin) else { return "\(origin) is not scheme://host[:port]" }
        if host == rpId || host.hasSuffix("." + rpId) { return nil }
        let fix = "use https://\(rpId) or a host under it (https://www.\(rpId)), or set LATCHKEY_RP_ID to this site's domain"
        let why: String
        if !origin.lowercased().hasPrefix("https://") {
            why = "an http:// origin is never a related origin"
        } else if rpId == "localhost" || rpId.hasSuffix(".localhost") {
            why = "rpId \(rpId) cannot list related origins (browsers fetch https://\(rpId)/.well-known/webauthn)"
        } else if host.hasPrefix("[") || isIPv4Literal(host) {
            why = "an IP address is never a related origin"
        } else if host == "localhost" || host.hasSuffix(".localhost") || suffixes?.registrableDomain(of: host) == nil {
            why = "its host has no registrable domain, so it cannot be a related origin"
        } else {
            return nil
        }
        return "\(origin) can never work for rpId \(rpId): its host is not \(rpId) or under it, and \(why); \(fix)"
    }

    /// `https://host[:port]` of a URL (the issuer may carry a path).
    static func origin(ofURL url: String) -> String {
        guard let scheme = url.range(of: "://") else { return url }
        return String(url[..<scheme.upperBound]) + url[scheme.upperBound...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
    }

    /// The rules between settings that `validate()` adds for the rpId, the origins, the issuer and
    /// the console's origin.
    func validateSite() throws(Invalid) {
        try Self.checkRPId(rpId)
        for origin in origins {
            if let problem = Self.originReachProblem(origin, rpId: rpId) { throw Invalid(description: "LATCHKEY_ORIGINS: \(problem)") }
        }
        let web = Set(origins.filter { !$0.hasPrefix("android:") }.map { $0.lowercased() })
        // With no web origin in LATCHKEY_ORIGINS the allowlist lives in the database alone, which is
        // not read before the first connection: `warnings()` says what the issuer then needs.
        if !developmentMode, !web.isEmpty {
            let issuerOrigin = Self.origin(ofURL: issuer).lowercased()
            if !web.contains(issuerOrigin) {
                throw Invalid(description: "LATCHKEY_ISSUER=\(issuer): its origin \(issuerOrigin) is not among LATCHKEY_ORIGINS "
                              + "(the /authorize page and discovery are served there): add \(issuerOrigin) to LATCHKEY_ORIGINS, "
                              + "or set LATCHKEY_ISSUER to one of them (unset, it is https://<rpId>)")
            }
        }
        if let adminListen, adminOrigin == nil, !developmentMode {
            throw Invalid(description: "LATCHKEY_ADMIN_LISTEN=\(adminListen.host):\(adminListen.port) needs LATCHKEY_ADMIN_ORIGIN: the https origin "
                          + "the TLS front routes to the admin listener, where the console is reached and admins add prints its link "
                          + "(e.g. LATCHKEY_ADMIN_ORIGIN=https://\(rpId), with /admin/ routed to the admin listener)")
        }
        if let adminOrigin {
            let name = adminOriginExplicit ? "LATCHKEY_ADMIN_ORIGIN=\(adminOrigin)" : "LATCHKEY_ADMIN_ORIGIN (default \(adminOrigin))"
            guard case .success(let normalised) = OriginRules.validate(adminOrigin, developmentMode: developmentMode),
                  !normalised.hasPrefix("android:"), let host = RelatedOrigins.host(of: normalised) else {
                throw Invalid(description: "\(name) is not an origin the console can be reached at: https://host[:port] (http://localhost in development mode)")
            }
            guard host == rpId || host.hasSuffix("." + rpId) else {
                throw Invalid(description: "\(name): its host must be \(rpId) or under it (the admins' passkeys are for rpId \(rpId)); "
                              + "e.g. https://admin.\(rpId)")
            }
            guard web.contains(normalised) else {
                throw Invalid(description: "\(name) is not among LATCHKEY_ORIGINS, so passkeys made there would be origin_not_allowed: "
                              + "add \(normalised) to LATCHKEY_ORIGINS")
            }
        }
    }
}
