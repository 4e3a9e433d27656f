import Crypto
import Foundation
import Storage
import Synchronization

/// The ceremony-sealing key (SPEC "Rules that must hold" → Challenges): ceremony state travels
/// sealed inside the challenge the browser signs, so options write nothing and any instance opens
/// what another sealed. The key is HKDF-SHA-256(KEK, "latchkey ceremony seal v1"); without a KEK
/// (development mode) a key generated once and kept in the database (`server_secrets`). After
/// `latchkey keys rotate --new-key` the previous key (stored sealed under the new KEK,
/// `ceremony_seal_keys`) still opens for LATCHKEY_CHALLENGE_TTL after the rotation.
///
/// A sealed value, version 1, of one length for a given plaintext length:
///
///     0x01 ‖ key id (4) ‖ nonce (12, random) ‖ AES-256-GCM ciphertext ‖ tag (16)
///
/// with associated data "latchkey ceremony seal v1" ‖ 0x00 ‖ rpId ‖ 0x00 ‖ version ‖ key id, so a
/// value sealed for another relying party does not open here.
final class CeremonySeal: Sendable {
    struct Key: Sendable {
        let id: [UInt8]
        let bytes: [UInt8]
        /// A retired key: opens until this instant (`Runtime.now`); nil for the current key.
        let acceptedUntil: Date?

        init(bytes: [UInt8], acceptedUntil: Date? = nil) {
            self.bytes = bytes
            id = Array(Digest.sha256(Array("latchkey ceremony seal key id v1".utf8) + [0] + bytes).prefix(4))
            self.acceptedUntil = acceptedUntil
        }
    }

    static let info = Array("latchkey ceremony seal v1".utf8)
    static let version: UInt8 = 1
    static let headerSize = 1 + 4
    static let overhead = headerSize + AESGCM.nonceSize + AESGCM.tagSize
    /// `server_secrets` row of the development key (no KEK).
    static let developmentSecretName = "ceremony-seal"
    /// `SealedSecret` purpose of a retired key in `ceremony_seal_keys`.
    static let retiredPurpose = "ceremony_seal_keys"

    /// The key a KEK derives.
    static func key(from kek: KeyEncryptionKey) -> Key { Key(bytes: HKDF.sha256(key: kek.bytes, info: info)) }

    let kek: KeyEncryptionKey?
    let keys: any CeremonySealKeys
    let runtime: Runtime
    let challengeTTL: Int
    private let loaded = Mutex<(current: Key, retired: [Key])?>(nil)

    init(kek: KeyEncryptionKey?, keys: any CeremonySealKeys, runtime: Runtime, challengeTTL: Int) {
        self.kek = kek
        self.keys = keys
        self.runtime = runtime
        self.challengeTTL = challengeTTL
    }

    /// The current key and the retired ones still accepted: read once per process (the retired keys'
    /// window is fixed at the rotation, so an instance started later finds none left).
    func load() throws(ServiceError) -> (current: Key, retired: [Key]) {
        if let hit = loaded.withLock({ $0 }) { return hit }
        let value: (current: Key, retired: [Key])
        if let kek {
            let rows = try storage { () throws(StorageError) in try keys.retiredCeremonySealKeys(acceptedForSeconds: challengeTTL) }
            let now = runtime.now()
            // A row this KEK cannot open was retired by another rotation: not this deployment's
            // previous key, skipped.
            let retired = rows.compactMap { row -> Key? in
                guard let bytes = try? SealedSecret.open(row.sealed, with: kek, binding: Self.binding(row.keyId)) else { return nil }
                let key = Key(bytes: bytes, acceptedUntil: now.addingTimeInterval(row.remaining))
                return key.id == row.keyId ? key : nil
            }
            value = (Self.key(from: kek), retired)
        } else {
            let random = runtime.random
            let bytes = try storage { () throws(StorageError) in try keys.secret(named: Self.developmentSecretName, candidate: random(32)) }
            guard bytes.count == 32 else { throw ServiceError(.internalError, "the ceremony-sealing key is unreadable") }
            value = (Key(bytes: bytes), [])
        }
        loaded.withLock { $0 = value }
        return value
    }

    static func binding(_ keyId: [UInt8]) -> SealedSecret.Binding {
        SealedSecret.Binding(purpose: retiredPurpose, id: Hex.encode(keyId))
    }

    /// `plaintext` sealed under the current key for `rpId`.
    func seal(_ plaintext: [UInt8], rpId: String) throws(ServiceError) -> [UInt8] {
        let key = try load().current
        let header = [Self.version] + key.id
        do {
            let sealed = try AESGCM.seal(plaintext, key: key.bytes, associatedData: Self.associatedData(rpId, header),
                                         nonce: runtime.random(AESGCM.nonceSize))
            return header + sealed.nonce + sealed.ciphertext + sealed.tag
        } catch {
            throw ServiceError(.internalError, "could not seal the ceremony state")
        }
    }

    /// The plaintext of a value `seal` made for `rpId` with the current key, or a retired one still
    /// accepted; anything else (another length, key or relying party, an altered byte) is
    /// `challenge_invalid`.
    func open(_ sealed: [UInt8], plaintextLength: Int, rpId: String) throws(ServiceError) -> [UInt8] {
        guard sealed.count == Self.overhead + plaintextLength, sealed[0] == Self.version else {
            throw ServiceError(.challengeInvalid, "unknown challenge")
        }
        let (current, retired) = try load()
        let id = Array(sealed[1..<Self.headerSize])
        let now = runtime.now()
        guard let key = ([current] + retired).first(where: { $0.id == id }) else { throw ServiceError(.challengeInvalid, "unknown challenge") }
        if let until = key.acceptedUntil, until <= now {
            throw ServiceError(.challengeInvalid, "the challenge was sealed under a key no longer accepted")
        }
        let nonceEnd = Self.headerSize + AESGCM.nonceSize
        let box = AESGCM.Sealed(nonce: Array(sealed[Self.headerSize..<nonceEnd]), ciphertext: Array(sealed[nonceEnd..<(sealed.count - AESGCM.tagSize)]),
                                tag: Array(sealed[(sealed.count - AESGCM.tagSize)...]))
        do { return try AESGCM.open(box, key: key.bytes, associatedData: Self.associatedData(rpId, Array(sealed[0..<Self.headerSize]))) } catch {
            throw ServiceError(.challengeInvalid, "unknown challenge")
        }
    }

    static func associatedData(_ rpId: String, _ header: [UInt8]) -> [UInt8] {
        info + [0] + Array(rpId.utf8) + [0] + header
    }
}

/// The ceremony-sealing key's storage (`CeremonySeal`): the development key kept in
/// `server_secrets`, and the keys a KEK rotation retired (`KeyRepository`).
protocol CeremonySealKeys: DeploymentSecretSource {
    func retiredCeremonySealKeys(acceptedForSeconds: Int) throws(StorageError) -> [(keyId: [UInt8], sealed: [UInt8], remaining: Double)]
}

extension KeyRepository: CeremonySealKeys {}

extension SigningKeyStore {
    /// What `reencrypt(to:)` stores beside the re-sealed signing keys: the ceremony-sealing key the
    /// current KEK derives, sealed under `newKEK`, so challenges sealed before the instances restart
    /// still open for a challenge's lifetime.
    static func retiringCeremonyKey(from kek: KeyEncryptionKey, to newKEK: KeyEncryptionKey,
                                    random: (Int) -> [UInt8]) throws(CryptoError) -> (keyId: [UInt8], sealed: [UInt8]) {
        let key = CeremonySeal.key(from: kek)
        return (key.id, try SealedSecret.seal(key.bytes, under: newKEK, binding: CeremonySeal.binding(key.id), nonce: random(AESGCM.nonceSize)))
    }
}
