import Foundation

/// `latchkey config check`: the configuration `serve` would run with, read from an environment
/// alone (no database, nothing listens) — each variable's value and where it came from, secrets
/// redacted, the warnings `serve` prints, and the refusal where `serve` would refuse to start.
public struct ConfigurationReport: Sendable {
    public struct Line: Sendable, Equatable {
        public let name: String
        public let value: String
        /// `environment`, `default`, or where a derived value came from.
        public let source: String
        public init(name: String, value: String, source: String) {
            self.name = name
            self.value = value
            self.source = source
        }
    }

    public let lines: [Line]
    public let warnings: [String]
    /// Why `serve` would refuse to start with this environment; nil when it would start (as far as
    /// the environment decides: the database's own state — a KEK that does not open its keys — is
    /// checked by `serve`).
    public let refusal: String?

    /// `resolvedKEK`: where the key-encryption key came from when the caller filled it in (the
    /// development key file); `configuration` is nil when the environment does not parse.
    public init(environment env: [String: String], configuration: Configuration?, refusal parseRefusal: String?,
                developmentKeyFile: String? = nil) {
        var lines: [Line] = []
        for v in ConfigurationCatalogue.variables {
            let raw = env[v.name].flatMap { $0.isEmpty ? nil : $0 }
            let shown: String
            var source = raw == nil ? "default" : "environment"
            switch v.kind {
            case .secret:
                shown = raw == nil ? "(unset)" : "<set, redacted>"
                if v.name == "LATCHKEY_KEY_ENCRYPTION_KEY", let raw, raw.hasPrefix("@") { source = "file \(raw.dropFirst())" }
            case .connection:
                shown = raw.map(Self.redactPassword) ?? "(unset)"
            case .plain:
                if let raw { shown = raw } else if let c = configuration, let effective = v.effective {
                    let value = effective(c)
                    shown = value.isEmpty ? "(unset)" : value
                } else {
                    shown = v.defaultText.replacingOccurrences(of: "`", with: "")
                }
            }
            lines.append(Line(name: v.name, value: shown, source: source))
            if v.name == "LATCHKEY_KEY_ENCRYPTION_KEY", raw == nil, let developmentKeyFile {
                lines[lines.count - 1] = Line(name: v.name, value: "<generated, redacted>", source: "development key file \(developmentKeyFile)")
            }
        }
        let known = Set(ConfigurationCatalogue.variables.map(\.name)).union(ConfigurationCatalogue.internalNames)
        var warnings = env.keys.filter { $0.hasPrefix("LATCHKEY_") && !known.contains($0) }.sorted().map {
            "\($0) is not a Latchkey setting (a typo?); it is ignored"
        }
        // Outside development mode such a key is refused (`fromEnvironment`); in it, a word of warning.
        if let key = env["LATCHKEY_ADMIN_KEY"], !key.isEmpty, Configuration.exampleAdminKeys.contains(key) || key.count < 32 {
            warnings.append("LATCHKEY_ADMIN_KEY is \(Configuration.exampleAdminKeys.contains(key) ? "the example \(key)" : "short"): "
                            + "use a long random one (openssl rand -base64 32); outside development mode it is refused")
        }
        var refusal = parseRefusal
        if let c = configuration {
            warnings += c.warnings()
            if refusal == nil { refusal = c.startRefusal() }
        }
        self.lines = lines
        self.warnings = warnings
        self.refusal = refusal
    }

    /// `postgresql://user:secret@host/db` → `postgresql://user:***@host/db`; `password=secret` in a
    /// key-value string likewise.
    static func redactPassword(_ url: String) -> String {
        if let scheme = url.range(of: "://"), let at = url[scheme.upperBound...].lastIndex(of: "@") {
            let userInfo = url[scheme.upperBound..<at]
            if let colon = userInfo.firstIndex(of: ":") {
                return String(url[..<url.index(after: colon)]) + "***" + String(url[at...])
            }
            return url
        }
        return url.split(separator: " ").map { $0.lowercased().hasPrefix("password=") ? "password=***" : String($0) }.joined(separator: " ")
    }

    public var text: String {
        var out = ""
        let width = (lines.map(\.name.count).max() ?? 0) + 2
        for l in lines {
            out += l.name + String(repeating: " ", count: max(1, width - l.name.count)) + l.value + "  [" + l.source + "]\n"
        }
        for w in warnings { out += "warning: \(w)\n" }
        out += refusal.map { "refused: latchkey serve would not start: \($0)\n" } ?? "ok: latchkey serve would start with this configuration\n"
        return out
    }
}

extension Configuration {
    /// What `serve` warns about at start-up (and `config check` prints): settings that work but
    /// deserve a second look.
    public func warnings() -> [String] {
        var out: [String] = []
        if trustProxy {
            out.append("LATCHKEY_TRUST_PROXY=1: the client address (rate limits, connection caps, logs) is the last X-Forwarded-For hop; "
                       + "every request must pass a proxy that sets it (nginx: proxy_set_header X-Forwarded-For $remote_addr), "
                       + "or clients choose their own address. Do not expose \(listenHost):\(listenPort) directly.")
        }
        if developmentMode {
            out.append("LATCHKEY_DEV=1: development mode (http://localhost origins, a generated key-encryption key, relaxed webhook rules); never in production")
        }
        if let dir = wellKnownDirectory {
            out.append("LATCHKEY_WELLKNOWN_DIR=\(dir): the association files in that folder are served instead of the ones built from the declared apps "
                       + "(serve warns when they disagree; unset it to serve the built files)")
        }
        if keyEncryptionKey == nil {
            out.append("no LATCHKEY_KEY_ENCRYPTION_KEY: the transparency log is off (its signing key is only ever stored sealed), "
                       + "so receipts are not logged and /v1/transparency/* answers 404")
        }
        if !developmentMode, smtpURL == nil {
            out.append("no LATCHKEY_SMTP_URL: mail is off, so email sign-in, verified addresses and recovery by email answer 404")
        }
        if !developmentMode, origins.isEmpty {
            out.append("no LATCHKEY_ORIGINS: only the origins already stored in the database are allowed (latchkey origins list), "
                       + "and the issuer's origin \(Configuration.origin(ofURL: issuer)) must be one of them")
        }
        for (name, value) in [("DATABASE_URL", databaseURL), ("LATCHKEY_DB_LISTEN_URL", databaseListenURL ?? "")] where value.contains("change-me") {
            out.append("\(name) still holds the example password change-me")
        }
        if adminListen == nil, !developmentMode, listenHost == "0.0.0.0" || listenHost == "::" {
            out.append("the admin API and console (/admin/) are on the public listener \(listenHost):\(listenPort); "
                       + "set LATCHKEY_ADMIN_LISTEN to a private address, or block /admin/ at the proxy")
        }
        return out
    }

    /// The refusals of `serve` that the environment alone decides, beyond `fromEnvironment`'s.
    public func startRefusal() -> String? {
        if databaseURL.isEmpty {
            return "DATABASE_URL is not set: a libpq URI such as postgresql://latchkey:<password>@127.0.0.1:5432/latchkey "
                + "(scripts/run.sh starts a private PostgreSQL and sets it)"
        }
        if keyEncryptionKey == nil, !developmentMode {
            return "LATCHKEY_KEY_ENCRYPTION_KEY is not set (required outside development mode: base64 of 32 bytes from "
                + "`openssl rand -base64 32`, or @/path/to/file holding it, e.g. a Kubernetes Secret volume or systemd LoadCredential=)"
        }
        if let web = webFolderRefusal() { return web }
        return nil
    }
}
