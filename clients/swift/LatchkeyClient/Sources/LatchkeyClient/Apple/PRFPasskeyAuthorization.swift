#if canImport(AuthenticationServices) && (os(iOS) || os(macOS) || os(visionOS))
@preconcurrency import AuthenticationServices
import CryptoKit
import Foundation

/// The vault's passkey prompt on iOS 18 / macOS 15: a user-verified assertion with
/// `ASAuthorizationPublicKeyCredentialPRFAssertionInput` (`prf.eval.first` = the vault's salt),
/// whose PRF output derives the key-wrapping key on the device (docs/vault.md).
///
/// ```swift
/// let prf = PRFPasskeyAuthorization(PasskeyAuthorization(anchor: window))
/// let vault = try await latchkey.unlockVault(accessToken: access, authenticator: prf)
/// ```
@available(iOS 18.0, macOS 15.0, visionOS 2.0, *)
public struct PRFPasskeyAuthorization: PRFAuthenticator {
    public let authorization: PasskeyAuthorization

    public init(_ authorization: PasskeyAuthorization) { self.authorization = authorization }

    public func assertWithPRF(_ request: PRFRequest) async throws -> PRFAssertion {
        try await authorization.assertWithPRF(request)
    }
}

@available(iOS 18.0, macOS 15.0, visionOS 2.0, *)
extension PasskeyAuthorization {
    /// One prompt of one of `request.allowedCredentialIDs` (user verification required) → the
    /// assertion and the 32-byte PRF output; `unsupported` when the passkey gave no PRF output.
    @MainActor
    public func assertWithPRF(_ request: PRFRequest) async throws(LatchkeyError) -> PRFAssertion {
        let platform = request.options.platformRequest()
        platform.allowedCredentials = request.allowedCredentialIDs.map { ASAuthorizationPlatformPublicKeyCredentialDescriptor(credentialID: $0) }
        platform.userVerificationPreference = .required
        platform.prf = ASAuthorizationPublicKeyCredentialPRFAssertionInput(
            inputValues: ASAuthorizationPublicKeyCredentialPRFAssertionInput.InputValues(saltInput1: request.salt), perCredentialInputValues: nil)
        let authorization = try await perform(platform)
        guard let credential = authorization.credential as? ASAuthorizationPlatformPublicKeyCredentialAssertion else {
            throw LatchkeyError(.authenticator, "the authorization is not a passkey assertion")
        }
        guard let output = credential.prf else { throw LatchkeyError(.unsupported, "this passkey cannot open a vault (no PRF)") }
        let bytes = output.first.withUnsafeBytes { Data($0) }
        return PRFAssertion(credential: AssertionCredential(credential), prfOutput: bytes)
    }
}
#endif
