import Crypto

/// What the relying party expects. Pure configuration: no I/O; the clock is injected.
public struct VerificationPolicy: Sendable {
    public enum UserVerification: String, Sendable { case required, preferred, discouraged }

    /// Cross-origin (iframe) ceremonies: refused unless allowed, optionally only under listed top origins.
    public enum CrossOrigin: Sendable, Equatable {
        case deny
        /// `topOrigins == nil`: any top origin (inspect's `--allow-cross-origin` alone).
        case allow(topOrigins: Set<String>?)
    }

    public enum SignCountPolicy: String, Sendable { case reject, flag }

    public var rpId: String { didSet { rpIdHash = Digest.sha256(Array(rpId.utf8)) } }
    /// SHA-256 of the rpId, computed once (§7.1 step 13, §7.2 step 15 compare against it).
    public private(set) var rpIdHash: [UInt8]
    public var origins: OriginPolicy
    public var crossOrigin: CrossOrigin = .deny
    public var userVerification: UserVerification = .preferred
    /// The algorithms the options offered (`pubKeyCredParams`).
    public var allowedAlgorithms: [COSEAlgorithm] = COSEAlgorithm.credentialDefaults
    /// Attestation roots. Empty: attestation statements are verified but their chains need not
    /// end at a trusted root (the attestation type is still reported).
    public var trustAnchors: [Certificate] = []
    /// FIDO AppID (U2F `appid` extension) accepted in place of the rpId when the client says it used it.
    public var appId: String? = nil
    /// SafetyNet: require `ctsProfileMatch` and a timestamp no further than this from now.
    public var requireCTSProfileMatch = true
    public var safetyNetMaxSkewSeconds: Int64 = 60
    public var signCountPolicy: SignCountPolicy = .reject
    /// The FIDO conformance profile's one relaxation of §7.2 step 16 (SPEC "Conformance profile"):
    /// an assertion whose UP flag is clear is accepted, because the conformance tool sends such
    /// assertions under every `userVerification`. Registrations still need UP. Off everywhere else.
    public var acceptAssertionsWithoutUserPresence = false
    /// §7.1 step 14 relaxed for one registration: set only by `RegistrationCeremony.finish` when the
    /// options were for conditional create (automatic passkey upgrade, §5.1.3).
    public var acceptRegistrationWithoutUserPresence = false
    /// Authenticator metadata (FIDO MDS3) and the AAGUID / certification narrowing built on it;
    /// `.off`: attestation is trusted only as far as `trustAnchors` says.
    public var metadata: MetadataPolicy = .off
    /// Seconds since 1970; injected so verification is reproducible (attestation certificate validity, SafetyNet).
    public var clock: @Sendable () -> Int64

    public init(rpId: String, origins: OriginPolicy, clock: @escaping @Sendable () -> Int64 = VerificationPolicy.systemClock) {
        self.rpId = rpId
        self.rpIdHash = Digest.sha256(Array(rpId.utf8))
        self.origins = origins
        self.clock = clock
    }

    public static let systemClock: @Sendable () -> Int64 = {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec)
    }

}

#if canImport(Glibc)
import Glibc
#endif

/// The origin allowlist: exact matches of `https://host[:port]`, `android:apk-key-hash:…` and, in
/// development only, `http://localhost[:port]` (SPEC "Rules that must hold": Origin).
public struct OriginPolicy: Sendable, Equatable {
    public var allowed: Set<String>
    /// Also accept subdomains of allowed https origins (off by default; SPEC requires exact match).
    public var allowSubdomains = false

    public init(_ allowed: some Sequence<String>, allowSubdomains: Bool = false) {
        self.allowed = Set(allowed.map(OriginPolicy.normalize))
        self.allowSubdomains = allowSubdomains
    }

    /// Scheme and host are case-insensitive; a trailing slash is not part of an origin.
    static func normalize(_ origin: String) -> String {
        if origin.hasPrefix("android:apk-key-hash:") { return origin }
        var o = origin
        while o.hasSuffix("/") { o.removeLast() }
        return o.lowercased()
    }

    public func allows(_ origin: String) -> Bool {
        // Web origins are serialised by browsers in lower case; apk-key-hash values are case-sensitive base64url.
        if allowed.contains(origin) { return true }
        if origin.hasPrefix("android:apk-key-hash:") { return false }
        guard allowSubdomains, let (scheme, host, port) = OriginPolicy.split(origin) else { return false }
        for candidate in allowed {
            guard let (s, h, p) = OriginPolicy.split(candidate), s == scheme, p == port else { continue }
            if host.hasSuffix("." + h) { return true }
        }
        return false
    }

    static func split(_ origin: String) -> (String, String, String)? {
        let parts = origin.split(separator: "/", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].hasSuffix(":"), parts[1].isEmpty else { return nil }
        let scheme = String(parts[0].dropLast())
        let rest = parts[2]
        guard !rest.contains("/") else { return nil }
        if let colon = rest.lastIndex(of: ":") { return (scheme, String(rest[..<colon]), String(rest[rest.index(after: colon)...])) }
        return (scheme, String(rest), "")
    }
}
