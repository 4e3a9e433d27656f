import Crypto
import JSON

/// The diagnostic behind `latchkey inspect`: verifies one credential JSON against an explicit
/// configuration and reports every decoded field and every check, whatever the outcome.
public enum Inspection {
    public enum Ceremony: String, Sendable { case registration, authentication }

    public struct Options: Sendable {
        public var ceremony: Ceremony
        public var rpId: String
        public var origins: [String]
        public var challenge: [UInt8]
        public var publicKey: [UInt8]? = nil
        public var signCount: UInt32 = 0
        public var at: Int64? = nil
        public var trustAnchors: [Certificate] = []
        public var requireUserVerification = false
        /// Empty: every algorithm Latchkey implements for credentials.
        public var algorithms: [COSEAlgorithm] = []
        public var allowCrossOrigin = false
        public var topOrigins: [String] = []
        public var appId: String? = nil
        public var allowSubdomainOrigins = false
        /// Authenticator metadata to apply (`--mds`); the report says which statement matched.
        public var metadata: MetadataPolicy = .off

        public init(ceremony: Ceremony, rpId: String, origins: [String], challenge: [UInt8]) {
            self.ceremony = ceremony
            self.rpId = rpId
            self.origins = origins
            self.challenge = challenge
        }
    }

    /// Every credential algorithm Latchkey verifies (RS1 stays inside attestation statements).
    public static let implementedAlgorithms: [COSEAlgorithm] = [
        .es256, .es384, .es512, .edDSA, .ed25519, .rs256, .rs384, .rs512, .ps256, .ps384, .ps512,
    ]

    public struct Report: Sendable {
        public let verified: Bool
        public let error: WebAuthnError?
        public let json: JSONValue
    }

    public static func run(_ input: [UInt8], options: Options) -> Report {
        var policy = VerificationPolicy(rpId: options.rpId,
                                        origins: OriginPolicy(options.origins, allowSubdomains: options.allowSubdomainOrigins))
        if let at = options.at { policy.clock = { at } }
        policy.trustAnchors = options.trustAnchors
        policy.userVerification = options.requireUserVerification ? .required : .preferred
        policy.allowedAlgorithms = options.algorithms.isEmpty ? implementedAlgorithms : options.algorithms
        if options.allowCrossOrigin {
            policy.crossOrigin = .allow(topOrigins: options.topOrigins.isEmpty ? nil : Set(options.topOrigins))
        }
        policy.appId = options.appId
        policy.metadata = options.metadata

        let trace = VerificationTrace()
        var result: [(key: String, value: JSONValue)] = []
        var failure: WebAuthnError? = nil
        do throws(WebAuthnError) {
            switch options.ceremony {
            case .registration:
                let parsed = try ParsedRegistration(bytes: input)
                trace.record("parse", true)
                let verified = try RegistrationVerifier.verify(parsed, expectedChallenge: options.challenge, policy: policy, trace: trace)
                result = [
                    ("credentialId", .string(Base64URL.encode(verified.credentialId))),
                    ("publicKey", .string(Base64URL.encode(verified.publicKeyBytes))),
                    ("alg", .number(Double(verified.algorithm.rawValue))),
                    ("signCount", .number(Double(verified.signCount))),
                    ("userVerified", .bool(verified.userVerified)),
                    ("backupEligible", .bool(verified.backupEligible)), ("backedUp", .bool(verified.backedUp)),
                    ("aaguid", .string(formatUUID(verified.aaguid))), ("format", .string(verified.format)),
                    ("attestationType", .string(verified.attestationType.rawValue)),
                    ("trustPathLength", .number(Double(verified.trustPath.count))),
                    ("transports", .array(verified.transports.map { .string($0) })),
                ]
                if let match = verified.metadata { result.append(("metadata", metadataMatchJSON(match))) }
            case .authentication:
                let parsed = try ParsedAuthentication(bytes: input)
                trace.record("parse", true)
                guard let keyBytes = options.publicKey else { throw WebAuthnError.invalid("--public-key is required") }
                let key = try COSEKey(bytes: keyBytes)
                let stored = StoredCredential(publicKey: key, signCount: options.signCount)
                let verified = try AuthenticationVerifier.verify(parsed, expectedChallenge: options.challenge, stored: stored,
                                                                 policy: policy, trace: trace)
                result = [
                    ("credentialId", .string(Base64URL.encode(verified.credentialId))),
                    ("newSignCount", .number(Double(verified.newSignCount))),
                    ("userVerified", .bool(verified.userVerified)),
                    ("backupEligible", .bool(verified.backupEligible)), ("backedUp", .bool(verified.backedUp)),
                    ("cloneWarning", .bool(verified.cloneWarning)),
                ]
                if let handle = verified.userHandle { result.append(("userHandle", .string(Base64URL.encode(handle)))) }
            }
        } catch {
            failure = error
            if trace.checks.isEmpty { trace.record("parse", false, error.reason) }
        }
        var report: [(key: String, value: JSONValue)] = [
            ("ceremony", .string(options.ceremony.rawValue)),
            ("verified", .bool(failure == nil)),
            ("decoded", .object(trace.decoded)),
            ("checks", .array(trace.checks.map { check in
                var m: [(key: String, value: JSONValue)] = [("check", .string(check.name)), ("passed", .bool(check.passed))]
                if !check.detail.isEmpty { m.append(("detail", .string(check.detail))) }
                return .object(m)
            })),
        ]
        if let failure {
            report.append(("error", .object([("code", .string(failure.code.rawValue)), ("reason", .string(failure.reason))])))
        } else {
            report.append(("result", .object(result)))
        }
        return Report(verified: failure == nil, error: failure, json: .object(report))
    }
}

#if canImport(Glibc)
import Glibc
#endif

extension Inspection {
    /// Seconds since 1970 for an RFC 3339 / ISO 8601 UTC time such as `2021-09-03T21:07:20.057Z`
    /// (fractions are truncated; an explicit `+hh:mm` offset is applied).
    public static func parseISO8601(_ text: String) -> Int64? {
        let chars = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= chars.count else { return nil }
            var v = 0
            for i in range { guard (48...57).contains(chars[i]) else { return nil }; v = v * 10 + Int(chars[i] - 48) }
            return v
        }
        guard chars.count >= 19, chars[4] == 45, chars[7] == 45, chars[10] == 84 || chars[10] == 116 || chars[10] == 32,
              chars[13] == 58, chars[16] == 58,
              let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
        var i = 19
        if i < chars.count, chars[i] == 46 { i += 1; while i < chars.count, (48...57).contains(chars[i]) { i += 1 } }
        var offset = 0
        if i < chars.count, chars[i] == 90 || chars[i] == 122 {
            i += 1
        } else if i + 6 == chars.count, chars[i] == 43 || chars[i] == 45, chars[i + 3] == 58,
                  let oh = number(i + 1..<i + 3), let om = number(i + 4..<i + 6) {
            offset = (oh * 3600 + om * 60) * (chars[i] == 43 ? 1 : -1)
            i += 6
        } else {
            return nil
        }
        guard i == chars.count else { return nil }
        var t = tm()
        t.tm_year = Int32(year - 1900); t.tm_mon = Int32(month - 1); t.tm_mday = Int32(day)
        t.tm_hour = Int32(hour); t.tm_min = Int32(minute); t.tm_sec = Int32(second)
        return Int64(timegm(&t)) - Int64(offset)
    }
}

/// Which statement vouched for a registration, for `inspect` and the audit line.
public func metadataMatchJSON(_ match: MetadataMatch) -> JSONValue {
    let matchedBy: JSONValue
    switch match.matchedBy {
    case .aaguid(let a): matchedBy = .object([("aaguid", .string(formatUUID(a)))])
    case .keyIdentifier(let id): matchedBy = .object([("attestationCertificateKeyIdentifier", .string(id))])
    }
    return .object([
        ("description", match.description.map { .string($0) } ?? .null),
        ("matchedBy", matchedBy),
        ("latestStatus", match.latestStatus.map { .string($0.status.rawValue) } ?? .null),
        ("certification", match.entry.certification.map { .string($0.rawValue) } ?? .null),
        ("anchor", match.anchor.map { .string($0.commonName) } ?? .null),
    ])
}
