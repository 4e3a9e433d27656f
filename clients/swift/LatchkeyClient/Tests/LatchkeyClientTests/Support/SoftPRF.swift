#if canImport(WebAuthnTesting)
import Crypto
import Foundation
import LatchkeyClient
import Synchronization

/// Passkeys that evaluate PRF as a CTAP2 authenticator does with `hmac-secret`: each credential has
/// a random 32-byte secret (CredRandom), and the PRF output for a WebAuthn salt is
/// HMAC-SHA-256(secret, SHA-256("WebAuthn PRF" ‖ 0x00 ‖ salt)) (WebAuthn L3 §10.1.4). The assertion
/// itself is a real one by the server package's soft authenticator, which the server verifies.
final class SoftPRFPasskeys: PRFAuthenticator {
    struct Entry {
        let passkey: SoftPasskey
        let secret: [UInt8]
    }
    struct State {
        var entries: [Entry] = []
        /// Every PRF output handed out (the test looks for them where they must not be).
        var outputs: [Data] = []
        /// Refuse the next prompt, as a person cancelling it does.
        var cancelNext = false
    }
    let origin: String
    private let state = Mutex(State())

    var outputs: [Data] { state.withLock { $0.outputs } }
    func cancelNextPrompt() { state.withLock { $0.cancelNext = true } }

    init(origin: String) { self.origin = origin }

    /// A new passkey on this device: registers for `options`, reporting `prf.enabled`.
    func register(_ options: RegistrationOptions) -> (SoftPasskey, RegistrationCredential) {
        let passkey = SoftPasskey()
        var credential = passkey.register(options, origin: origin)
        credential.prfEnabled = true
        let entry = Entry(passkey: passkey, secret: SecureRandom.bytes(32))
        state.withLock { $0.entries.append(entry) }
        return (passkey, credential)
    }

    /// Forgets a passkey (the phone that held it is lost).
    func lose(_ passkey: SoftPasskey) { state.withLock { $0.entries.removeAll { $0.passkey.credentialID == passkey.credentialID } } }

    func assertWithPRF(_ request: PRFRequest) async throws -> PRFAssertion {
        let (entry, cancel): (Entry?, Bool) = state.withLock { s in
            defer { s.cancelNext = false }
            return (s.entries.first { request.allowedCredentialIDs.contains($0.passkey.credentialID) }, s.cancelNext)
        }
        if cancel { throw LatchkeyError(.authenticator, "NotAllowedError: the person cancelled the prompt") }
        guard request.options.userVerification == "required" else { throw LatchkeyError(.authenticator, "PRF without user verification") }
        guard let entry else { throw LatchkeyError(.authenticator, "no passkey on this device is one of the allowed credentials") }
        let output = Data(HMAC.sha256(key: entry.secret, data: Digest.sha256(Array("WebAuthn PRF".utf8) + [0] + [UInt8](request.salt))))
        state.withLock { $0.outputs.append(output) }
        return PRFAssertion(credential: entry.passkey.assert(request.options, origin: origin), prfOutput: output)
    }
}
#endif
