import Foundation
import JSON
import Synchronization
import Testing
import Tokens

/// The token signer over a key source that is not PostgreSQL (Tokens knows no SQL): rotation by the
/// source's own key age, typed claims both ways, and the issuer/audience/type checks.
@Suite struct TokenSignerCoreTests {
    /// Keys in memory, with the age the source reports for its newest.
    final class MemorySource: SigningKeySource, @unchecked Sendable {
        let keys = Mutex<[SigningKey]>([])
        let age: TimeInterval?
        init(age: TimeInterval?, keys: [SigningKey] = []) {
            self.age = age
            self.keys.withLock { $0 = keys }
        }
        func prepare() throws(SigningKeyError) {}
        func load() throws(SigningKeyError) -> [StoredSigningKey] { keys.withLock { $0.map { .key($0) } } }
        func newestKeyAge() throws(SigningKeyError) -> TimeInterval? { age }
        func add(_ key: SigningKey) throws(SigningKeyError) { keys.withLock { $0.insert(key, at: 0) } }
    }

    static let clock = TokenClock(now: { Date(timeIntervalSince1970: 1_000_000) }, unixTime: { 1_000_000 }, uptime: { 1 })

    @Test("a key is added at start when there is none or the newest is older than 30 days, never otherwise")
    func rotationByAge() throws {
        for (age, keysBefore, added) in [(nil as TimeInterval?, 0, true), (10.0, 1, false),
                                         (TokenSigner.rotationAge + 1, 1, true), (TokenSigner.rotationAge - 1, 1, false)] {
            let source = MemorySource(age: age, keys: (0..<keysBefore).map { _ in SigningKey.generate() })
            let signer = TokenSigner(source: source, issuer: "https://i.test", audience: "i.test", clock: Self.clock)
            try signer.prepareKeys()
            #expect(source.keys.withLock { $0.count } == keysBefore + (added ? 1 : 0), "age \(String(describing: age))")
        }
    }

    @Test("access and step-up claims round-trip as typed values; another issuer, audience or type is refused")
    func typedClaims() throws {
        let source = MemorySource(age: nil)
        let signer = TokenSigner(source: source, issuer: "https://i.test", audience: "i.test", clock: Self.clock)
        try signer.prepareKeys()
        let access = AccessClaims(subject: "u1", sessionId: "s1", jwtId: "j1", issuedAt: 1_000_000, expiresAt: 1_000_300,
                                  authTime: 999_000, authentication: .passkeyVerified)
        let token = try signer.sign(access)
        #expect(try signer.accessClaims(token) == access)
        #expect(throws: TokenError.self) { try signer.stepUpClaims(token) }  // typ at+jwt is no step-up token
        let stepUp = StepUpClaims(subject: "u1", sessionId: "s1", jwtId: "j2", issuedAt: 1_000_000, lifetime: 120,
                                  authentication: .deviceKeyAttested, actionHash: [UInt8](repeating: 7, count: 32), receiptId: "r1")
        let stepUpToken = try signer.sign(stepUp)
        #expect(try signer.stepUpClaims(stepUpToken) == stepUp)
        #expect(throws: TokenError.self) { try signer.accessClaims(stepUpToken) }
        let elsewhere = TokenSigner(source: source, issuer: "https://other.test", audience: "i.test", clock: Self.clock)
        #expect(throws: TokenError.self) { try elsewhere.accessClaims(token) }
        let otherAudience = TokenSigner(source: source, issuer: "https://i.test", audience: "other.test", clock: Self.clock)
        #expect(throws: TokenError.self) { try otherAudience.accessClaims(token) }
    }
}
