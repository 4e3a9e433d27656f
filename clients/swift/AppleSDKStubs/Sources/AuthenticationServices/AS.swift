// Stubs of the AuthenticationServices declarations LatchkeyClient uses, as the iOS 17/18 SDK
// declares them (from its documentation; see ../../Package.swift). UIWindow and UIDevice stand in for UIKit.
import CryptoKit
import Foundation
open class ASAuthorizationRequest: NSObject {}
public protocol ASAuthorizationCredential: NSObjectProtocol {}
public protocol ASPublicKeyCredential: ASAuthorizationCredential { var rawClientDataJSON: Data { get }; var credentialID: Data { get } }
public struct ASAuthorizationPublicKeyCredentialUserVerificationPreference: RawRepresentable, Hashable, Sendable {
  public var rawValue: String; public init(rawValue: String) { self.rawValue = rawValue }
  public static let required = Self(rawValue: "required"), preferred = Self(rawValue: "preferred"), discouraged = Self(rawValue: "discouraged") }
public enum ASAuthorizationPublicKeyCredentialAttachment: Int { case platform, crossPlatform }
open class ASAuthorizationPlatformPublicKeyCredentialDescriptor: NSObject { public init(credentialID: Data) {} }
open class ASAuthorizationPlatformPublicKeyCredentialRegistrationRequest: ASAuthorizationRequest {
  open var displayName: String?; open var userVerificationPreference = ASAuthorizationPublicKeyCredentialUserVerificationPreference.preferred
  open var excludedCredentials: [ASAuthorizationPlatformPublicKeyCredentialDescriptor] = []
  open var prf: ASAuthorizationPublicKeyCredentialPRFRegistrationInput? }
open class ASAuthorizationPlatformPublicKeyCredentialAssertionRequest: ASAuthorizationRequest {
  open var allowedCredentials: [ASAuthorizationPlatformPublicKeyCredentialDescriptor] = []
  open var userVerificationPreference = ASAuthorizationPublicKeyCredentialUserVerificationPreference.preferred
  open var prf: ASAuthorizationPublicKeyCredentialPRFAssertionInput? }
// The PRF extension (iOS 18, macOS 15).
public struct ASAuthorizationPublicKeyCredentialPRFAssertionInput {
  public struct InputValues { public init(saltInput1: Data, saltInput2: Data? = nil) {} }
  public init(inputValues: InputValues?, perCredentialInputValues: [Data: InputValues]?) {} }
public struct ASAuthorizationPublicKeyCredentialPRFAssertionOutput { public var first: SymmetricKey { .init(data: Data()) }; public var second: SymmetricKey? { nil } }
public enum ASAuthorizationPublicKeyCredentialPRFRegistrationInput { case checkForSupport; case inputValues(ASAuthorizationPublicKeyCredentialPRFAssertionInput.InputValues) }
public struct ASAuthorizationPublicKeyCredentialPRFRegistrationOutput { public var isSupported: Bool { false }; public var first: SymmetricKey? { nil } }
open class ASAuthorizationPlatformPublicKeyCredentialProvider: NSObject { public init(relyingPartyIdentifier: String) {}
  open func createCredentialRegistrationRequest(challenge: Data, name: String, userID: Data) -> ASAuthorizationPlatformPublicKeyCredentialRegistrationRequest { .init() }
  open func createCredentialAssertionRequest(challenge: Data) -> ASAuthorizationPlatformPublicKeyCredentialAssertionRequest { .init() } }
open class ASAuthorizationPlatformPublicKeyCredentialRegistration: NSObject, ASPublicKeyCredential {
  open var rawClientDataJSON: Data { Data() }; open var credentialID: Data { Data() }; open var rawAttestationObject: Data? { nil }
  open var attachment: ASAuthorizationPublicKeyCredentialAttachment { .platform }
  open var prf: ASAuthorizationPublicKeyCredentialPRFRegistrationOutput? { nil } }
open class ASAuthorizationPlatformPublicKeyCredentialAssertion: NSObject, ASPublicKeyCredential {
  open var rawClientDataJSON: Data { Data() }; open var credentialID: Data { Data() }
  open var rawAuthenticatorData: Data! { nil }; open var signature: Data! { nil }; open var userID: Data! { nil }
  open var attachment: ASAuthorizationPublicKeyCredentialAttachment { .platform }
  open var prf: ASAuthorizationPublicKeyCredentialPRFAssertionOutput? { nil } }
open class ASAuthorizationSecurityKeyPublicKeyCredentialRegistration: NSObject, ASPublicKeyCredential {
  open var rawClientDataJSON: Data { Data() }; open var credentialID: Data { Data() }; open var rawAttestationObject: Data? { nil } }
open class ASAuthorizationSecurityKeyPublicKeyCredentialAssertion: NSObject, ASPublicKeyCredential {
  open var rawClientDataJSON: Data { Data() }; open var credentialID: Data { Data() }
  open var rawAuthenticatorData: Data! { nil }; open var signature: Data! { nil }; open var userID: Data! { nil } }
open class ASAuthorization: NSObject { open var credential: any ASAuthorizationCredential { fatalError() } }
open class UIWindow: NSObject {}
public typealias ASPresentationAnchor = UIWindow
#if NONISOLATED_DELEGATES
public protocol ASAuthorizationControllerDelegate: NSObjectProtocol {
  func authorizationController(controller: ASAuthorizationController, didCompleteWithAuthorization authorization: ASAuthorization)
  func authorizationController(controller: ASAuthorizationController, didCompleteWithError error: any Error) }
public protocol ASAuthorizationControllerPresentationContextProviding: NSObjectProtocol {
  func presentationAnchor(for controller: ASAuthorizationController) -> ASPresentationAnchor }
open class ASAuthorizationController: NSObject {
  public struct RequestOptions: OptionSet, Sendable { public let rawValue: UInt; public init(rawValue: UInt) { self.rawValue = rawValue }
    public static let preferImmediatelyAvailableCredentials = Self(rawValue: 1) }
  public init(authorizationRequests: [ASAuthorizationRequest]) {}
  open weak var delegate: (any ASAuthorizationControllerDelegate)?
  open weak var presentationContextProvider: (any ASAuthorizationControllerPresentationContextProviding)?
  open func performRequests() {}; open func performRequests(options: RequestOptions) {}; open func performAutoFillAssistedRequests() {}; open func cancel() {} }
#else
@MainActor public protocol ASAuthorizationControllerDelegate: NSObjectProtocol {
  func authorizationController(controller: ASAuthorizationController, didCompleteWithAuthorization authorization: ASAuthorization)
  func authorizationController(controller: ASAuthorizationController, didCompleteWithError error: any Error) }
@MainActor public protocol ASAuthorizationControllerPresentationContextProviding: NSObjectProtocol {
  func presentationAnchor(for controller: ASAuthorizationController) -> ASPresentationAnchor }
@MainActor open class ASAuthorizationController: NSObject {
  public struct RequestOptions: OptionSet, Sendable { public let rawValue: UInt; public init(rawValue: UInt) { self.rawValue = rawValue }
    public static let preferImmediatelyAvailableCredentials = Self(rawValue: 1) }
  public init(authorizationRequests: [ASAuthorizationRequest]) {}
  open weak var delegate: (any ASAuthorizationControllerDelegate)?
  open weak var presentationContextProvider: (any ASAuthorizationControllerPresentationContextProviding)?
  open func performRequests() {}; open func performRequests(options: RequestOptions) {}; open func performAutoFillAssistedRequests() {}; open func cancel() {} }
#endif
public struct ASAuthorizationError: Error { public enum Code: Int, Sendable { case canceled = 1001 }; public var code: Code; public var localizedDescription: String { "" } }
@MainActor open class UIDevice: NSObject { public static let current = UIDevice(); open var identifierForVendor: UUID? { UUID() }; open var name: String { "" } }
