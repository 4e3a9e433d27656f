import Foundation
import LatchkeyServer
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// SPEC "Assurance" ("Outside dev mode"): webhook URLs must not point inside, in any notation an
/// HTTP client accepts. Pure: parsing and the policy, no socket, no DNS.
@Suite("Webhook address policy")
struct WebhookAddressPolicyTests {
    static let production = WebhookAddressPolicy(developmentMode: false, allowPrivate: false)
    static let onPremises = WebhookAddressPolicy(developmentMode: false, allowPrivate: true)
    static let development = WebhookAddressPolicy(developmentMode: true, allowPrivate: false)

    static func v4(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) -> IPAddress { IPAddress(bytes: [a, b, c, d])! }

    /// Why `url` is refused at creation under `policy`, nil when it is accepted.
    static func refusal(_ url: String, _ policy: WebhookAddressPolicy = production) -> String? {
        do {
            try policy.check(try WebhookURL(parsing: url))
            return nil
        } catch {
            return error.code == .invalidRequest ? error.detail : "wrong code \(error.code): \(error.detail)"
        }
    }

    // MARK: Notations

    /// Every IPv4 spelling WHATWG's host parser, curl 7.88 and glibc's inet_aton agree is 127.0.0.1 / 10.0.0.1.
    @Test(arguments: [
        ("127.0.0.1", 0x7F00_0001), ("127.0.0.1.", 0x7F00_0001), ("127.1", 0x7F00_0001), ("127.0.1", 0x7F00_0001),
        ("2130706433", 0x7F00_0001), ("0x7f000001", 0x7F00_0001), ("0X7F000001", 0x7F00_0001), ("0x7f.1", 0x7F00_0001),
        ("0177.0.0.1", 0x7F00_0001), ("0177.1", 0x7F00_0001), ("017700000001", 0x7F00_0001), ("0x7f.0.0.0x1", 0x7F00_0001),
        ("10.1", 0x0A00_0001), ("012.1", 0x0A00_0001), ("167772161", 0x0A00_0001), ("169.254.43518", 0xA9FE_A9FE),
        ("0", 0), ("0x", 0), ("0.0.0.0", 0), ("255.255.255.255", 0xFFFF_FFFF), ("4294967295", 0xFFFF_FFFF),
    ] as [(String, UInt32)])
    func ipv4Notations(text: String, value: UInt32) {
        #expect(IPAddress.ipv4(host: text[...]) == .address(value), "\(text)")
        // glibc reads the same (it has no trailing-dot form); getaddrinfo takes numeric hosts through it.
        if !text.hasSuffix("."), text != "0x" {
            var parsed = in_addr()
            #expect(inet_aton(text, &parsed) == 1 && UInt32(bigEndian: parsed.s_addr) == value, "inet_aton(\(text))")
        }
    }

    @Test(arguments: ["1.2.3.256", "256.0.0.1", "1.2.3.4.5", "0x100000000", "4294967296", "08.0.0.1", "1..2", "example.0x1",
                      "example.123", "1.2.3.09", ".1"])
    func hostsThatEndInANumberButAreNoAddress(text: String) {
        #expect(IPAddress.ipv4(host: text[...]) == .invalid, "\(text)")
    }

    @Test(arguments: ["example.com", "1e100.net", "0x7f.example", "hooks.example.", "127.0.0.1.nip.io", "a-1.b_2.test"])
    func namesAreNames(text: String) {
        #expect(IPAddress.ipv4(host: text[...]) == .name, "\(text)")
    }

    /// IPv6 text as glibc's inet_pton (what libcurl uses between brackets) reads it: the same
    /// addresses accepted, the same refused.
    @Test(arguments: [
        "::", "::1", "1::", "::ffff:127.0.0.1", "::ffff:7f00:1", "64:ff9b::10.0.0.1", "fe80::1", "2001:db8::1",
        "1:2:3:4:5:6:7:8", "::1:2:3:4:5:6:7", "1:2:3:4:5:6:7::", "FE80::ABCD:0:0:1", "2606:4700::1111", "::127.0.0.1",
        "0:0:0:0:0:ffff:169.254.169.254", "1:2:3:4:5:6:1.2.3.4",
        ":::", "1:2:3:4:5:6:7:8:9", "1::2::3", "12345::", ":1::", "1:", "::ffff:127.0.0.01", "::ffff:127.1", "::ffff:1.2.3.4.5",
        "1:2:3:4:5:6:7:1.2.3.4", "fe80::1%eth0", "g::1", "1:2:3:4:5:6:7:8::", "", "::1.2.3.256",
    ])
    func ipv6MatchesInetPton(text: String) {
        var expected = in6_addr()
        let glibc = inet_pton(AF_INET6, text, &expected) == 1
        let ours = IPAddress(ipv6: text[...])
        #expect((ours != nil) == glibc, "\(text): ours \(ours.map(\.description) ?? "refused"), glibc \(glibc ? "accepts" : "refuses")")
        if let ours, glibc {
            #expect(ours.bytes == withUnsafeBytes(of: expected) { Array($0) }, "\(text)")
        }
    }

    @Test func descriptionsAreRFC5952() throws {
        func text(_ s: String) throws -> String { try #require(IPAddress(ipv6: s[...])).description }
        #expect(try text("2001:0DB8:0000:0000:0000:0000:0000:0001") == "2001:db8::1")
        #expect(try text("2001:db8:0:1:1:1:1:1") == "2001:db8:0:1:1:1:1:1")
        #expect(try text("2001:0:0:1:0:0:0:1") == "2001:0:0:1::1")
        #expect(try text("::") == "::" && text("::1") == "::1" && text("1::") == "1::")
        #expect(try text("0:0:0:0:0:ffff:7f00:1") == "::ffff:127.0.0.1")
        #expect(Self.v4(169, 254, 169, 254).description == "169.254.169.254")
        #expect(IPAddress(numeric: "10.0.0.1") == Self.v4(10, 0, 0, 1) && IPAddress(numeric: "fe80::1")?.description == "fe80::1")
    }

    // MARK: Creation, outside dev mode

    /// Loopback, RFC 1918, link-local (cloud metadata), CGNAT, this-network, broadcast, multicast, reserved;
    /// IPv6 loopback, unspecified, unique-local, link-local, multicast; IPv4 inside IPv6 (mapped, compatible,
    /// NAT64, 6to4); and localhost — each in several notations.
    @Test(arguments: [
        "https://127.0.0.1/hooks", "https://127.0.0.1./hooks", "https://127.1/", "https://127.0.1/", "https://2130706433/",
        "https://0x7f000001/", "https://0x7F.1/", "https://0177.0.0.1/", "https://0177.1/", "https://127.255.255.254:8443/x",
        "https://10.0.0.1/", "https://10.1/", "https://012.0.0.1/", "https://167772161/", "https://172.16.0.1/",
        "https://172.31.255.255/", "https://192.168.1.1/", "https://192.168.257/", "https://169.254.169.254/latest/meta-data/",
        "https://169.254.43518/", "https://0xa9fea9fe/", "https://100.64.0.1/", "https://100.127.255.255/",
        "https://0.0.0.0/", "https://0/", "https://0x0/", "https://0.1.2.3/", "https://255.255.255.255/", "https://4294967295/",
        "https://224.0.0.1/", "https://239.255.255.250/", "https://240.0.0.1/", "https://192.0.0.8/", "https://198.18.0.1/",
        "https://[::1]/", "https://[0:0:0:0:0:0:0:1]/", "https://[::]/", "https://[::ffff:127.0.0.1]/", "https://[::ffff:7f00:1]/",
        "https://[::FFFF:A9FE:A9FE]/", "https://[::ffff:10.0.0.1]:8443/", "https://[::127.0.0.1]/", "https://[::7f00:1]/",
        "https://[64:ff9b::10.0.0.1]/", "https://[64:ff9b::a00:1]/", "https://[64:ff9b::7f00:1]/", "https://[2002:7f00:1::]/",
        "https://[2002:a9fe:a9fe::1]/", "https://[fe80::1]/", "https://[febf::1]/", "https://[fc00::1]/", "https://[fd12:3456::1]/",
        "https://[ff02::1]/", "https://[ff05::1:3]/", "https://[fec0::1]/", "https://[100::1]/", "https://[2001:db8::1]/",
        "https://[2001::1]/", "https://localhost/", "https://LOCALHOST/", "https://localhost./", "https://api.localhost/",
        "https://a.b.localhost.:8443/", "HTTPS://127.0.0.1/",
    ])
    func insideIsRefused(url: String) {
        let reason = Self.refusal(url)
        #expect(reason?.contains("must not point inside") == true, "\(url): \(reason ?? "accepted")")
        // LATCHKEY_WEBHOOK_ALLOW_PRIVATE=1 lifts it (https still required), and so does dev mode.
        #expect(Self.refusal(url, Self.onPremises) == nil, "\(url) with ALLOW_PRIVATE")
        #expect(Self.refusal(url, Self.development) == nil, "\(url) in dev mode")
    }

    @Test(arguments: [
        "https://93.184.216.34/hooks", "https://8.8.8.8:8443/x", "https://1.1/", "https://[2606:4700::1]/", "https://[2a00:1450:4001::200e]:443/",
        "https://[::ffff:93.184.216.34]/", "https://[64:ff9b::93.184.216.34]/", "https://[2002:5db8:d822::1]/",
        "https://hooks.example.com/x", "https://hooks.example.com./x", "https://10.example.com/", "https://hooks.internal/",
        "https://xn--bcher-kva.example/", "https://localhost.example.com/", "https://my-localhost/", "https://Hooks.Example.COM:8443/a?b=c",
    ])
    func publicLiteralsAndNamesAreAccepted(url: String) {
        #expect(Self.refusal(url) == nil, "\(url): \(Self.refusal(url) ?? "")")
    }

    /// Refused in every mode: what an HTTP client might read in more than one way.
    @Test(arguments: [
        "https://1.2.3.256/", "https://[fe80::1%25eth0]/", "https://[::1%lo]/", "https://%31%32%37.0.0.1/", "https://127.0.0.1\\@evil.example/",
        "https://evil.example\\.127.0.0.1/", "https://user@hooks.example/", "https://hooks.example:pass@127.0.0.1/", "https://exa mple/",
        "https://bücher.example/", "https://example.0x1/", "https://hooks.example:0/", "https://hooks.example:99999/",
        "https://hooks.example:+80/", "https://hooks.example:/", "https://a..b/", "https://[::1/", "https://[::1]x/", "https:///x",
        "https://hooks.example/#frag", "https://1.2.3.4../", "ftp://hooks.example/", "hooks.example/x", "https://[1:2:3:4:5:6:7:8:9]/",
    ])
    func ambiguousURLsAreRefused(url: String) {
        for policy in [Self.production, Self.onPremises, Self.development] {
            let reason = Self.refusal(url, policy)
            #expect(reason != nil && reason?.contains("must not point inside") == false, "\(url): \(reason ?? "accepted")")
        }
    }

    @Test func httpIsForLoopbackInDevelopmentModeOnly() {
        for url in ["http://127.0.0.1:9/x", "http://127.1:9/", "http://localhost:9/", "http://[::1]:9/", "http://[::ffff:127.0.0.1]:9/"] {
            #expect(Self.refusal(url, Self.development) == nil, "\(url)")
            #expect(Self.refusal(url)?.contains("https://") == true, "\(url)")
            #expect(Self.refusal(url, Self.onPremises)?.contains("https://") == true, "\(url)")
        }
        for url in ["http://10.0.0.1/", "http://hooks.example.com/", "http://api.localhost/", "http://[fe80::1]/"] {
            #expect(Self.refusal(url, Self.development)?.contains("https://") == true, "\(url)")
        }
    }

    // MARK: Delivery: every resolved address

    @Test func everyResolvedAddressIsChecked() throws {
        let url = try WebhookURL(parsing: "https://hooks.example.com/x")
        let public4 = Self.v4(93, 184, 216, 34), public6 = try #require(IPAddress(numeric: "2606:4700::1"))
        #expect(try Self.production.check(url, resolvedTo: [public4, public6]).addresses == [public4, public6])
        // One inside address among public ones refuses the attempt, naming it.
        for inside in [Self.v4(127, 0, 0, 1), Self.v4(10, 0, 0, 7), Self.v4(169, 254, 169, 254), Self.v4(100, 64, 0, 1),
                       IPAddress(numeric: "::1")!, IPAddress(numeric: "fd00::1")!, IPAddress(numeric: "::ffff:192.168.0.1")!,
                       IPAddress(numeric: "64:ff9b::a9fe:a9fe")!] {
            #expect {
                _ = try Self.production.check(url, resolvedTo: [public4, inside])
            } throws: { error in
                guard let e = error as? ServiceError else { return false }
                return e.detail.contains("refused: hooks.example.com resolves to \(inside)")
            }
            #expect(try Self.onPremises.check(url, resolvedTo: [public4, inside]).addresses.count == 2)
        }
        #expect(throws: ServiceError.self) { _ = try Self.production.check(url, resolvedTo: []) }
        // The URL's own rules hold at delivery too (a stored http:// URL outside dev mode).
        let http = try WebhookURL(parsing: "http://localhost:9/")
        #expect(throws: ServiceError.self) { _ = try Self.production.check(http, resolvedTo: [Self.v4(127, 0, 0, 1)]) }
        #expect(try Self.development.check(http, resolvedTo: [Self.v4(127, 0, 0, 1), IPAddress(numeric: "::1")!]).addresses.count == 2)
        // Dev mode's http:// goes to loopback only, whatever the name resolves to.
        #expect(throws: ServiceError.self) { _ = try Self.development.check(http, resolvedTo: [Self.v4(10, 0, 0, 1)]) }
    }

    @Test func resolvers() throws {
        let table = HostResolver.table(["hooks.latchkey.test": [Self.v4(127, 0, 0, 1)]])
        #expect(try table.addresses(of: "HOOKS.latchkey.test.").get() == [Self.v4(127, 0, 0, 1)])
        #expect(throws: HostResolver.Failure.self) { try table.addresses(of: "other.latchkey.test").get() }
        // The system resolver: numeric hosts and /etc/hosts' localhost need no DNS.
        #expect(try HostResolver.system.addresses(of: "127.0.0.1").get() == [Self.v4(127, 0, 0, 1)])
        #expect(try HostResolver.system.addresses(of: "localhost").get().allSatisfy(\.isLoopback))
    }
}
