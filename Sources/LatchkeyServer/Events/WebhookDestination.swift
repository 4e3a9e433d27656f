/// Where a webhook goes, in two typed steps (STYLE §1): `WebhookURL` is a URL read the way an HTTP
/// client reads it (nothing judged yet); `WebhookAddressPolicy` decides whether it may be created, and
/// at every delivery turns it plus the addresses its host resolved to into a `CheckedDestination` —
/// the only thing the sender connects to.

/// A webhook URL's scheme, host and port. A host that an HTTP client would read as an IP address in
/// any notation (`2130706433`, `0x7f000001`, `0177.0.0.1`, `127.1`, `127.0.0.1.`, `[::ffff:7f00:1]`)
/// is that address here; anything ambiguous (percent-escapes, backslashes, user info, a zone id,
/// non-ASCII, a host that ends in a number but is no address) is refused rather than guessed at.
public struct WebhookURL: Sendable, Hashable {
    public enum Host: Sendable, Hashable {
        case address(IPAddress)
        /// A DNS name in lower case (a trailing dot kept: `hooks.example.` is absolute).
        case name(String)
    }

    public let text: String
    /// `https` or `http`.
    public let scheme: String
    public let host: Host
    public let port: Int

    public init(parsing url: String) throws(ServiceError) {
        guard url.utf8.count <= 2048, !url.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F }) else {
            throw ServiceError.invalid("url must be a URL of at most 2048 characters without spaces")
        }
        let form = ServiceError.invalid("url must be https://host[:port]/path")
        guard let sep = url.firstRange(of: "://") else { throw form }
        let scheme = url[..<sep.lowerBound].lowercased()
        guard scheme == "https" || scheme == "http" else { throw form }
        // `\` is `/` to a browser's URL parser and a host character to none: never ambiguous here.
        guard !url.contains("#"), !url.contains("\\") else { throw form }
        let rest = url[sep.upperBound...]
        let authority = rest.prefix { $0 != "/" && $0 != "?" }
        guard !authority.isEmpty, !authority.contains("@") else { throw form }

        var hostText = authority[...]
        var portText: Substring? = nil
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw form }
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw form }
                portText = after.dropFirst()
            }
            hostText = authority[authority.index(after: authority.startIndex)..<close]
            guard let address = IPAddress(ipv6: hostText) else {
                throw ServiceError.invalid("url: [\(hostText)] is not an IPv6 address (zone ids are not allowed)")
            }
            host = .address(address)
        } else {
            if let colon = authority.lastIndex(of: ":") {
                portText = authority[authority.index(after: colon)...]
                hostText = authority[..<colon]
            }
            guard !hostText.isEmpty, hostText.utf8.allSatisfy({ c in
                (c >= 0x61 && c <= 0x7A) || (c >= 0x41 && c <= 0x5A) || (c >= 0x30 && c <= 0x39) || c == 0x2D || c == 0x2E || c == 0x5F
            }) else {
                throw ServiceError.invalid("url: the host must be a DNS name (ASCII letters, digits, '-', '.'; IDNs in punycode) or an IP address")
            }
            switch IPAddress.ipv4(host: hostText) {
            case .address(let a): host = .address(.v4(a))
            case .invalid: throw ServiceError.invalid("url: \(hostText) ends in a number but is not an IPv4 address")
            case .name:
                let name = hostText.lowercased()
                let labels = (name.hasSuffix(".") ? String(name.dropLast()) : name).split(separator: ".", omittingEmptySubsequences: false)
                guard name.utf8.count <= 254, labels.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 63 }) else {
                    throw ServiceError.invalid("url: \(hostText) is not a DNS name")
                }
                host = .name(name)
            }
        }
        if let portText {
            guard (1...5).contains(portText.count), portText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let p = Int(portText),
                  (1...65535).contains(p) else { throw ServiceError.invalid("url: the port must be 1…65535") }
            port = p
        } else {
            port = scheme == "https" ? 443 : 80
        }
        self.text = url
        self.scheme = scheme
    }

    /// `localhost` or a name under it (RFC 6761 §6.3: always loopback, never sent to DNS).
    public var isLocalhostName: Bool {
        guard case .name(let n) = host else { return false }
        let bare = n.hasSuffix(".") ? String(n.dropLast()) : n
        return bare == "localhost" || bare.hasSuffix(".localhost")
    }

    /// What development mode's `http://` may reach: a loopback address in any notation, or `localhost`.
    public var isLoopback: Bool {
        switch host {
        case .address(let a): a.isLoopback
        case .name(let n): n == "localhost" || n == "localhost."
        }
    }

    /// The host as written for messages (`[…]` around IPv6).
    public var hostDescription: String {
        switch host {
        case .address(.v6(let hi, let lo)): "[\(IPAddress.v6(hi, lo))]"
        case .address(let a): a.description
        case .name(let n): n
        }
    }
}

/// A webhook URL and the addresses this delivery may connect to, every one of them checked by
/// `WebhookAddressPolicy` (only it builds one).
public struct CheckedDestination: Sendable {
    public let url: WebhookURL
    public let addresses: [IPAddress]
    fileprivate init(url: WebhookURL, addresses: [IPAddress]) {
        self.url = url
        self.addresses = addresses
    }
}

/// SPEC "Assurance" ("Outside dev mode") and "Events": webhooks are `https://…`; outside dev mode
/// they must not point inside — not at creation (the literal host, or `localhost`), and not at
/// delivery (every address the name resolves to). `LATCHKEY_WEBHOOK_ALLOW_PRIVATE=1` lifts the
/// second rule (on-premises receivers); dev mode lifts it too, and allows `http://` to loopback.
public struct WebhookAddressPolicy: Sendable {
    public let developmentMode: Bool
    public let allowPrivate: Bool

    public init(developmentMode: Bool, allowPrivate: Bool) {
        self.developmentMode = developmentMode
        self.allowPrivate = allowPrivate
    }

    public init(_ configuration: Configuration) {
        self.init(developmentMode: configuration.developmentMode, allowPrivate: configuration.webhookAllowPrivate)
    }

    /// Inside addresses are refused unless dev mode or LATCHKEY_WEBHOOK_ALLOW_PRIVATE=1.
    public var refusesInside: Bool { !developmentMode && !allowPrivate }

    /// At creation (and again before resolving, at delivery): the scheme, and the host as written.
    /// A name is not resolved here.
    public func check(_ url: WebhookURL) throws(ServiceError) {
        if url.scheme == "http" {
            guard developmentMode, url.isLoopback else {
                throw ServiceError.invalid("url must be https:// (http:// only to loopback in development mode)")
            }
        }
        guard refusesInside else { return }
        if url.isLocalhostName {
            throw ServiceError.invalid("url must not point inside: \(url.hostDescription) is loopback "
                                       + "(LATCHKEY_WEBHOOK_ALLOW_PRIVATE=1 allows inside receivers)")
        }
        if case .address(let a) = url.host, let range = a.specialRange {
            throw ServiceError.invalid("url must not point inside: \(url.hostDescription) is \(range) "
                                       + "(LATCHKEY_WEBHOOK_ALLOW_PRIVATE=1 allows inside receivers)")
        }
    }

    /// At delivery: the URL's rules again (this instance's configuration), then every address its
    /// host resolved to — one refused address refuses the attempt. `http://` (dev mode) connects only
    /// to loopback addresses.
    public func check(_ url: WebhookURL, resolvedTo addresses: [IPAddress]) throws(ServiceError) -> CheckedDestination {
        try check(url)
        guard !addresses.isEmpty else { throw ServiceError.invalid("\(url.hostDescription) has no address") }
        for a in addresses {
            if url.scheme == "http", !a.isLoopback {
                throw ServiceError.invalid("refused: \(url.hostDescription) resolves to \(a), and http:// only goes to loopback")
            }
            if refusesInside, let range = a.specialRange {
                throw ServiceError.invalid("refused: \(url.hostDescription) resolves to \(a), \(range)")
            }
        }
        return CheckedDestination(url: url, addresses: addresses)
    }
}

extension IPAddress {
    /// 127.0.0.0/8, ::1, or an IPv4-mapped 127.x address.
    public var isLoopback: Bool {
        switch self {
        case .v4(let a): a >> 24 == 127
        case .v6(let hi, let lo): hi == 0 && (lo == 1 || (lo >> 32 == 0xFFFF && (lo >> 24) & 0xFF == 127))
        }
    }
}
