import Crypto
import Storage
import Transparency

/// What `latchkey log` and `latchkey keys rotate` do to the transparency log.
public enum TransparencyLogAdministration {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The origin after `old`: `<origin>/<n+1>` when `old` is `<origin>/<n>` (n ≥ 2), else `<old>/2`.
    static func nextOrigin(after old: String) -> String {
        if let slash = old.lastIndex(of: "/"), let n = Int(old[old.index(after: slash)...]), n >= 2, String(n) == old[old.index(after: slash)...] {
            return "\(old[..<slash])/\(n + 1)"
        }
        return "\(old)/2"
    }

    /// SPEC "No rollback": a new log under a new origin with a new key; the old log's leaves go and
    /// every receipt is appended again to the new one. Returns the new origin and its verifier key.
    public static func reset(database: Database, kek: KeyEncryptionKey?, runtime: Runtime = .system) throws -> (origin: String, verifierKey: String) {
        guard let kek else { throw Failure(description: "LATCHKEY_KEY_ENCRYPTION_KEY is not set: the transparency log is off") }
        let key = PrivateKey.generateEd25519()
        let publicKey = key.publicKey.rawEd25519!
        var made = ""
        let old = try database.transparencyLog.reset(origin: { old in made = nextOrigin(after: old); return made }, publicKey: publicKey) { origin in
            try SealedSecret.seal(Array(key.pkcs8PEM.utf8), under: kek, binding: .init(purpose: TransparencyLog.sealPurpose, id: origin),
                                  nonce: runtime.random(AESGCM.nonceSize))
        }
        guard old != nil else { throw Failure(description: "there is no transparency log yet (it is made by the first `serve` with a KEK)") }
        return (made, VerifierKey(name: made, type: .ed25519, publicKey: publicKey).description)
    }

    /// `keys rotate --new-key`: the log's key re-sealed from `kek` to `newKEK` (nothing when there is no log).
    public static func reseal(database: Database, from kek: KeyEncryptionKey, to newKEK: KeyEncryptionKey, runtime: Runtime = .system) throws {
        guard let state = try database.transparencyLog.state() else { return }
        let binding = SealedSecret.Binding(purpose: TransparencyLog.sealPurpose, id: state.origin)
        let plaintext: [UInt8]
        do { plaintext = try SealedSecret.open(state.sealedKey, with: kek, binding: binding) } catch {
            throw Failure(description: "the current LATCHKEY_KEY_ENCRYPTION_KEY cannot open the transparency log's key: \(error)")
        }
        let sealed = try SealedSecret.seal(plaintext, under: newKEK, binding: binding, nonce: runtime.random(AESGCM.nonceSize))
        guard try database.transparencyLog.reseal(from: state.sealedKey, to: sealed) else {
            throw Failure(description: "the transparency log's key changed meanwhile; run it again")
        }
    }
}
