import Crypto

/// How authenticator metadata narrows registration (SPEC "Authenticator metadata"): a plain value
/// built once from configuration (or inline by a test) and carried in `VerificationPolicy.metadata`.
/// `.off` changes nothing.
public struct MetadataPolicy: Sendable {
    public enum Source: Sendable {
        /// No metadata configured.
        case off
        /// Configured, but no good BLOB has loaded yet: attested registrations fail closed.
        case unavailable(reason: String)
        /// A verified BLOB.
        case loaded(MetadataBLOB)
    }

    public var source: Source
    /// `LATCHKEY_AUTHENTICATORS_ALLOW`: when set, only these AAGUIDs register.
    public var allowedAAGUIDs: Set<[UInt8]>?
    /// `LATCHKEY_AUTHENTICATORS_DENY`: these AAGUIDs never register.
    public var deniedAAGUIDs: Set<[UInt8]>
    /// `LATCHKEY_REQUIRE_CERTIFIED`: the entry's certification level must be at least this.
    public var requiredCertification: CertificationLevel?
    /// `LATCHKEY_MDS_CRLS`: applied to attestation chains as well as the BLOB's.
    public var crls: [CertificateRevocationList]

    public init(source: Source = .off, allowedAAGUIDs: Set<[UInt8]>? = nil, deniedAAGUIDs: Set<[UInt8]> = [],
                requiredCertification: CertificationLevel? = nil, crls: [CertificateRevocationList] = []) {
        self.source = source
        self.allowedAAGUIDs = allowedAAGUIDs
        self.deniedAAGUIDs = deniedAAGUIDs
        self.requiredCertification = requiredCertification
        self.crls = crls
    }

    public static let off = MetadataPolicy()

    /// Metadata from a verified BLOB, with nothing else narrowed.
    public static func loaded(_ blob: MetadataBLOB) -> MetadataPolicy { MetadataPolicy(source: .loaded(blob)) }

    /// Whether anything here can refuse a registration.
    public var isActive: Bool {
        if case .off = source, allowedAAGUIDs == nil, deniedAAGUIDs.isEmpty, requiredCertification == nil { return false }
        return true
    }

    public var blob: MetadataBLOB? { if case .loaded(let b) = source { return b } else { return nil } }
}

/// Which metadata statement vouched for a registration, and how (`VerifiedRegistration.metadata`).
public struct MetadataMatch: Sendable {
    public enum Key: Sendable, Equatable {
        case aaguid([UInt8])
        case keyIdentifier(String)
    }

    public let entry: MetadataEntry
    public let matchedBy: Key
    public let latestStatus: StatusReport?
    /// The statement root the attestation chained to; nil for self (surrogate) and `none` attestation.
    public let anchor: Certificate?

    /// The statement's `description` (the passkey list's `provider`).
    public var description: String? { entry.statement?.description }
}
