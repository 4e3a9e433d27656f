import Crypto
import Curl
import Dispatch
import Foundation
import JSON
import Synchronization

/// One verification key from a client's JWKS (RFC 7517), imported once when its set is fetched.
struct ClientKey: Sendable {
    let kid: String?
    /// The JWK's `alg`, when it names one: then the key is used with that algorithm only (RFC 7517 §4.4).
    let alg: String?
    let key: PublicKey

    /// EC P-256 or RSA of at least 2048 bits (RFC 7518 §3.3, §3.5), not marked for encryption only
    /// (`use` other than `sig`); nil for anything else, which the set then leaves out.
    init?(jwk: JSONValue) {
        if let use = jwk["use"], use.stringValue != "sig" { return nil }
        switch jwk["kty"]?.stringValue {
        case "EC":
            guard jwk["crv"]?.stringValue == "P-256", let x = jwk["x"]?.stringValue.flatMap(Base64URL.decode),
                  let y = jwk["y"]?.stringValue.flatMap(Base64URL.decode), let key = try? PublicKey.ec(curve: .p256, x: x, y: y) else { return nil }
            self.key = key
        case "RSA":
            guard let n = jwk["n"]?.stringValue.flatMap(Base64URL.decode), let e = jwk["e"]?.stringValue.flatMap(Base64URL.decode),
                  let key = try? PublicKey.rsa(modulus: n, exponent: e), case .rsa(let bits) = key.type, bits >= 2048 else { return nil }
            self.key = key
        default: return nil
        }
        kid = jwk["kid"]?.stringValue
        alg = jwk["alg"]?.stringValue
    }

    /// Whether this key may verify a JWS of `alg` (ES256 → EC P-256; RS256, PS256 → RSA).
    func fits(_ alg: String) -> Bool {
        if let own = self.alg, own != alg { return false }
        switch (alg, key.type) {
        case ("ES256", .ec(.p256)), ("RS256", .rsa), ("PS256", .rsa): return true
        default: return false
        }
    }
}

/// A JWKS as one fetch returned it.
struct FetchedKeySet: Sendable {
    let keys: [ClientKey]
    /// `Cache-Control: max-age`, when the response gave one.
    let maxAge: Double?
}

/// The HTTP GET of a client's `jwks_uri`, under the webhooks' address rules (SPEC "Assurance"): the
/// name resolved once, every address checked, the connection pinned to them, no redirects, 64 kB.
struct JWKSFetcher: Sendable {
    let policy: WebhookAddressPolicy
    /// `https`, or `http,https` in development mode (`http://` then only to loopback: the policy's rule).
    let protocols: String
    let caFile: String?
    let resolver: HostResolver
    var timeoutSeconds = 5

    init(policy: WebhookAddressPolicy, protocols: String, caFile: String?, resolver: HostResolver) {
        self.policy = policy
        self.protocols = protocols
        self.caFile = caFile
        self.resolver = resolver
    }

    func fetch(_ uri: String) throws(OAuthError) -> FetchedKeySet {
        let destination: CheckedDestination
        do {
            let parsed = try WebhookURL(parsing: uri)
            try policy.check(parsed)
            switch parsed.host {
            case .address(let a): destination = try policy.check(parsed, resolvedTo: [a])
            case .name(let name):
                guard case .success(let addresses) = resolver.addresses(of: name) else {
                    throw OAuthError.invalidClient("the client's jwks_uri does not resolve")
                }
                destination = try policy.check(parsed, resolvedTo: addresses)
            }
        } catch let e as OAuthError { throw e } catch { throw OAuthError.invalidClient("the client's jwks_uri is refused: \(error)") }
        var options = CurlOptions()
        options.timeoutSeconds = timeoutSeconds
        options.protocols = protocols
        options.maxResponseBytes = 65536
        options.maxRedirects = 0
        options.connectOnlyTo = destination.addresses.map(\.bytes)
        options.caFile = caFile
        options.responseHeaders = ["Cache-Control"]
        guard let response = try? Curl.get(destination.url.text, options: options), response.status == 200, !response.truncated,
              let jwks = try? JSONParser.parse(response.body, maxDepth: 6), let keys = jwks["keys"]?.arrayValue else {
            throw OAuthError.invalidClient("the client's jwks_uri did not answer a JWKS")
        }
        return FetchedKeySet(keys: keys.compactMap(ClientKey.init(jwk:)), maxAge: Self.maxAge(response.headers["cache-control"]))
    }

    /// RFC 9111 §5.2.2.1 `max-age=<seconds>` (quoted or not); nil without one. `no-store` and
    /// `no-cache` are read as no max-age: the cache's minimum then applies (SPEC: ≥ 5 minutes).
    static func maxAge(_ cacheControl: String?) -> Double? {
        guard let cacheControl else { return nil }
        for directive in cacheControl.split(separator: ",") {
            let parts = directive.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, parts[0].lowercased() == "max-age" else { continue }
            let value = parts[1].hasPrefix("\"") && parts[1].hasSuffix("\"") && parts[1].count >= 2 ? String(parts[1].dropFirst().dropLast()) : parts[1]
            guard !value.isEmpty, value.utf8.count <= 12, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let seconds = Int(value) else { return nil }
            return Double(seconds)
        }
        return nil
    }
}

/// Clients' JWKS by `jwks_uri` (SPEC "Client authentication"): a set is fresh for its response's
/// `Cache-Control: max-age`, at least 5 minutes and at most 24 hours, and refreshed off the request
/// path — a request that finds its set within a minute of going stale starts a refresh on this
/// cache's own queue and goes on with the keys it has. A `kid` the set holds never causes a fetch,
/// whether its signature verifies or not.
///
/// Two cases are fetched on the request's thread, and no URI more than once a minute (every fetch
/// of a URI, whatever started it, counts toward that minute; requests arriving during a fetch wait
/// for that same fetch rather than start another):
/// - a `kid` the set does not hold (a key the client has just rotated in): the request that brings
///   it waits for the fetch, so the rotation's first assertion verifies. Within the minute after a
///   fetch of its URI such a request is refused at once with the keys held. A forged assertion
///   naming random kids thus costs one fetch a minute, and holds the request threads that arrive
///   during that fetch (bounded by the fetch's timeout) — never one fetch per request.
/// - a URI with no usable keys: its first request ever (or the first after its last good set aged
///   past `staleGrace`) has nothing to verify with, so waiting for the fetch is the only way it can
///   succeed; after a failed one the URI is tried again at most once a minute.
///
/// A set whose refresh fails keeps being used for `staleGrace` past its lifetime (a client's JWKS
/// host being down for a while does not lock the client out), and refreshes are retried once a minute.
/// Time is `Runtime.uptime` (monotonic; ARCHITECTURE "Where time and randomness come from").
final class ClientKeySets: Sendable {
    static let minimumLifetime = 300.0
    static let maximumLifetime = 86_400.0
    /// A refresh starts this long before a set goes stale.
    static let refreshAhead = 60.0
    /// At most one fetch of a URI per this many seconds (apart from its waited-for first fetch).
    static let fetchInterval = 60.0
    /// How long past its lifetime a set is still used while its refreshes fail.
    static let staleGrace = 3600.0

    /// One fetch in flight; requests that must have its result wait on it.
    final class Fetch: Sendable {
        private let done = DispatchGroup()
        init() { done.enter() }
        fileprivate func finish() { done.leave() }
        /// False when `seconds` passed first.
        func wait(seconds: Double) -> Bool { done.wait(timeout: .now() + seconds) == .success }
    }

    private struct Entry {
        var keys: [ClientKey] = []
        /// Uptime at which the set in `keys` was asked for; nil until a fetch succeeds.
        var fetchedAt: Double? = nil
        var lifetime = ClientKeySets.minimumLifetime
        /// Uptime of the last fetch started, whatever its outcome.
        var attemptedAt: Double
        var failure: OAuthError? = nil
        var inFlight: Fetch? = nil
        var usedAt: Double
    }

    /// What a request does with the state it found.
    private enum Plan {
        case use([ClientKey])
        case fetchHere(Fetch)
        case wait(Fetch)
        case refuse(OAuthError)
    }

    private let entries = Mutex<[String: Entry]>([:])
    let fetcher: JWKSFetcher
    let clock: @Sendable () -> Double
    let capacity: Int
    private let queue = DispatchQueue(label: "latchkey.client-key-sets", qos: .utility)

    /// `capacity`: URIs kept (the least recently used go past it); URIs come from registered clients.
    init(fetcher: JWKSFetcher, clock: @escaping @Sendable () -> Double, capacity: Int = 10_000) {
        self.fetcher = fetcher
        self.clock = clock
        self.capacity = max(1, capacity)
    }

    /// The keys of `uri`'s set that a JWS with this `kid` may be verified with: those with that
    /// `kid`, or all of them for an assertion without one. Empty when the set holds no such `kid`
    /// (a refresh is then under way or was tried within the minute). Throws only when there is no
    /// usable set and none could be fetched now.
    func keys(for uri: String, kid: String?) throws(OAuthError) -> [ClientKey] {
        let now = clock()
        let (plan, background) = entries.withLock { decide(&$0, uri: uri, kid: kid, now: now) }
        if let background { queue.async { self.run(background, uri: uri) } }
        switch plan {
        case .use(let keys): return keys
        case .refuse(let error): throw error
        case .fetchHere(let fetch):
            run(fetch, uri: uri)
            return try result(uri: uri, kid: kid)
        case .wait(let fetch):
            guard fetch.wait(seconds: Double(fetcher.timeoutSeconds) * 2 + 1) else {
                throw OAuthError.invalidClient("the client's jwks_uri is being fetched; try again")
            }
            return try result(uri: uri, kid: kid)
        }
    }

    /// Waits until every refresh queued so far has finished (tests; a shutdown that cares).
    func waitForRefreshes() { queue.sync {} }

    /// Whether a set for `uri` is held (fetched at least once and not evicted).
    func holds(_ uri: String) -> Bool { entries.withLock { $0[uri]?.fetchedAt != nil } }

    private func decide(_ table: inout [String: Entry], uri: String, kid: String?, now: Double) -> (Plan, Fetch?) {
        guard var entry = table[uri] else {
            let fetch = Fetch()
            table[uri] = Entry(attemptedAt: now, inFlight: fetch, usedAt: now)
            if table.count > capacity { evict(&table, keeping: uri) }
            return (.fetchHere(fetch), nil)
        }
        defer { table[uri] = entry }
        entry.usedAt = now
        let mayFetch = entry.inFlight == nil && now - entry.attemptedAt >= Self.fetchInterval
        func start() -> Fetch {
            let fetch = Fetch()
            entry.inFlight = fetch
            entry.attemptedAt = now
            return fetch
        }
        guard let fetchedAt = entry.fetchedAt, now - fetchedAt < entry.lifetime + Self.staleGrace else {
            // Nothing usable: this request can only wait for a fetch.
            if let running = entry.inFlight { return (.wait(running), nil) }
            if mayFetch { return (.fetchHere(start()), nil) }
            return (.refuse(entry.failure ?? OAuthError.invalidClient("the client's jwks_uri did not answer a JWKS")), nil)
        }
        let matching = kid.map { k in entry.keys.filter { $0.kid == k } } ?? entry.keys
        if matching.isEmpty, kid != nil {
            // An unknown kid (a key the client has just rotated in) is fetched for on this request, at
            // most once a minute per jwks_uri: the rotation's first assertion verifies, and a forged
            // kid costs at most one fetch a minute.
            if let running = entry.inFlight { return (.wait(running), nil) }
            if mayFetch { return (.fetchHere(start()), nil) }
            return (.use([]), nil)
        }
        // A known kid refreshes off the request path, when the set is about to go stale.
        let due = now - fetchedAt >= entry.lifetime - Self.refreshAhead
        return (.use(matching), due && mayFetch ? start() : nil)
    }

    /// The outcome of the fetch a request ran or waited for.
    private func result(uri: String, kid: String?) throws(OAuthError) -> [ClientKey] {
        let found = entries.withLock { table -> Result<[ClientKey], OAuthError> in
            guard let entry = table[uri] else { return .failure(OAuthError.invalidClient("the client's jwks_uri did not answer a JWKS")) }
            guard entry.fetchedAt != nil, entry.failure == nil else {
                return .failure(entry.failure ?? OAuthError.invalidClient("the client's jwks_uri did not answer a JWKS"))
            }
            return .success(kid.map { k in entry.keys.filter { $0.kid == k } } ?? entry.keys)
        }
        return try found.get()
    }

    private func run(_ fetch: Fetch, uri: String) {
        let outcome = Result { () throws(OAuthError) -> FetchedKeySet in try fetcher.fetch(uri) }
        entries.withLock { table in
            // An entry evicted meanwhile, or whose fetch is another one, takes nothing from this one.
            guard var entry = table[uri], entry.inFlight === fetch else { return }
            entry.inFlight = nil
            switch outcome {
            case .success(let set):
                entry.keys = set.keys
                entry.fetchedAt = entry.attemptedAt
                entry.lifetime = min(max(set.maxAge ?? 0, Self.minimumLifetime), Self.maximumLifetime)
                entry.failure = nil
            case .failure(let error):
                // The last good set stays (stale-if-error, bounded by `staleGrace`).
                entry.failure = error
            }
            table[uri] = entry
        }
        fetch.finish()
    }

    /// Drops the least recently used entry that no fetch is filling (one per new URI past capacity).
    private func evict(_ table: inout [String: Entry], keeping uri: String) {
        let idle = table.filter { $0.key != uri && $0.value.inFlight == nil }
        if let oldest = idle.min(by: { $0.value.usedAt < $1.value.usedAt }) { table[oldest.key] = nil }
    }
}
