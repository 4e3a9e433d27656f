/// The connection string of another database on the cluster a bench was pointed at: the given one
/// with only its database name changed, every other libpq parameter kept as written (host lists,
/// a socket directory in `?host=/path`, `port`, `sslmode`, `options`, …).
///
/// - A URI (`postgresql://` or `postgres://`): the path after the authority becomes `/name`; a
///   `dbname` in the query (which libpq would let override the path) is dropped. The authority may
///   be empty (`postgresql://postgres@/latchkey?host=/var/run/postgresql`): the query's slashes are
///   never taken for the path's.
/// - Key=value conninfo (`host=/tmp port=5433 dbname=latchkey`): ` dbname=name` is appended; libpq
///   takes the last value of a keyword written twice.
///
/// `name` is built by the bench from digits and `[a-z_]`, so it needs no quoting or escaping.
enum BenchDatabaseURL {
    static func database(_ name: String, of url: String) -> String {
        guard let scheme = ["postgresql://", "postgres://"].first(where: { url.hasPrefix($0) }) else {
            return url + " dbname=" + name
        }
        let rest = url.dropFirst(scheme.count)
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        let afterAuthority = rest[authorityEnd...]
        guard let question = afterAuthority.firstIndex(of: "?") else {
            return scheme + authority + "/" + name
        }
        let query = afterAuthority[afterAuthority.index(after: question)...]
        let kept = query.split(separator: "&", omittingEmptySubsequences: true).filter { !$0.hasPrefix("dbname=") }
        return scheme + authority + "/" + name + (kept.isEmpty ? "" : "?" + kept.joined(separator: "&"))
    }
}
