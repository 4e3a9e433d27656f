import Crypto
import DeviceKeys
import Foundation
import JSON
@testable import LatchkeyServer
@testable import Storage
import Testing

/// SPEC "Portability" → "A vault the server cannot read (PRF)": the vault's rules over the
/// in-memory store, on a clock the test steps — created once, exact lengths, a wrap only for a
/// live passkey of the account, each step-up used once and spent only by a change that happens, a
/// revoked passkey's wrap gone, and the recovery wrap shown only to a not-held passkey session or
/// a completed recovery's session.
@Suite("Vault, in memory")
struct VaultServiceTests {
    static func user(_ n: UInt8) -> String { Base64URL.encode(Array(repeating: n, count: 16)) }
    static let ana = user(1), ben = user(2)
    static let first: [UInt8] = Array(repeating: 0xA1, count: 16), second: [UInt8] = Array(repeating: 0xA2, count: 16)
    static let bens: [UInt8] = Array(repeating: 0xB1, count: 16)
    static let salt = (0..<32).map { UInt8($0) }
    static func wrapped(_ fill: UInt8) -> [UInt8] { Array(repeating: fill, count: 60) }

    struct World {
        let clock = ManualClock(start: Date(timeIntervalSince1970: 1_770_000_000))
        let store = InMemoryVaultStore()
        let service: VaultService
        var jti = 0

        init() {
            service = VaultService(store: store, runtime: clock.runtime(random: SeededRandom(seed: 37).bytes))
            store.addPasskey(first, userId: ana)
            store.addPasskey(second, userId: ana)
            store.addPasskey(bens, userId: ben)
            store.addSession("s-pk", userId: ana, method: .passkey, credentialId: first, at: clock.now())
        }

        mutating func stepUp(_ user: String, _ action: StepUpAction) -> StepUpRedemption {
            jti += 1
            return store.stepUp(user, action.hash, jti: "jti-\(jti)")
        }

        func body(_ name: String, _ bytes: [UInt8]) -> JSONValue { .object([(name, .string(Base64URL.encode(bytes)))]) }

        func create(_ user: String = ana) throws -> ShownVault {
            try service.create(try CreateVault(body("prfSalt", salt)), userId: user)
        }

        mutating func wrap(_ credential: [UInt8], _ key: [UInt8], user: String = ana) throws {
            let action = try StepUpAction.vaultWrap(credentialId: Base64URL.encode(credential))
            try service.wrap(try WrappedKeyBody(body("wrappedKey", key)), credentialId: credential, userId: user, redeeming: stepUp(user, action))
        }
    }

    @Test("a vault is created once: the salt never changes (409 conflict), and it starts with no wraps")
    func createdOnce() throws {
        let w = World()
        let shown = try w.create()
        #expect(shown.vault.prfSalt == Self.salt && shown.vault.wrapped.isEmpty && shown.vault.recoveryWrappedKey == nil)
        #expect(refusal { _ = try w.service.create(try CreateVault(w.body("prfSalt", Array(repeating: 9, count: 32))), userId: Self.ana) } == .conflict)
        #expect(try w.service.show(userId: Self.ana, sessionId: "s-pk").vault.prfSalt == Self.salt)
        #expect(w.store.snapshot.audit.map(\.action) == ["vault.created"])
    }

    @Test("bodies with anything but exact base64url lengths are invalid_request")
    func exactLengths() {
        let bad: [JSONValue] = [
            .null, "x", .array([]), .object([]), .object([("prfSalt", 5)]), .object([("prfSalt", .string(Base64URL.encode(Array(repeating: 1, count: 31))))]),
            .object([("prfSalt", .string(Base64URL.encode(Array(repeating: 1, count: 33))))]),
            .object([("prfSalt", .string(Base64URL.encode(Self.salt) + "="))]), .object([("prfSalt", "!!!!")]),
            .object([("prfSalt", .string(Base64URL.encode(Self.salt))), ("other", 1)]),
            .object([("prfSalt", .string(String(repeating: "A", count: 5000)))]),
        ]
        for body in bad { #expect(refusal { _ = try CreateVault(body) } == .invalidRequest, "\(body)") }
        #expect(refusal { _ = try CreateVault(.object([("prfSalt", .string(Base64URL.encode(Self.salt)))])) } == nil)
        for n in [0, 1, 32, 44, 59, 61, 120] {
            #expect(refusal { _ = try WrappedKeyBody(.object([("wrappedKey", .string(Base64URL.encode(Array(repeating: 3, count: n))))])) } == .invalidRequest, "\(n)")
        }
        #expect(refusal { _ = try WrappedKeyBody(.object([("wrappedKey", .string(Base64URL.encode(Self.wrapped(3))))])) } == nil)
    }

    @Test("a wrap needs the vault and a live passkey of the account; otherwise 404 and the step-up stays unspent")
    func wrapsOnlyLivePasskeysOfTheAccount() throws {
        var w = World()
        // No vault yet.
        #expect(refusal { try w.wrap(Self.first, Self.wrapped(1)) } == .notFound)
        _ = try w.create()
        // Ben's passkey, an unknown one, a revoked one.
        #expect(refusal { try w.wrap(Self.bens, Self.wrapped(1)) } == .notFound)
        #expect(refusal { try w.wrap(Array(repeating: 0xEE, count: 16), Self.wrapped(1)) } == .notFound)
        try w.wrap(Self.first, Self.wrapped(1))
        try w.wrap(Self.second, Self.wrapped(2))
        // Every refused change left its step-up unused; the two that happened used theirs.
        #expect(w.store.snapshot.redeemable.count == 3)
        let shown = try w.service.show(userId: Self.ana, sessionId: "s-pk")
        #expect(shown.vault.wrapped == [WrappedVaultKey(credentialId: Self.first, wrappedKey: Self.wrapped(1)),
                                        WrappedVaultKey(credentialId: Self.second, wrappedKey: Self.wrapped(2))])
        // A new wrap for a passkey replaces its old one.
        try w.wrap(Self.first, Self.wrapped(7))
        #expect(try w.service.show(userId: Self.ana, sessionId: "s-pk").vault.wrapped.first?.wrappedKey == Self.wrapped(7))
        // Revoked: its wrap is gone, and it takes no new one.
        w.store.revoke(Self.second)
        #expect(try w.service.show(userId: Self.ana, sessionId: "s-pk").vault.wrapped.map(\.credentialId) == [Self.first])
        #expect(refusal { try w.wrap(Self.second, Self.wrapped(2)) } == .notFound)
        #expect(w.store.snapshot.audit.map(\.action) == ["vault.created", "vault.wrapped", "vault.wrapped", "vault.wrapped"])
    }

    @Test("a step-up is used once: a second change with the same one is step_up_required")
    func stepUpOnce() throws {
        var w = World()
        _ = try w.create()
        let action = try StepUpAction.vaultWrap(credentialId: Base64URL.encode(Self.first))
        let once = w.stepUp(Self.ana, action)
        let body = try WrappedKeyBody(w.body("wrappedKey", Self.wrapped(1)))
        try w.service.wrap(body, credentialId: Self.first, userId: Self.ana, redeeming: once)
        #expect(refusal { try w.service.wrap(body, credentialId: Self.first, userId: Self.ana, redeeming: once) } == .stepUpRequired)
        let recovery = w.stepUp(Self.ana, try StepUpAction.vaultRecovery())
        try w.service.setRecovery(try WrappedKeyBody(w.body("wrappedKey", Self.wrapped(9))), userId: Self.ana, redeeming: recovery)
        #expect(refusal { try w.service.setRecovery(try WrappedKeyBody(w.body("wrappedKey", Self.wrapped(9))), userId: Self.ana,
                                                    redeeming: recovery) } == .stepUpRequired)
    }

    @Test("the recovery wrap: 404 without a vault; shown to a not-held passkey session and a completed recovery's, never to an email session or a held passkey's")
    func recoveryShownToTheRightSessions() throws {
        var w = World()
        let recovery = w.stepUp(Self.ana, try StepUpAction.vaultRecovery())
        #expect(refusal { try w.service.setRecovery(try WrappedKeyBody(w.body("wrappedKey", Self.wrapped(9))), userId: Self.ana,
                                                    redeeming: recovery) } == .notFound)
        #expect(refusal { _ = try w.service.show(userId: Self.ana, sessionId: "s-pk") } == .notFound)
        _ = try w.create()
        try w.service.setRecovery(try WrappedKeyBody(w.body("wrappedKey", Self.wrapped(9))), userId: Self.ana, redeeming: recovery)
        let now = w.clock.now()
        let held: [UInt8] = Array(repeating: 0xA3, count: 16)
        w.store.addPasskey(held, userId: Self.ana, approvesFrom: now.addingTimeInterval(3600))
        w.store.addSession("s-email", userId: Self.ana, method: .email, credentialId: nil, at: now)
        w.store.addSession("s-held", userId: Self.ana, method: .passkey, credentialId: held, at: now)
        w.store.addSession("s-recovered", userId: Self.ana, method: .recovery, credentialId: held, at: now)
        func shown(_ session: String) throws -> Bool {
            VaultRenderer.vault(try w.service.show(userId: Self.ana, sessionId: session))["recovery"]?["wrappedKey"]?.stringValue
                == Base64URL.encode(Self.wrapped(9))
        }
        #expect(try shown("s-pk"))
        #expect(try shown("s-recovered"))
        #expect(try !shown("s-email"))
        #expect(try !shown("s-held"))
        // The hold ends: that passkey's session now sees it.
        w.clock.advance(3601)
        #expect(try shown("s-held"))
        // A revoked session reads nothing (401), another account's session id is not this one's.
        w.store.endSession("s-email")
        #expect(refusal { _ = try w.service.show(userId: Self.ana, sessionId: "s-email") } == .unauthorized)
        #expect(refusal { _ = try w.service.show(userId: Self.ben, sessionId: "s-pk") } == .unauthorized)
    }

    @Test("the rendered vault: every wrap A256GCM, the recovery null where not shown")
    func rendered() throws {
        var w = World()
        _ = try w.create()
        try w.wrap(Self.first, Self.wrapped(1))
        let json = VaultRenderer.vault(try w.service.show(userId: Self.ana, sessionId: "s-pk"))
        #expect(json.objectValue?.map(\.key) == ["prfSalt", "wrapped", "recovery"])
        #expect(json["prfSalt"]?.stringValue == Base64URL.encode(Self.salt))
        #expect(json["wrapped"]?.arrayValue?.first?.objectValue?.map(\.key) == ["credentialId", "wrappedKey", "alg"])
        #expect(json["wrapped"]?.arrayValue?.first?["alg"]?.stringValue == "A256GCM")
        #expect(json["recovery"]?.isNull == true)
    }
}
