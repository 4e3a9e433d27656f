/// A native app declared as associated with the relying party: the one declaration from which the
/// origin allowlist entries and both association files follow (issue: native-app association).
public enum AssociatedApp: Sendable, Hashable {
    case ios(IOSApp)
    case android(AndroidApp)

    /// Stable identifier used by the admin API and the CLI: `ios:TEAMID.bundle.id`, `android:package.name`.
    public var identifier: String {
        switch self {
        case .ios(let a): "ios:" + a.appID
        case .android(let a): "android:" + a.packageName
        }
    }

    public var platform: String {
        switch self {
        case .ios: "ios"
        case .android: "android"
        }
    }

    /// The allowlist entries this app needs. iOS apps report `https://<rpId>` (SPEC: allowlisted
    /// when an iOS app is declared); Android apps report one `android:apk-key-hash:` per signing key.
    public func origins(rpId: String) -> [String] {
        switch self {
        case .ios: ["https://" + rpId]
        case .android(let a): a.fingerprints.map(\.origin)
        }
    }
}

/// iOS: Team ID + bundle id → the `webcredentials` appID `TEAMID.bundle.id`.
public struct IOSApp: Sendable, Hashable {
    public let teamId: String
    public let bundleId: String
    public var appID: String { teamId + "." + bundleId }

    public init(teamId: String, bundleId: String) throws(WellKnownError) {
        guard Self.isTeamId(teamId) else {
            throw WellKnownError(.teamId, "Team ID '\(teamId.prefix(40))' must be 10 characters A–Z/0–9 (developer.apple.com → Membership)")
        }
        guard Self.isBundleId(bundleId) else {
            throw WellKnownError(.bundleId, "bundle id '\(bundleId.prefix(120))' must be reverse-DNS like com.example.app (letters, digits, '-' and '.')")
        }
        self.teamId = teamId
        self.bundleId = bundleId
    }

    /// `TEAMID.bundle.id` as written in `apple-app-site-association`.
    public init(appID: String) throws(WellKnownError) {
        guard let dot = appID.firstIndex(of: "."), Self.isTeamId(String(appID[..<dot])) else {
            throw WellKnownError(.appId, "appID '\(appID.prefix(120))' must be TEAMID.bundle.id (a 10-character Team ID, a dot, the bundle id)")
        }
        try self.init(teamId: String(appID[..<dot]), bundleId: String(appID[appID.index(after: dot)...]))
    }

    static func isTeamId(_ s: String) -> Bool {
        s.utf8.count == 10 && s.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) }
    }

    static func isBundleId(_ s: String) -> Bool {
        let parts = s.split(separator: ".", omittingEmptySubsequences: false)
        return s.utf8.count <= 255 && parts.count >= 2 && parts.allSatisfy { p in
            !p.isEmpty && p.utf8.allSatisfy { c in
                (0x30...0x39).contains(c) || (0x41...0x5A).contains(c) || (0x61...0x7A).contains(c) || c == 0x2D
            }
        }
    }
}

/// Android: package name + every SHA-256 signing-certificate fingerprint the app may be signed
/// with (upload key, Play app-signing key, several for hybrid signing).
public struct AndroidApp: Sendable, Hashable {
    public let packageName: String
    public let fingerprints: [SigningCertificateFingerprint]
    /// Adds `delegate_permission/common.handle_all_urls` (App Links) next to `get_login_creds`.
    public let handleAllURLs: Bool

    public init(packageName: String, fingerprints: [SigningCertificateFingerprint], handleAllURLs: Bool = false) throws(WellKnownError) {
        guard Self.isPackageName(packageName) else {
            throw WellKnownError(.packageName, "package name '\(packageName.prefix(120))' must be like com.example.app "
                                 + "(two or more segments, each starting with a letter; letters, digits, '_')")
        }
        guard !fingerprints.isEmpty else {
            throw WellKnownError(.fingerprint, "an Android app needs at least one fingerprint: \(SigningCertificateFingerprint.expectedForm)")
        }
        self.packageName = packageName
        var seen = Set<SigningCertificateFingerprint>()
        self.fingerprints = fingerprints.filter { seen.insert($0).inserted }
        self.handleAllURLs = handleAllURLs
    }

    static func isPackageName(_ s: String) -> Bool {
        let parts = s.split(separator: ".", omittingEmptySubsequences: false)
        return s.utf8.count <= 255 && parts.count >= 2 && parts.allSatisfy { p in
            guard let first = p.utf8.first, (0x41...0x5A).contains(first) || (0x61...0x7A).contains(first) else { return false }
            return p.utf8.allSatisfy { c in
                (0x30...0x39).contains(c) || (0x41...0x5A).contains(c) || (0x61...0x7A).contains(c) || c == 0x5F
            }
        }
    }
}
