import Foundation

public struct UserRecord: Sendable, Equatable {
    public let id: String
    public let userHandle: [UInt8]
    public let username: String
    public let displayName: String
    public init(id: String, userHandle: [UInt8], username: String, displayName: String) {
        self.id = id; self.userHandle = userHandle; self.username = username; self.displayName = displayName
    }
}

public struct CredentialRecord: Sendable {
    public let id: [UInt8]
    public let userId: String
    public let publicKey: [UInt8]
    public let alg: Int
    public var signCount: Int64
    public let aaguid: [UInt8]
    public let transports: [String]
    public let backupEligible: Bool
    public var backedUp: Bool
    public let attestationFormat: String
    public let attestationType: String
    public let name: String
    public var flagged: Bool
    public let createdAt: Date
    public var lastUsedAt: Date?

    public init(id: [UInt8], userId: String, publicKey: [UInt8], alg: Int, signCount: Int64, aaguid: [UInt8], transports: [String],
                backupEligible: Bool, backedUp: Bool, attestationFormat: String, attestationType: String, name: String,
                flagged: Bool = false, createdAt: Date = Date(), lastUsedAt: Date? = nil) {
        self.id = id; self.userId = userId; self.publicKey = publicKey; self.alg = alg; self.signCount = signCount
        self.aaguid = aaguid; self.transports = transports; self.backupEligible = backupEligible; self.backedUp = backedUp
        self.attestationFormat = attestationFormat; self.attestationType = attestationType; self.name = name
        self.flagged = flagged; self.createdAt = createdAt; self.lastUsedAt = lastUsedAt
    }
}

/// A challenge as stored: what it was issued for. `policy` is JSON text the issuing service wrote.
public struct ChallengeRecord: Sendable {
    public let purpose: String
    public let userId: String?
    public let rpId: String
    public let policy: String
    public let expired: Bool
}

public struct AuditEntry: Sendable {
    public let id: Int64
    public let at: Date
    public let actor: String
    public let action: String
    public let subject: String?
    public let detail: String
}

public enum RefreshOutcome: Sendable {
    case rotated(userId: String, familyId: String)
    /// A token that was already used: the whole family is now revoked (RFC 9700 §4.14.2).
    case reused
    case invalid
}
