import Foundation
import Security
import LocalAuthentication
public enum P256 { public enum Signing {
  public struct PublicKey { public var x963Representation: Data { Data() }; public var derRepresentation: Data { Data() } }
  public struct ECDSASignature { public var derRepresentation: Data { Data() }; public var rawRepresentation: Data { Data() } }
  public struct PrivateKey { public init(compactRepresentable: Bool = true) {}; public init(rawRepresentation: Data) throws {}
    public var rawRepresentation: Data { Data() }; public var publicKey: PublicKey { .init() }
    public func signature<D: DataProtocol>(for data: D) throws -> ECDSASignature { .init() } } } }
public struct SymmetricKey: Sendable { public init(data: Data) {}; public var bitCount: Int { 256 }
  public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { try Data().withUnsafeBytes(body) } }
public enum SecureEnclave { public static var isAvailable: Bool { false }
  public enum P256 { public enum Signing { public struct PrivateKey {
    public init(compactRepresentable: Bool = true, accessControl: SecAccessControl, authenticationContext: LAContext? = nil) throws {}
    public init(dataRepresentation: Data, authenticationContext: LAContext? = nil) throws {}
    public var dataRepresentation: Data { Data() }
    public var publicKey: CryptoKit.P256.Signing.PublicKey { .init() }
    public func signature<D: DataProtocol>(for data: D) throws -> CryptoKit.P256.Signing.ECDSASignature { .init() } } } } }
