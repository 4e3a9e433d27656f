#if canImport(AuthenticationServices) && (os(iOS) || os(macOS) || os(visionOS))
@preconcurrency import AuthenticationServices
import Foundation

// The bridge between AuthenticationServices and the W3C JSON shapes the server speaks (docs/integration/ios.md): the options become ASAuthorization requests, the results become
// RegistrationResponseJSON / AuthenticationResponseJSON with every binary field base64url.
// The associated domain `webcredentials:<rpId>` must be in the app's entitlements, and the server
// must list the app (`latchkey apps add ios …`) so its apple-app-site-association names it.

@available(iOS 16.0, macOS 13.0, visionOS 1.0, *)
extension RegistrationOptions {
    /// The platform (iCloud Keychain / password manager) registration request for these options.
    public func platformRequest() -> ASAuthorizationPlatformPublicKeyCredentialRegistrationRequest {
        let provider = ASAuthorizationPlatformPublicKeyCredentialProvider(relyingPartyIdentifier: rpId)
        let request = provider.createCredentialRegistrationRequest(challenge: challenge, name: userName, userID: userID)
        request.displayName = userDisplayName
        request.userVerificationPreference = ASAuthorizationPublicKeyCredentialUserVerificationPreference(latchkey: userVerification)
        if #available(iOS 17.4, macOS 14.4, visionOS 1.1, *) {
            request.excludedCredentials = excludeCredentialIDs.map { ASAuthorizationPlatformPublicKeyCredentialDescriptor(credentialID: $0) }
        }
        if #available(iOS 18.0, macOS 15.0, visionOS 2.0, *) {
            request.prf = .checkForSupport  // the creation options ask for `prf` (the vault, docs/vault.md)
        }
        return request
    }
}

@available(iOS 16.0, macOS 13.0, visionOS 1.0, *)
extension AuthenticationOptions {
    /// The platform assertion request: `allowCredentials` when the server named the account's
    /// passkeys (username-first sign-in, passkey step-up), else the account picker / AutoFill.
    public func platformRequest() -> ASAuthorizationPlatformPublicKeyCredentialAssertionRequest {
        let provider = ASAuthorizationPlatformPublicKeyCredentialProvider(relyingPartyIdentifier: rpId)
        let request = provider.createCredentialAssertionRequest(challenge: challenge)
        request.allowedCredentials = allowCredentialIDs.map { ASAuthorizationPlatformPublicKeyCredentialDescriptor(credentialID: $0) }
        request.userVerificationPreference = ASAuthorizationPublicKeyCredentialUserVerificationPreference(latchkey: userVerification)
        return request
    }
}

@available(iOS 16.0, macOS 13.0, visionOS 1.0, *)
extension ASAuthorizationPublicKeyCredentialUserVerificationPreference {
    init(latchkey value: String) {
        switch value {
        case "required": self = .required
        case "discouraged": self = .discouraged
        default: self = .preferred
        }
    }
}

@available(iOS 16.0, macOS 13.0, visionOS 1.0, *)
extension RegistrationCredential {
    /// A passkey the platform created. `rawAttestationObject` is nil only when the system did not
    /// finish the registration; that is refused here rather than posted.
    public init(_ credential: ASAuthorizationPlatformPublicKeyCredentialRegistration) throws(LatchkeyError) {
        guard let attestationObject = credential.rawAttestationObject else {
            throw LatchkeyError(.authenticator, "the registration carries no attestation object")
        }
        var attachment = "platform"
        if #available(iOS 16.6, macOS 13.5, visionOS 1.0, *), credential.attachment == .crossPlatform {
            attachment = "cross-platform"  // created on a phone nearby (hybrid)
        }
        var prfEnabled: Bool?
        if #available(iOS 18.0, macOS 15.0, visionOS 2.0, *) { prfEnabled = credential.prf?.isSupported }
        self.init(credentialID: credential.credentialID, rawClientDataJSON: credential.rawClientDataJSON,
                  rawAttestationObject: attestationObject, transports: ["internal", "hybrid"], attachment: attachment, prfEnabled: prfEnabled)
    }

    #if !os(visionOS)
    /// A security key's credential (USB, NFC, Lightning).
    public init(securityKey credential: ASAuthorizationSecurityKeyPublicKeyCredentialRegistration) throws(LatchkeyError) {
        guard let attestationObject = credential.rawAttestationObject else {
            throw LatchkeyError(.authenticator, "the registration carries no attestation object")
        }
        self.init(credentialID: credential.credentialID, rawClientDataJSON: credential.rawClientDataJSON,
                  rawAttestationObject: attestationObject, transports: [], attachment: "cross-platform")
    }
    #endif
}

@available(iOS 16.0, macOS 13.0, visionOS 1.0, *)
extension AssertionCredential {
    public init(_ credential: ASAuthorizationPlatformPublicKeyCredentialAssertion) {
        var attachment = "platform"
        if #available(iOS 16.6, macOS 13.5, visionOS 1.0, *), credential.attachment == .crossPlatform {
            attachment = "cross-platform"
        }
        // Implicitly unwrapped in the SDK; a finished assertion always has them, so empty stands in
        // for a missing one and the server refuses it (invalid_request / signature_invalid).
        let authenticatorData: Data? = credential.rawAuthenticatorData
        let signature: Data? = credential.signature
        let userID: Data? = credential.userID
        self.init(credentialID: credential.credentialID, rawClientDataJSON: credential.rawClientDataJSON,
                  rawAuthenticatorData: authenticatorData ?? Data(), signature: signature ?? Data(), userID: userID,
                  attachment: attachment)
    }

    #if !os(visionOS)
    public init(securityKey credential: ASAuthorizationSecurityKeyPublicKeyCredentialAssertion) {
        let authenticatorData: Data? = credential.rawAuthenticatorData
        let signature: Data? = credential.signature
        let userID: Data? = credential.userID
        self.init(credentialID: credential.credentialID, rawClientDataJSON: credential.rawClientDataJSON,
                  rawAuthenticatorData: authenticatorData ?? Data(), signature: signature ?? Data(), userID: userID,
                  attachment: "cross-platform")
    }
    #endif
}

/// Runs one ASAuthorizationController request and returns its result: `register` and `assert`
/// are the two steps an app's sign-up and sign-in screens call between the Latchkey requests.
///
/// ```swift
/// let options = try await latchkey.authenticationOptions()
/// let credential = try await PasskeyAuthorization(anchor: view.window!).assert(options)
/// let signIn = try await latchkey.verifyAuthentication(credential)
/// ```
@available(iOS 16.0, macOS 13.0, visionOS 1.0, *)
public final class PasskeyAuthorization: NSObject, ASAuthorizationControllerDelegate, ASAuthorizationControllerPresentationContextProviding,
    @unchecked Sendable {
    // All state is touched on the main thread only: the public methods are @MainActor, and
    // ASAuthorizationController calls its delegate and presentation provider on the main thread.
    private let anchor: ASPresentationAnchor
    private var continuation: CheckedContinuation<Delivered, any Error>?
    private var controller: ASAuthorizationController?

    /// ASAuthorization is not Sendable; it crosses from the delegate callback to the awaiting
    /// request on the main thread, so this box only quiets the checker.
    private struct Delivered: @unchecked Sendable { let authorization: ASAuthorization }

    @MainActor
    public init(anchor: ASPresentationAnchor) {
        self.anchor = anchor
    }

    /// Creates a passkey for `options` (sign-up, or another passkey on the account).
    @MainActor
    public func register(_ options: RegistrationOptions) async throws(LatchkeyError) -> RegistrationCredential {
        let authorization = try await perform(options.platformRequest())
        guard let credential = authorization.credential as? ASAuthorizationPlatformPublicKeyCredentialRegistration else {
            throw LatchkeyError(.authenticator, "the authorization is not a passkey registration")
        }
        return try RegistrationCredential(credential)
    }

    /// Signs `options`' challenge with one of the user's passkeys (sign-in, or a passkey step-up).
    /// `preferImmediatelyAvailableCredentials`: fail at once (`authenticator`, canceled) when the
    /// device holds no passkey for this site, instead of offering a phone nearby.
    @MainActor
    public func assert(_ options: AuthenticationOptions, preferImmediatelyAvailableCredentials: Bool = false)
        async throws(LatchkeyError) -> AssertionCredential {
        let authorization = try await perform(options.platformRequest(), preferImmediatelyAvailable: preferImmediatelyAvailableCredentials)
        guard let credential = authorization.credential as? ASAuthorizationPlatformPublicKeyCredentialAssertion else {
            throw LatchkeyError(.authenticator, "the authorization is not a passkey assertion")
        }
        return AssertionCredential(credential)
    }

    #if os(iOS) || os(visionOS)
    /// AutoFill-assisted sign-in (the passkey appears in the QuickType bar of a username field whose
    /// `textContentType` is `.username`). Start it when the sign-in screen appears; it returns when
    /// the user picks a passkey. Cancel it (`cancel()`) before starting a modal request.
    @MainActor
    public func assertWithAutoFill(_ options: AuthenticationOptions) async throws(LatchkeyError) -> AssertionCredential {
        let controller = ASAuthorizationController(authorizationRequests: [options.platformRequest()])
        let authorization = try await run(controller) { $0.performAutoFillAssistedRequests() }
        guard let credential = authorization.credential as? ASAuthorizationPlatformPublicKeyCredentialAssertion else {
            throw LatchkeyError(.authenticator, "the authorization is not a passkey assertion")
        }
        return AssertionCredential(credential)
    }
    #endif

    /// Cancels a running request (an AutoFill one before a modal one starts).
    @MainActor
    public func cancel() { controller?.cancel() }

    @MainActor
    func perform(_ request: ASAuthorizationRequest, preferImmediatelyAvailable: Bool = false) async throws(LatchkeyError) -> ASAuthorization {
        let controller = ASAuthorizationController(authorizationRequests: [request])
        return try await run(controller) { c in
            if preferImmediatelyAvailable { c.performRequests(options: .preferImmediatelyAvailableCredentials) } else { c.performRequests() }
        }
    }

    @MainActor
    private func run(_ controller: ASAuthorizationController, start: (ASAuthorizationController) -> Void) async throws(LatchkeyError) -> ASAuthorization {
        guard continuation == nil else { throw LatchkeyError(.authenticator, "another passkey request is running") }
        controller.delegate = self
        controller.presentationContextProvider = self
        self.controller = controller
        do {
            let delivered = try await withCheckedThrowingContinuation { (c: CheckedContinuation<Delivered, any Error>) in
                continuation = c
                start(controller)
            }
            return delivered.authorization
        } catch let error as ASAuthorizationError {
            throw LatchkeyError(.authenticator, "ASAuthorizationError \(error.code.rawValue): \(error.localizedDescription)")
        } catch {
            throw LatchkeyError(.authenticator, "\(error.localizedDescription)")
        }
    }

    private func finish(_ result: Result<Delivered, any Error>) {
        let c = continuation
        continuation = nil
        controller = nil
        c?.resume(with: result)
    }

    public func authorizationController(controller: ASAuthorizationController, didCompleteWithAuthorization authorization: ASAuthorization) {
        finish(.success(Delivered(authorization: authorization)))
    }

    public func authorizationController(controller: ASAuthorizationController, didCompleteWithError error: any Error) {
        finish(.failure(error))
    }

    public func presentationAnchor(for controller: ASAuthorizationController) -> ASPresentationAnchor { anchor }
}
#endif
