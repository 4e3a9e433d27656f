import Synchronization

/// The order in which a multi-host URL's hosts are tried (`postgresql://u@h1:p1,h2:p2/db?…`).
///
/// libpq tries hosts in the order written, spending up to `connect_timeout` (2 s at least) on each
/// one that does not answer. After a failover away from a host that hangs, every new connection
/// would pay that wait before reaching the new primary. So a host whose connection broke or timed
/// out moves to the back of the list for every later connection of this process (all pools share
/// it: they differ only in their options). A host that is merely a standby costs nothing extra:
/// libpq refuses it at once under `target_session_attrs=read-write` and goes on to the next.
/// Key=value connection strings and single-host URLs are used as written.
enum HostOrder {
    /// Host lists (as written) → hosts in their current order of preference.
    private static let preferred = Mutex<[String: [String]]>([:])

    /// `url` with its host list in the current order of preference.
    static func apply(_ url: String) -> String {
        guard let parts = split(url), parts.hosts.count > 1 else { return url }
        let order = preferred.withLock { $0[parts.hosts.joined(separator: ",")] } ?? parts.hosts
        return parts.prefix + order.joined(separator: ",") + parts.suffix
    }

    /// Moves `host` (`PQhost:PQport` of a connection that broke or timed out) to the back.
    static func demote(url: String, host: String) {
        guard let parts = split(url), parts.hosts.count > 1 else { return }
        let key = parts.hosts.joined(separator: ",")
        preferred.withLock { table in
            var order = table[key] ?? parts.hosts
            guard let index = order.firstIndex(where: { matches($0, host) }), index != order.count - 1 else { return }
            order.append(order.remove(at: index))
            table[key] = order
        }
    }

    /// A URI's text before the hosts, the hosts, and the text after them.
    static func split(_ url: String) -> (prefix: String, hosts: [String], suffix: String)? {
        let schemes = ["postgresql://", "postgres://"]
        guard let scheme = schemes.first(where: { url.hasPrefix($0) }) else { return nil }
        let rest = url.dropFirst(scheme.count)
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        let hostsStart = authority.lastIndex(of: "@").map { authority.index(after: $0) } ?? authority.startIndex
        let hosts = authority[hostsStart...].split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        guard !hosts.contains(where: \.isEmpty) else { return nil }
        return (scheme + String(rest[..<hostsStart]), hosts, String(rest[authorityEnd...]))
    }

    /// Whether the URI host entry `entry` (`host`, `host:port`, `[v6]:port`) is `connected` (`host:port`).
    static func matches(_ entry: String, _ connected: String) -> Bool {
        if entry == connected { return true }
        // An entry without a port is the default port's.
        return !entry.hasSuffix("]") && !entry.contains(":") ? entry + ":5432" == connected : false
    }
}
