import Foundation
import PostgreSQL

/// What a step-up verify reads before it decides, in one round trip: the user's step-up
/// challenge, the user's live device keys (a device-key challenge names one of them, and one no
/// longer among them was revoked since), and the passkey an assertion names with its owner.
public struct StepUpVerifyRead: Sendable {
    /// Nil: unknown, used, another user's or another ceremony's.
    public let challenge: StoredChallenge?
    public let liveKeys: [DeviceKeyRecord]
    /// The live passkey `credentialId` names (only when one was asked for) and its owner.
    public let passkey: (CredentialRecord, UserRecord)?

    public init(challenge: StoredChallenge?, liveKeys: [DeviceKeyRecord], passkey: (CredentialRecord, UserRecord)?) {
        self.challenge = challenge
        self.liveKeys = liveKeys
        self.passkey = passkey
    }
}

extension DeviceKeyRepository {
    /// The step-up verify's one read (`StepUpVerifyRead`): the challenge with the user's live device
    /// keys, and with `credentialId` the passkey — one pipelined round trip, nothing used up.
    public func stepUpRead(hash: [UInt8], userId: String, credentialId: [UInt8]?) throws(StorageError) -> StepUpVerifyRead {
        let keyColumns = DeviceKeyRepository.columns.split(separator: ",").map { "d." + $0.trimmingCharacters(in: .whitespaces) }
            .joined(separator: ", ")
        var statements: [SQL] = ["""
            SELECT ch.purpose, ch.user_id AS bound_user, ch.rp_id, ch.state, ch.expires_at <= now() AS expired, \(unsafeRaw: keyColumns)
            FROM challenges ch LEFT JOIN device_keys d ON d.user_id = ch.user_id AND d.revoked_at IS NULL
            WHERE ch.hash = \(hash) AND ch.purpose = \(CeremonyKind.stepUp.rawValue) AND ch.user_id = \(userId)
            ORDER BY d.created_at
            """]
        if let credentialId {
            statements.append("""
                SELECT \(unsafeRaw: AccountRepository.loginColumns)
                FROM credentials c JOIN users u ON u.id = c.user_id
                WHERE c.id = \(credentialId) AND c.revoked_at IS NULL
                """)
        }
        return try pool.run { c in
            let results = try c.pipeline(statements)
            let rows = results[0]
            return StepUpVerifyRead(challenge: try rows.first.map(ChallengeRepository.challenge),
                                    liveKeys: try rows.filter { !(try $0.isNull("id")) }.map(DeviceKeyRepository.deviceKey),
                                    passkey: try results.count > 1 ? results[1].first.map(AccountRepository.login) : nil)
        }
    }
}

extension DeviceKeyRepository {
    /// A passkey step-up challenge's one read: `userId`'s live passkeys, oldest first (what the
    /// challenge binds), and — when the action is a vote for the quorum approval `voteFor` — whether
    /// that approval is break glass, which the vote's receipt says (SPEC "Quorum approvals").
    public func passkeyChallengeRead(userId: String, voteFor approvalId: String?) throws(StorageError)
        -> (passkeys: [CredentialRecord], breakGlassVote: Bool) {
        try pool.run { c in
            let rows = try c.query("""
                SELECT \(unsafeRaw: AccountRepository.credentialColumns),
                       COALESCE((SELECT break_glass FROM approvals WHERE id = \(approvalId)), false) AS vote_break_glass
                FROM credentials WHERE user_id = \(userId) AND revoked_at IS NULL ORDER BY created_at
                """)
            return (try rows.map(AccountRepository.credential), try rows.first?.bool("vote_break_glass") ?? false)
        }
    }
}
