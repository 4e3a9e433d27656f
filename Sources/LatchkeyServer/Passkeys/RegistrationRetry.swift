import Crypto
import JSON
import Storage
import WebAuthn

/// A registration whose COMMIT happened but whose answer was lost (the primary failed over after COMMIT, a synchronous-replication wait
/// was cancelled, the request's database budget ran out on COMMIT) looks like a failure to the
/// client, which retries with the same response. Its challenge is used up by then (or expired); instead of
/// `challenge_invalid` the retry is answered 409 `credential_exists` naming the stored passkey, and
/// no tokens: the client signs in with it. (Assertions get nothing of the kind: a replayed
/// assertion is `challenge_invalid`, challenges stay single use.)
extension PasskeyService {
    /// SHA-256 of the registration's clientDataJSON (which holds its challenge), stored with the
    /// passkey: only the very response that registered it matches.
    static func registrationDigest(_ parsed: ParsedRegistration) -> [UInt8] {
        Digest.sha256(parsed.response.clientDataJSON)
    }

    /// The credential id the response's authenticator data names (its `rawId` when it names none:
    /// verification refuses such a response anyway).
    static func registeredCredentialId(_ parsed: ParsedRegistration) -> [UInt8] {
        parsed.attestationObject.authenticatorData.attestedCredentialData?.credentialId ?? parsed.response.rawId
    }

    /// The answer to a response whose challenge is used or expired when this very response
    /// registered `credential` (still live; the registration's read finds it by the digest): 409
    /// naming the stored passkey. Otherwise the caller says challenge_invalid.
    func savedRetry(_ credential: CredentialRecord) -> ServiceError {
        var error = ServiceError(.credentialExists,
                                 "this passkey was saved by an earlier try of this registration whose answer was lost: sign in with it")
        error.attachment = .savedPasskey(shown(credential))
        return error
    }
}
