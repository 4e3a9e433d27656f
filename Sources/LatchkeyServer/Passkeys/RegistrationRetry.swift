import Crypto
import JSON
import Storage
import WebAuthn

/// A registration whose COMMIT happened but whose answer was lost (the primary failed over after COMMIT, a synchronous-replication wait
/// was cancelled, the request's database budget ran out on COMMIT) looks like a failure to the
/// client, which retries with the same response. Its challenge is used up by then; instead of
/// `challenge_invalid` the retry is answered 409 `credential_exists` naming the stored passkey, and
/// no tokens: the client signs in with it. (Assertions get nothing of the kind: a replayed
/// assertion is `challenge_invalid`, challenges stay single use.)
extension PasskeyService {
    /// SHA-256 of the registration's clientDataJSON (which holds its challenge), stored with the
    /// passkey: only the very response that registered it matches.
    static func registrationDigest(_ parsed: ParsedRegistration) -> [UInt8] {
        Digest.sha256(parsed.response.clientDataJSON)
    }

    /// Called when the challenge was not there to consume: throws 409 when this exact response
    /// registered a passkey that is still live; returns otherwise (the caller says challenge_invalid).
    func refuseSavedRetry(_ parsed: ParsedRegistration) throws(ServiceError) {
        guard let id = parsed.attestationObject.authenticatorData.attestedCredentialData?.credentialId else { return }
        let digest = Self.registrationDigest(parsed)
        guard let (credential, _) = try storage({ () throws(StorageError) in try accounts.credentialRegistered(id: id, digest: digest) })
        else { return }
        var error = ServiceError(.credentialExists,
                                 "this passkey was saved by an earlier try of this registration whose answer was lost: sign in with it")
        error.members = [("passkey", passkeyJSON(credential))]
        throw error
    }
}
