import Storage
import WebAuthn

/// What every ceremony of this deployment shares, whichever service runs it.
enum CeremonyRules {
    /// A consumed challenge row must exist, be live, and belong to this ceremony and rpId;
    /// unknown, used, expired or another ceremony's → challenge_invalid (SPEC "Shapes and decisions").
    static func live(_ found: StoredChallenge?, kind: CeremonyKind, rpId: String) throws(ServiceError) -> StoredChallenge {
        guard let record = found else { throw ServiceError(.challengeInvalid, "unknown or already used challenge") }
        guard !record.expired else { throw ServiceError(.challengeInvalid, "challenge expired") }
        guard record.kind == kind, record.rpId == rpId else { throw ServiceError(.challengeInvalid, "challenge belongs to another ceremony") }
        return record
    }
}

extension CredentialDescriptor {
    /// A stored passkey as options list it (allowCredentials / excludeCredentials).
    init(_ credential: CredentialRecord) { self.init(id: credential.id, transports: credential.transports) }
}
