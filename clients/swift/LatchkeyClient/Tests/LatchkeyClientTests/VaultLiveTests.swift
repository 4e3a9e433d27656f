#if canImport(WebAuthnTesting)
import Foundation
import LatchkeyClient
import Testing
import WebAuthnTesting

/// The vault the server cannot read (docs/vault.md), end to end through URLSession against a real
/// `latchkey serve`: passkeys that evaluate PRF as `hmac-secret` does (SoftPRFPasskeys) and sign
/// real assertions the server verifies; the wraps, the recovery wrap and the data all in
/// VaultCrypto's bytes.
@Suite("The PRF vault against a live server", .serialized)
struct VaultLiveTests {
    @Test("register with PRF, create, wrap, encrypt, add and wrap a second passkey, revoke the first, unlock, recover, re-wrap")
    func story() async throws {
        try await withLiveServer("client-vault", environment: ["LATCHKEY_RECOVERY_DELAY": "0"]) { server in
            let latchkey = Latchkey(baseURL: server.baseURL)
            let phone = SoftPRFPasskeys(origin: server.origin)
            let username = "vera-\(UInt32.random(in: 0...UInt32.max))"
            let (first, registration) = phone.register(try await latchkey.registrationOptions(username: username, displayName: "Vera"))
            let signUp = try await latchkey.verifyRegistration(registration)
            #expect(signUp.passkey?.prfEnabled == true)
            let access = signUp.tokens.accessToken
            let firstId = Base64URL.encode(first.credentialID)
            #expect(try await latchkey.vault(accessToken: access) == nil)

            // Cancelled at its one prompt: nothing was stored, and creation works afterwards.
            phone.cancelNextPrompt()
            await #expect(throws: LatchkeyError.Code.authenticator.asError) {
                _ = try await latchkey.createVault(credentialId: firstId, accessToken: access, authenticator: phone)
            }
            #expect(try await latchkey.vault(accessToken: access) == nil)
            let open = try await latchkey.createVault(credentialId: firstId, accessToken: access, authenticator: phone)
            let created = try #require(try await latchkey.vault(accessToken: access))
            #expect(created.prfSalt.count == 32)
            #expect(created.wrapped.map(\.credentialId) == [firstId])
            #expect(Base64URL.decode(created.wrapped[0].wrappedKey)?.count == 60)
            await #expect(throws: LatchkeyError.Code.conflict.asError) {
                _ = try await latchkey.createVault(credentialId: firstId, accessToken: access, authenticator: phone)
            }
            await #expect(throws: LatchkeyError.Code.conflict.asError) { try await latchkey.putVault(prfSalt: created.prfSalt, accessToken: access) }
            let noteText = "Safe deposit box 1138 — the key is taped under the piano."
            let note = open.encrypt(noteText)

            // Recovery codes, and the vault recovery key shown once beside them.
            let codesStepUp = try await latchkey.stepUpWithPasskey(action: .recoveryCodesCreation, accessToken: access, assert: first.provider(origin: server.origin))
            let codes = try await latchkey.call("POST", "/v1/recovery-codes", body: [:], authorization: .bearer(access),
                                                headers: [("Latchkey-Step-Up", codesStepUp.token)])
            let recoveryCode = try #require(codes["codes"]?.arrayValue?.first?.stringValue)
            let vaultKey = try await latchkey.makeVaultRecoveryKey(open, accessToken: access, assert: first.provider(origin: server.origin))
            #expect(vaultKey.count == 52)
            #expect(try await latchkey.vault(accessToken: access)?.recoveryWrappedKey != nil)

            // A second passkey, and the data key wrapped for it (its own prompt: step-up and PRF at once).
            let addition = try await latchkey.stepUpWithPasskey(action: .passkeyAddition, accessToken: access, assert: first.provider(origin: server.origin))
            let (second, secondRegistration) = phone.register(try await latchkey.registrationOptions(.bearer(access), stepUpToken: addition.token))
            _ = try await latchkey.verifyRegistration(secondRegistration)
            let secondId = Base64URL.encode(second.credentialID)
            try await latchkey.wrapVault(open, for: secondId, accessToken: access, authenticator: phone)
            #expect(Set(try await latchkey.vault(accessToken: access)?.wrapped.map(\.credentialId) ?? []) == [firstId, secondId])

            // The first revoked (from a session of the second: a session ends with the passkey it began
            // with): its wrap goes with it; the second opens the vault.
            let bySecond = try await latchkey.verifyAuthentication(second.assert(try await latchkey.authenticationOptions(), origin: server.origin))
            let revocation = try await latchkey.stepUpWithPasskey(action: try .passkeyRevocation(credentialId: firstId),
                                                                  accessToken: bySecond.tokens.accessToken, assert: second.provider(origin: server.origin))
            try await latchkey.revokePasskey(id: firstId, accessToken: bySecond.tokens.accessToken, stepUpToken: revocation.token)
            phone.lose(first)
            #expect(try await latchkey.vault(accessToken: bySecond.tokens.accessToken)?.wrapped.map(\.credentialId) == [secondId])
            let unlocked = try await latchkey.unlockVault(accessToken: bySecond.tokens.accessToken, authenticator: phone)
            #expect(unlocked.credentialId == secondId)
            #expect(try unlocked.decryptText(note) == noteText)
            #expect(unlocked.dataKey == open.dataKey)

            // Every passkey lost; the account recovered with a recovery code and a new passkey.
            phone.lose(second)
            let started = try await latchkey.call("POST", "/v1/recovery/verify",
                                                  body: ["username": .string(username), "recoveryCode": .string(recoveryCode)])
            let recoveryToken = try #require(started["recoveryToken"]?.stringValue)
            let (third, thirdRegistration) = phone.register(try await latchkey.registrationOptions(.unbound(recoveryToken)))
            let recovered = try await latchkey.verifyRegistration(thirdRegistration)
            let recoveredAccess = recovered.tokens.accessToken
            let thirdId = Base64URL.encode(third.credentialID)
            // No passkey on the phone opens it now; the vault recovery key does (a wrong one does not).
            await #expect(throws: LatchkeyError.Code.authenticator.asError) {
                _ = try await latchkey.unlockVault(accessToken: recoveredAccess, authenticator: phone)
            }
            await #expect(throws: LatchkeyError.Code.vaultLocked.asError) {
                _ = try await latchkey.openVault(recoveryCode: VaultCrypto.recoveryCode(VaultCrypto.randomBytes(32)), accessToken: recoveredAccess)
            }
            let byKey = try await latchkey.openVault(recoveryCode: vaultKey.lowercased(), accessToken: recoveredAccess)
            #expect(try byKey.decryptText(note) == noteText)
            try await latchkey.wrapVault(byKey, for: thirdId, accessToken: recoveredAccess, authenticator: phone)
            let byThird = try await latchkey.unlockVault(accessToken: recoveredAccess, authenticator: phone)
            #expect(byThird.credentialId == thirdId)
            #expect(try byThird.decryptText(note) == noteText)

            // The server's whole database: the salt and the wraps are there; no PRF output, data key,
            // key-wrapping key or vault recovery key, in base64url, base64 or hex.
            let dump = try LiveServer.run("pg_dump", ["--data-only", server.databaseURL])
            let wraps = try await latchkey.vault(accessToken: recoveredAccess)
            #expect(dump.contains(hex(created.prfSalt)))
            for wrapped in wraps?.wrapped ?? [] { #expect(dump.contains(hex(try #require(Base64URL.decode(wrapped.wrappedKey))))) }
            var secrets = phone.outputs + [Data(open.dataKey), Data(try #require(VaultCrypto.parseRecoveryCode(vaultKey)))]
            for output in phone.outputs {
                for id in [first.credentialID, second.credentialID, third.credentialID] {
                    secrets.append(Data(VaultCrypto.keyWrappingKey(prfOutput: [UInt8](output), userHandle: first.authenticator.userHandle ?? [], credentialId: [UInt8](id))))
                }
            }
            #expect(phone.outputs.count >= 5)
            for secret in secrets {
                for spelling in [Base64URL.encode(secret), secret.base64EncodedString(), hex(secret)] {
                    #expect(!dump.contains(spelling), "a secret reached the server's database")
                }
            }
        }
    }

    func hex(_ d: Data) -> String { d.map { String(format: "%02x", $0) }.joined() }
}
#endif
