import JSON

/// Builds the three association files from the declared apps and the origin allowlist, so that
/// they cannot drift from what the server accepts.
public enum AssociationFiles {
    public static let appleAppSiteAssociation = "apple-app-site-association"
    public static let assetLinks = "assetlinks.json"
    public static let webauthn = "webauthn"
    public static let names = [appleAppSiteAssociation, assetLinks, webauthn]

    public static let getLoginCreds = "delegate_permission/common.get_login_creds"
    public static let handleAllURLs = "delegate_permission/common.handle_all_urls"

    /// Apple: `{"webcredentials":{"apps":["TEAMID.bundle.id",…]}}`, served without an extension.
    public static func appleAppSiteAssociationJSON(_ apps: [AssociatedApp]) -> JSONValue {
        let ids = apps.compactMap { app -> String? in if case .ios(let a) = app { a.appID } else { nil } }.sorted()
        return .object([("webcredentials", .object([("apps", .array(ids.map { .string($0) }))]))])
    }

    /// Google Digital Asset Links: one statement per Android app granting `get_login_creds`
    /// (and `handle_all_urls` when asked), listing every signing-key fingerprint.
    public static func assetLinksJSON(_ apps: [AssociatedApp]) -> JSONValue {
        let android = apps.compactMap { app -> AndroidApp? in if case .android(let a) = app { a } else { nil } }
            .sorted { $0.packageName < $1.packageName }
        return .array(android.map { a in
            var relations: [JSONValue] = [.string(getLoginCreds)]
            if a.handleAllURLs { relations.append(.string(handleAllURLs)) }
            return .object([
                ("relation", .array(relations)),
                ("target", .object([("namespace", "android_app"), ("package_name", .string(a.packageName)),
                                    ("sha256_cert_fingerprints", .array(a.fingerprints.map { .string($0.keytool) }))])),
            ])
        })
    }

    /// WebAuthn L3 §5.11 related origins: `{"origins":[…]}` — the allowlisted https origins that are
    /// neither the rpId nor one of its subdomains (those need no listing).
    public static func relatedOriginsJSON(origins: [String], rpId: String) -> JSONValue {
        let related = origins.filter { o in
            guard o.hasPrefix("https://"), let host = RelatedOrigins.host(of: o) else { return false }
            return host != rpId && !host.hasSuffix("." + rpId)
        }.sorted()
        return .object([("origins", .array(related.map { .string($0) }))])
    }

    /// Every file, serialised (UTF-8 JSON plus a final newline).
    public static func build(apps: [AssociatedApp], origins: [String], rpId: String) -> [(name: String, bytes: [UInt8])] {
        [(appleAppSiteAssociation, appleAppSiteAssociationJSON(apps)), (assetLinks, assetLinksJSON(apps)),
         (webauthn, relatedOriginsJSON(origins: origins, rpId: rpId))].map { ($0.0, $0.1.serialized() + [0x0A]) }
    }
}

/// WebAuthn L3 §5.11.1: clients count distinct *labels* (the registrable domain without its public
/// suffix: `example` for `www.example.co.uk`) and must support at least five.
public enum RelatedOrigins {
    public static let maxLabels = 5

    /// A small table of multi-part public suffixes; anything else is treated as a one-label suffix.
    /// An approximation of the Public Suffix List, good enough to warn before clients do.
    static let twoPartSuffixes: Set<String> = [
        "co.uk", "org.uk", "ac.uk", "gov.uk", "me.uk", "com.au", "net.au", "org.au", "co.nz", "co.jp", "ne.jp", "or.jp",
        "com.br", "com.cn", "com.mx", "co.in", "co.kr", "co.za", "com.tr", "com.sg", "com.hk", "com.tw", "co.il", "com.ar",
    ]

    /// The host of `scheme://host[:port]`, lower-cased, or nil when it is not such an origin.
    public static func host(of origin: String) -> String? {
        let scheme = origin.prefix { $0 != ":" }
        guard !scheme.isEmpty, origin.dropFirst(scheme.count).hasPrefix("://") else { return nil }
        let rest = origin.dropFirst(scheme.count + 3)
        guard !rest.isEmpty, !rest.contains("/"), !rest.contains("?"), !rest.contains("#"), !rest.contains("@") else { return nil }
        var host = Substring(rest)
        if let colon = host.lastIndex(of: ":"), !host.hasSuffix("]") {
            guard Int(host[host.index(after: colon)...]).map({ (1...65535).contains($0) }) == true else { return nil }
            host = host[..<colon]
        }
        guard !host.isEmpty else { return nil }
        return host.lowercased()
    }

    /// The label of a host, or nil for IP literals and single-label hosts.
    public static func label(ofHost host: String) -> String? {
        let parts = host.split(separator: ".").map(String.init)
        guard parts.count >= 2, !parts.allSatisfy({ Int($0) != nil }) else { return nil }
        let lastTwo = parts.suffix(2).joined(separator: ".")
        if twoPartSuffixes.contains(lastTwo) { return parts.count >= 3 ? parts[parts.count - 3] : nil }
        return parts[parts.count - 2]
    }

    /// Distinct labels in listing order.
    public static func labels(_ origins: [String]) -> [String] {
        var seen: [String] = []
        for o in origins {
            if let h = host(of: o), let l = label(ofHost: h), !seen.contains(l) { seen.append(l) }
        }
        return seen
    }
}
