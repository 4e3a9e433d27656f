import Foundation
import Glibc
import PostgreSQLTesting
import Synchronization

/// Ports for the private PostgreSQL clusters that tests stop and start again (FaultCluster,
/// PrivateCluster).
///
/// A port inside the kernel's ephemeral range (`net.ipv4.ip_local_port_range`, 32768–60999 by
/// default) can be taken while the cluster is down: the server under test keeps reconnecting
/// during the outage, and any outgoing connection — even one to the cluster's own port, a TCP
/// self-connect — may be given it as its local port, after which PostgreSQL cannot bind it again
/// ("could not bind IPv4 address: Address already in use"). So the port comes from below that
/// range, is free when chosen, and is never handed out twice in one test process.
enum ClusterPort {
    private static let handedOut = Mutex<Set<Int>>([])

    static func reserve() throws -> Int {
        let (ephemeralLow, ephemeralHigh) = ephemeralRange()
        // Registered ports below the ephemeral range, above the well-known ones and the fixed
        // ports the scripts use (SMTP 2525/2526, PgBouncer from 6433).
        var candidates = Array(20000..<min(ephemeralLow, 32768))
        if candidates.count < 1000 { candidates += Array((ephemeralHigh + 1)..<65536) }
        let start = Int.random(in: 0..<candidates.count)
        for offset in 0..<candidates.count {
            let port = candidates[(start + offset) % candidates.count]
            let claimed = handedOut.withLock { ports in
                guard !ports.contains(port), isFree(port) else { return false }
                ports.insert(port)
                return true
            }
            if claimed { return port }
        }
        throw TestSetupError("no free TCP port outside the ephemeral range \(ephemeralLow)–\(ephemeralHigh)")
    }

    private static func ephemeralRange() -> (Int, Int) {
        let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        let numbers = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).compactMap { Int($0) }
        return numbers.count == 2 ? (numbers[0], numbers[1]) : (32768, 60999)
    }

    /// Nothing is bound to 127.0.0.1:`port` (a plain bind, without SO_REUSEADDR, succeeds).
    private static func isFree(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }
}
