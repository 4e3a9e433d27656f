import Foundation

/// The Public Suffix List (https://publicsuffix.org/list/), as Debian's `publicsuffix` package ships
/// it: which hosts are public suffixes (`com`, `co.uk`, `github.io`), so that `LATCHKEY_RP_ID` is
/// never one and a related origin has a registrable domain (SPEC "Rules that must hold").
///
/// The algorithm is the list's own: a rule matches when its labels equal the host's rightmost
/// labels (`*` matches any one label); an exception rule (`!www.ck`) wins and its suffix is the
/// rule minus its leftmost label; otherwise the matching rule with the most labels; no match is the
/// implicit rule `*` (the last label). Rules with non-ASCII labels are kept in their A-label form
/// (RFC 3492 Punycode), since hosts are compared as ASCII.
public struct PublicSuffixList: Sendable {
    /// Debian's `publicsuffix` package (scripts/install-deps.sh installs it).
    public static let debianPath = "/usr/share/publicsuffix/public_suffix_list.dat"

    private var rules: Set<String> = []
    /// `*.kobe.jp` is kept as `kobe.jp`.
    private var wildcards: Set<String> = []
    /// `!city.kobe.jp` is kept as `city.kobe.jp`.
    private var exceptions: Set<String> = []

    public var ruleCount: Int { rules.count + wildcards.count + exceptions.count }

    /// Parses the list's text: one rule per line, its first whitespace-separated token; `//` comments.
    public init(text: String) {
        for line in text.split(whereSeparator: \.isNewline) {
            guard let token = line.split(whereSeparator: \.isWhitespace).first, !token.hasPrefix("//") else { continue }
            let rule = token.lowercased().split(separator: ".", omittingEmptySubsequences: false)
                .map { label in label.hasPrefix("!") ? "!" + Punycode.aLabel(String(label.dropFirst())) : Punycode.aLabel(String(label)) }
                .joined(separator: ".")
            if rule.hasPrefix("!") {
                exceptions.insert(String(rule.dropFirst()))
            } else if rule.hasPrefix("*.") {
                wildcards.insert(String(rule.dropFirst(2)))
            } else if !rule.isEmpty {
                rules.insert(rule)
            }
        }
    }

    /// The list at `path`, nil when it cannot be read or holds no rule.
    public static func load(path: String = debianPath) -> PublicSuffixList? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        let list = PublicSuffixList(text: String(decoding: data, as: UTF8.self))
        return list.ruleCount > 0 ? list : nil
    }

    /// Debian's list, read once per process (nil when the package is not installed).
    public static let system: PublicSuffixList? = load()

    /// The public suffix of a lower-case ASCII host name (`www.example.co.uk` → `co.uk`).
    public func publicSuffix(of host: String) -> String {
        let labels = host.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        // An exception rule is the prevailing rule when one matches; its suffix drops its leftmost label.
        for k in stride(from: labels.count, through: 1, by: -1) where exceptions.contains(labels.suffix(k).joined(separator: ".")) {
            return labels.suffix(max(1, k - 1)).joined(separator: ".")
        }
        var length = 1
        for k in 1...labels.count {
            if rules.contains(labels.suffix(k).joined(separator: ".")) { length = k }
            if k >= 2, wildcards.contains(labels.suffix(k - 1).joined(separator: ".")) { length = k }
        }
        return labels.suffix(max(1, length)).joined(separator: ".")
    }

    /// The host is itself a public suffix (`com`, `co.uk`, `github.io`): no site may claim it.
    public func isPublicSuffix(_ host: String) -> Bool { publicSuffix(of: host) == host }

    /// The public suffix plus one label (`www.example.co.uk` → `example.co.uk`); nil for a public suffix.
    public func registrableDomain(of host: String) -> String? {
        let suffix = publicSuffix(of: host)
        guard host != suffix, host.hasSuffix("." + suffix) else { return nil }
        let rest = host.dropLast(suffix.count + 1)
        return String(rest.split(separator: ".").last ?? Substring(rest)) + "." + suffix
    }
}

/// RFC 3492 Punycode, the encoding direction only: a Unicode label → `xn--…` (labels that are
/// already ASCII are returned as they are).
enum Punycode {
    static func aLabel(_ label: String) -> String {
        let scalars = Array(label.unicodeScalars)
        guard scalars.contains(where: { !$0.isASCII }) else { return label }
        let base = 36, tMin = 1, tMax = 26, skew = 38, damp = 700
        func digit(_ d: Int) -> Character { Character(UnicodeScalar(UInt8(d < 26 ? 97 + d : 22 + d))) }
        func adapt(_ delta: Int, _ count: Int, _ first: Bool) -> Int {
            var delta = first ? delta / damp : delta / 2
            delta += delta / count
            var k = 0
            while delta > ((base - tMin) * tMax) / 2 { delta /= base - tMin; k += base }
            return k + (base - tMin + 1) * delta / (delta + skew)
        }
        var output = String(String.UnicodeScalarView(scalars.filter(\.isASCII)))
        let basic = output.unicodeScalars.count
        var handled = basic
        if basic > 0 { output.append("-") }
        var n = 128, delta = 0, bias = 72
        while handled < scalars.count {
            let m = scalars.map { Int($0.value) }.filter { $0 >= n }.min()!
            delta += (m - n) * (handled + 1)
            n = m
            for c in scalars.map({ Int($0.value) }) {
                if c < n { delta += 1 }
                if c == n {
                    var q = delta, k = base
                    while true {
                        let t = k <= bias ? tMin : (k >= bias + tMax ? tMax : k - bias)
                        if q < t { break }
                        output.append(digit(t + (q - t) % (base - t)))
                        q = (q - t) / (base - t)
                        k += base
                    }
                    output.append(digit(q))
                    bias = adapt(delta, handled + 1, handled == basic)
                    delta = 0
                    handled += 1
                }
            }
            delta += 1
            n += 1
        }
        return "xn--" + output
    }
}
