import ProtocolCore

extension CeremonyStateCoding {
    func userVerification(_ key: String) throws(WebAuthnError) -> VerificationPolicy.UserVerification {
        guard let uv = VerificationPolicy.UserVerification(rawValue: try string(key)) else { throw Self.unreadable }
        return uv
    }
}
