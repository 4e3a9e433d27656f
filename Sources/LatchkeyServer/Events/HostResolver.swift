#if canImport(Glibc)
import Glibc
#endif

/// Name → addresses, for the URLs Latchkey fetches for someone else (webhook deliveries): the
/// system's resolver (getaddrinfo: /etc/hosts, then DNS), or in tests a fixed table, so a test can
/// say "this name is 127.0.0.1" without touching DNS (`Runtime.resolver`).
public struct HostResolver: Sendable {
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let reason: String
        public var description: String { reason }
    }

    private let lookup: @Sendable (String) -> Result<[IPAddress], Failure>

    public init(_ lookup: @escaping @Sendable (String) -> Result<[IPAddress], Failure>) { self.lookup = lookup }

    /// Every address of `name` (IPv4 and IPv6, each once, in the resolver's order), or why none.
    public func addresses(of name: String) -> Result<[IPAddress], Failure> { lookup(name) }

    /// getaddrinfo, TCP, both families. Blocking: called on an outbox sender thread.
    public static let system = HostResolver { name in
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>? = nil
        let status = getaddrinfo(name, nil, &hints, &list)
        guard status == 0 else { return .failure(Failure(reason: String(cString: gai_strerror(status)))) }
        defer { freeaddrinfo(list) }
        var out: [IPAddress] = []
        var entry = list
        while let info = entry?.pointee {
            defer { entry = info.ai_next }
            guard let sa = info.ai_addr else { continue }
            let address: IPAddress?
            switch info.ai_family {
            case AF_INET:
                address = UnsafeRawPointer(sa).withMemoryRebound(to: sockaddr_in.self, capacity: 1) { p in
                    withUnsafeBytes(of: p.pointee.sin_addr) { IPAddress(bytes: Array($0)) }
                }
            case AF_INET6:
                address = UnsafeRawPointer(sa).withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { p in
                    withUnsafeBytes(of: p.pointee.sin6_addr) { IPAddress(bytes: Array($0)) }
                }
            default:
                address = nil
            }
            if let address, !out.contains(address) { out.append(address) }
        }
        return out.isEmpty ? .failure(Failure(reason: "no address")) : .success(out)
    }

    /// Only the names in `table` resolve (tests: no DNS, no /etc/hosts); any other is unknown.
    public static func table(_ table: [String: [IPAddress]]) -> HostResolver {
        HostResolver { name in
            let key = name.lowercased()
            guard let found = table[key] ?? table[key.hasSuffix(".") ? String(key.dropLast()) : key + "."], !found.isEmpty else {
                return .failure(Failure(reason: "\(name) is not in the resolver's table"))
            }
            return .success(found)
        }
    }
}
