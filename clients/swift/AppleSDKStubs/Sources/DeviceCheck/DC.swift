import Foundation
open class DCAppAttestService: NSObject { nonisolated(unsafe) public static let shared = DCAppAttestService()
  open var isSupported: Bool { false }
  open func generateKey() async throws -> String { "" }
  open func attestKey(_ keyId: String, clientDataHash: Data) async throws -> Data { Data() }
  open func generateAssertion(_ keyId: String, clientDataHash: Data) async throws -> Data { Data() } }
