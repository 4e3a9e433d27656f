import PostgreSQL

/// What one submission of a mailed code found.
public enum CodeTry: Sendable {
    /// No live challenge of that purpose with that id (unknown, used, expired, out of attempts).
    case noChallenge
    /// The attempt was counted and the code was wrong (the rejection's audit line written with it).
    case wrong
    /// The attempt was counted and the challenge used up.
    case right(CodeAttempt)
}

extension RecoveryRepository {
    /// One submission of a mailed code, in one statement: the attempt counted (so concurrent
    /// guesses never exceed the attempts), the challenge used up when `presentedHash` is its code's
    /// hash (single use even under concurrent submissions), and `rejected` written once when it is
    /// not. Comparing the hashes in SQL leaks nothing a timing could use: both sides are HMACs under
    /// the deployment's secret, whose bytes a guesser cannot steer.
    public func tryCode(id: String, purpose: NewCodeChallenge.Purpose, presentedHash: [UInt8],
                        rejected: AuditTemplate) throws(StorageError) -> CodeTry {
        let statement = SQL.with([
            ("att", """
                UPDATE otp_challenges SET attempts = attempts + 1,
                    used_at = CASE WHEN code_hash = \(presentedHash) THEN now() END
                WHERE id = \(id) AND purpose = \(purpose.rawValue) AND used_at IS NULL AND expires_at > now() AND attempts < max_attempts
                RETURNING id, user_id, email, code_hash, used_at IS NOT NULL AS matched
                """),
            ("missed", "SELECT user_id FROM att WHERE NOT matched"),
        ] + AuditRepository.cte([rejected.rows(from: "missed", subject: "missed.user_id")]),
            "SELECT id, user_id, email, code_hash, matched FROM att")
        return try pool.run { c -> CodeTry in
            guard let r = try c.query(statement).first else { return .noChallenge }
            guard try r.bool("matched") else { return .wrong }
            return .right(CodeAttempt(id: try r.string("id"), purpose: purpose, userId: try r.optionalString("user_id"),
                                      email: try r.optionalString("email"), codeHash: try r.bytes("code_hash")))
        }
    }
}
