#if canImport(WebAuthnTesting)
import Foundation
import LatchkeyClient
import Testing

/// The Swift vault and latchkey.js's `vaultCrypto` (web/latchkey.js, run by `node`) make and open
/// each other's bytes: wraps for a passkey, recovery wraps, the open vault's sealed data and the
/// 52-character code, for random inputs each run (VaultCryptoTests holds both to a fixed vector).
@Suite("VaultCrypto against latchkey.js")
struct VaultInteropTests {
    /// Runs `script` as an ES module beside web/latchkey.js with `input` as its argument; its stdout as JSON.
    func node(_ script: String, _ input: LatchkeyJSON) throws -> LatchkeyJSON {
        let module = LiveServer.repositoryRoot.appendingPathComponent("web/latchkey.js").path
        let source = "import { vaultCrypto, base64url } from '\(module)';\nconst input = JSON.parse(process.argv[1]);\n" + script
        let out = try LiveServer.run("node", ["--input-type=module", "-e", source, input.text])
        return try LatchkeyJSON(parsing: out)
    }

    @Test("a wrap, a recovery wrap and sealed data made by latchkey.js open here, and the other way round")
    func bothWays() throws {
        for round in 0..<8 {
            let prf = VaultCrypto.randomBytes(32), userHandle = VaultCrypto.randomBytes(1 + round * 9 % 64)
            let credentialId = VaultCrypto.randomBytes(16 + round * 5), dataKey = VaultCrypto.randomBytes(32)
            let recoveryKey = VaultCrypto.randomBytes(32)
            let e = { (b: [UInt8]) in LatchkeyJSON.string(Base64URL.encode(Data(b))) }
            let swiftWrap = VaultCrypto.wrapForPasskey(dataKey: dataKey, prfOutput: prf, userHandle: userHandle, credentialId: credentialId)
            let swiftRecovery = VaultCrypto.wrapForRecovery(dataKey: dataKey, recoveryKey: recoveryKey)
            let sealed = OpenVault(dataKey: dataKey, credentialId: nil).encrypt("note \(round) ☕")
            let input: LatchkeyJSON = .object([
                ("prf", e(prf)), ("userHandle", e(userHandle)), ("credentialId", e(credentialId)), ("dataKey", e(dataKey)),
                ("recoveryKey", e(recoveryKey)), ("swiftWrap", .string(swiftWrap)), ("swiftRecovery", .string(swiftRecovery)),
                ("swiftSealed", .string(sealed)),
            ])
            let js = try node("""
                const b = (s) => new Uint8Array(base64url.decode(s));
                const out = {
                  wrap: await vaultCrypto.wrapForPasskey(b(input.dataKey), b(input.prf), b(input.userHandle), b(input.credentialId)),
                  recovery: await vaultCrypto.wrapForRecovery(b(input.dataKey), b(input.recoveryKey)),
                  sealed: base64url.encode(await vaultCrypto.seal(new TextEncoder().encode('from js'), b(input.dataKey), new Uint8Array(0))),
                  code: vaultCrypto.recoveryCode(b(input.recoveryKey)),
                  openedWrap: base64url.encode(await vaultCrypto.unwrapForPasskey(input.swiftWrap, b(input.prf), b(input.userHandle), b(input.credentialId))),
                  openedRecovery: base64url.encode(await vaultCrypto.unwrapForRecovery(input.swiftRecovery, b(input.recoveryKey))),
                  openedSealed: new TextDecoder().decode(await vaultCrypto.open(input.swiftSealed, b(input.dataKey), new Uint8Array(0))),
                };
                process.stdout.write(JSON.stringify(out));
                """, input)
            // latchkey.js's bytes, opened here.
            let jsWrap = try #require(js["wrap"]?.stringValue), jsRecovery = try #require(js["recovery"]?.stringValue)
            #expect(try VaultCrypto.unwrapForPasskey(jsWrap, prfOutput: prf, userHandle: userHandle, credentialId: credentialId) == dataKey)
            #expect(try VaultCrypto.unwrapForRecovery(jsRecovery, recoveryKey: recoveryKey) == dataKey)
            #expect(try OpenVault(dataKey: dataKey, credentialId: nil).decryptText(try #require(js["sealed"]?.stringValue)) == "from js")
            #expect(js["code"]?.stringValue == VaultCrypto.recoveryCode(recoveryKey))
            #expect(VaultCrypto.parseRecoveryCode(try #require(js["code"]?.stringValue)) == recoveryKey)
            // A JS wrap does not open for another credential id (the AAD binds it).
            #expect(throws: VaultCrypto.Locked.self) {
                _ = try VaultCrypto.unwrapForPasskey(jsWrap, prfOutput: prf, userHandle: userHandle, credentialId: credentialId + [0])
            }
            // Swift's bytes, opened by latchkey.js.
            #expect(js["openedWrap"]?.stringValue == Base64URL.encode(Data(dataKey)))
            #expect(js["openedRecovery"]?.stringValue == Base64URL.encode(Data(dataKey)))
            #expect(js["openedSealed"]?.stringValue == "note \(round) ☕")
        }
    }
}
#endif
