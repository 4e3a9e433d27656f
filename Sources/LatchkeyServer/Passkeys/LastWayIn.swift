import HTTP
import Storage

/// SPEC "Assurance", the last way in: an account's last passkey cannot be revoked while it has no
/// unused recovery code and no verified address that counts (a verified address counts only while
/// email recovery is available: SMTP configured, or dev mode's mail folder). Answered 409
/// `last_passkey` before the step-up is asked (one read, `refuseLastWayIn`), and decided again by
/// the revoking statement on the account's locked passkey rows (`lastWayInRule`).
extension PasskeyService {
    static let lastWayInDetail =
        "this passkey is the account's last way in (no other passkey, no unused recovery code, no verified address for email recovery): add a recovery method or another passkey first"

    /// What the revoking statement keeps.
    var lastWayInRule: LastWayInRule { LastWayInRule(addressCounts: configuration.mailEnabled) }

    /// Whether revoking the passkey `ways` was read for would leave the account no way in.
    static func isLastWayIn(_ ways: WaysIn, addressCounts: Bool) -> Bool {
        ways.known && !ways.otherPasskey && !ways.recoveryCode && !(addressCounts && ways.verifiedAddress)
    }

    /// 409 `last_passkey` when revoking `credentialId` would take the account's last way in; an
    /// unknown passkey passes (the revocation answers 404 after the step-up, as before).
    func refuseLastWayIn(userId: String, credentialId: [UInt8]) throws(ServiceError) {
        let ways = try storage { () throws(StorageError) in try accounts.waysIn(userId: userId, besides: credentialId) }
        if Self.isLastWayIn(ways, addressCounts: lastWayInRule.addressCounts) { throw ServiceError(.lastPasskey, Self.lastWayInDetail) }
    }
}

extension StepUpRule {
    /// SPEC "Assurance": the last way in is refused (409) before the step-up is asked, whatever the
    /// caller; `credential` is the path parameter naming the passkey (one that cannot be one is
    /// left to the path check, 404).
    static func refusingLastWayIn(_ input: GuardInput, userId: String?, credential: String) throws(ServiceError) {
        guard let userId, let id = Identifiers.credential(input.rawPath[credential]) else { return }
        try input.services.passkeys.refuseLastWayIn(userId: userId, credentialId: id)
    }

    /// The admin API's revocation of a user's passkey: the last-way-in rule first, then `adminChange`.
    static let adminPasskeyRevocation = StepUpRule(changes: "admin changes") { input throws(ServiceError) in
        try refusingLastWayIn(input, userId: Identifiers.opaque(input.rawPath["id"]), credential: "credentialId")
        return try adminChange.need(input)
    }
}
