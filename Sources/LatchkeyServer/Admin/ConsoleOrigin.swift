extension Configuration {
    /// Where the admin console is served, for `latchkey admins add`'s enrolment link: the origin
    /// and what it came from — `--origin`; the admin listener (for a local rpId); the first web
    /// origin of `LATCHKEY_ORIGINS` (or dev mode's default); the first allowlisted web origin on the
    /// rpId's host in the database (what a running dev server seeded); else the issuer.
    public func consoleOrigin(explicit: String?, originsFromEnvironment: Bool, stored: [String]) -> (String, String) {
        if let explicit { return (explicit, "--origin") }
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
}
