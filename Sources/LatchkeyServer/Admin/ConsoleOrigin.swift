extension Configuration {
    /// Where the admin console is reached, for the enrolment links `latchkey admins add` prints: the
    /// origin and what it came from — `--origin`; `LATCHKEY_ADMIN_ORIGIN` (in development mode with a
    /// local rpId, the admin listener by default); the first web origin of `LATCHKEY_ORIGINS` (or dev
    /// mode's default); the first allowlisted web origin on the rpId's host in the database (what a
    /// running dev server seeded); else the issuer. Outside development mode with
    /// `LATCHKEY_ADMIN_LISTEN`, `validate()` has already refused a configuration without
    /// `LATCHKEY_ADMIN_ORIGIN` (SPEC "Admin console").
    public func consoleOrigin(explicit: String?, originsFromEnvironment: Bool, stored: [String]) -> (String, String) {
        if let explicit { return (explicit, "--origin") }
        if let adminOrigin { return (adminOrigin, adminOriginExplicit ? "LATCHKEY_ADMIN_ORIGIN" : "LATCHKEY_ADMIN_LISTEN") }
        func web(_ o: String) -> Bool { o.hasPrefix("https://") || o.hasPrefix("http://") }
        if let admin = adminListen, rpId == "localhost" || developmentMode {
            let loopback = ["127.0.0.1", "0.0.0.0", "::", "::1"].contains(admin.host)
            return ("http://\(loopback && rpId == "localhost" ? "localhost" : admin.host):\(admin.port)", "LATCHKEY_ADMIN_LISTEN")
        }
        if let o = origins.first(where: web), originsFromEnvironment || developmentMode {
            return (o, originsFromEnvironment ? "LATCHKEY_ORIGINS" : "the development default origin")
        }
        func host(_ o: String) -> String {
            let authority = o.drop { $0 != "/" }.drop { $0 == "/" }.prefix { $0 != "/" }
            return String(authority.prefix { $0 != ":" }).lowercased()
        }
        let onRpId = stored.filter { web($0) && host($0) == rpId.lowercased() }
        if let o = onRpId.first(where: { $0.hasPrefix("https://") }) ?? onRpId.first { return (o, "the allowlist in the database") }
        return (issuer, "LATCHKEY_ISSUER")
    }

    /// The one-time enrolment link of an admin's first passkey: `<console origin>/admin/?ticket=<ticket>`.
    public static func enrolmentLink(origin: String, ticket: String) -> String {
        var base = origin
        while base.hasSuffix("/") { base.removeLast() }
        return "\(base)/admin/?ticket=\(ticket)"
    }
}
