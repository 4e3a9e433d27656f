import Crypto
import Foundation
@testable import LatchkeyServer
import Testing

/// Issue 24: session ids that keep new sessions' index entries together.
@Suite("Session identifiers")
struct SessionIdentifierTests {
    /// The system's randomness (or `random`'s bytes) at a fixed instant.
    static func runtime(at seconds: Double, random: [UInt8]? = nil) -> Runtime {
        var runtime = Runtime.system
        runtime.now = { Date(timeIntervalSince1970: seconds) }
        if let random { runtime.random = { n in Array(random.prefix(n)) } }
        return runtime
    }

    @Test("the first six bytes are the start in Unix milliseconds, the other ten random")
    func layout() throws {
        let random: [UInt8] = [0xA1, 0xB2, 0xC3, 0xD4, 0xE5, 0xF6, 0x07, 0x18, 0x29, 0x3A]
        let id = Self.runtime(at: 1_764_633_600.123, random: random).sessionIdentifier()
        let bytes = try #require(Base64URL.decode(id))
        #expect(bytes.count == 16)
        #expect(bytes.prefix(6).reduce(0) { $0 << 8 | UInt64($1) } == 1_764_633_600_123)
        #expect(Array(bytes.suffix(10)) == random)
        // The shape every session path and body takes (22 characters, canonical base64url).
        #expect(Identifiers.opaque(id) == id)
    }

    @Test("sessions started close together share a prefix; their random part still tells them apart")
    func closeInTimeMeansCloseInTheIndex() {
        let now = Self.runtime(at: 1_764_633_600)
        let a = now.sessionIdentifier(), b = now.sessionIdentifier()
        #expect(a != b)
        #expect(a.prefix(8) == b.prefix(8), "six bytes of time are the first eight characters")
        let later = Self.runtime(at: 1_764_633_600 + 86_400).sessionIdentifier()
        #expect(later.prefix(4) != a.prefix(4))
    }
}
