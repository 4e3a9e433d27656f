import Storage

/// SPEC "Assurance", the last way in: an account's last passkey cannot be revoked while it has no
/// unused recovery code and no verified address that counts (a verified address counts only while
/// email recovery is available: SMTP configured, or dev mode's mail folder). Answered 409
/// `last_passkey` before the step-up is asked (one read, `refuseLastWayIn`, which also reads what
/// the revocation's notice needs and hands it on), and decided again by the revoking statement on
/// the account's locked passkey rows (`lastWayInRule`).
extension PasskeyService {
    static let lastWayInDetail =
        "this passkey is the account's last way in (no other passkey, no unused recovery code, no verified address for email recovery): add a recovery method or another passkey first"

    /// What the revoking statement keeps.
    var lastWayInRule: LastWayInRule { LastWayInRule(addressCounts: policy.mailEnabled) }

    /// Whether revoking the passkey `ways` was read for would leave the account no way in.
    static func isLastWayIn(_ ways: WaysIn, addressCounts: Bool) -> Bool {
        ways.known && !ways.otherPasskey && !ways.recoveryCode && !(addressCounts && ways.verifiedAddress)
    }

    /// 409 `last_passkey` when revoking `credentialId` would take the account's last way in; an
    /// unknown passkey passes (the revocation answers 404 after the step-up). Returns what it read,
    /// for the revocation (`revokePasskey(loaded:)`).
    func refuseLastWayIn(userId: String, credentialId: [UInt8]) throws(ServiceError) -> LoadedRevocation {
        let read = try storage { () throws(StorageError) in try store.revocationRead(userId: userId, credentialId: credentialId) }
        return try refuseLastWayIn(LoadedRevocation(userId: userId, credentialId: credentialId, read: read))
    }

    /// The same decision on what another read already loaded (the admin's guard reads it with the
    /// admin's role, `AdminPageRequest.passkeyRevocation`).
    func refuseLastWayIn(_ loaded: LoadedRevocation) throws(ServiceError) -> LoadedRevocation {
        if Self.isLastWayIn(loaded.read.ways, addressCounts: lastWayInRule.addressCounts) { throw ServiceError(.lastPasskey, Self.lastWayInDetail) }
        return loaded
    }
}

/// What a revocation's guard read about the passkey it names (`PasskeyService.refuseLastWayIn`),
/// handed to the handler in `RouteContext.loads`.
struct LoadedRevocation: Sendable {
    let userId: String
    let credentialId: [UInt8]
    let read: PasskeyRevocationRead
}
