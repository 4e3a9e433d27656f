/// Why an app declaration, a fingerprint or an origin is refused. `reason` names the expected form
/// and is safe to show to an admin; equality compares `code` only (STYLE §3).
public struct WellKnownError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let fingerprint = Code("invalid_fingerprint")
        public static let teamId = Code("invalid_team_id")
        public static let bundleId = Code("invalid_bundle_id")
        public static let packageName = Code("invalid_package_name")
        public static let appId = Code("invalid_app_id")
    }

    public let code: Code
    public let reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { reason }
    public static func == (a: WellKnownError, b: WellKnownError) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
