import Crypto
import Foundation
import Storage
import Tokens

extension SigningKeyError {
    static func storage(_ error: StorageError) -> SigningKeyError { SigningKeyError(code: .storage, description: "\(error)") }
}

/// Token signing keys as PostgreSQL keeps them: each private key sealed (`SealedSecret`, AES-256-GCM
/// under the KEK, bound to its kid). Rows from before encryption hold a plaintext PEM until
/// `prepare()` seals them. Shared by TokenSigner (serve) and `latchkey keys`.
public final class SigningKeyStore: SigningKeySource, Sendable {
    let keys: KeyRepository
    let kek: KeyEncryptionKey?
    let runtime: Runtime

    public init(keys: KeyRepository, kek: KeyEncryptionKey?, runtime: Runtime = .system) {
        self.keys = keys
        self.kek = kek
        self.runtime = runtime
    }

    func requireKEK() throws(SigningKeyError) -> KeyEncryptionKey {
        guard let kek else {
            throw SigningKeyError(code: .keyEncryptionKeyMissing, description: """
                LATCHKEY_KEY_ENCRYPTION_KEY is not set: token signing keys are stored encrypted under it, \
                and outside development mode Latchkey does not start without it. Generate one with \
                `openssl rand -base64 32`, keep it outside the database (a secret store), and set it as base64 \
                or as @/path/to/file.
                """)
        }
        return kek
    }

    /// Start-up: a KEK is required; plaintext rows from before are sealed; every live key must open
    /// under this KEK, else Latchkey refuses to start (a wrong KEK, not a silently new key).
    public func prepare() throws(SigningKeyError) {
        let kek = try requireKEK()
        let all: [KeyRepository.StoredSigningKey]
        do { all = try keys.signingKeys(includingRetired: true) } catch { throw SigningKeyError.storage(error) }
        for row in all where row.sealed == nil {
            guard let pem = row.legacyPEM else { continue }
            let sealed: [UInt8]
            do { sealed = try seal(pem, kid: row.kid, under: kek) } catch {
                throw SigningKeyError(code: .storage, description: "cannot seal signing key \(row.kid): \(error)")
            }
            do { try keys.sealLegacyKey(kid: row.kid, sealed: sealed) } catch { throw SigningKeyError.storage(error) }
        }
        for case .unreadable(let kid, let reason, let under) in try load() {
            // One statement of each id: the key in use (and where it came from), and the one the row names.
            let sealedElsewhere = under.map { $0 != kek.idText } ?? false
            throw SigningKeyError(code: .keyEncryptionKeyWrong, description: """
                the key-encryption key from \(kek.source) (id \(kek.idText)) cannot open token signing key \(kid): \
                \(sealedElsewhere ? "it was sealed under another key-encryption key, id \(under!)" : reason). \
                Set LATCHKEY_KEY_ENCRYPTION_KEY to the key that sealed it (`latchkey keys list` shows each key's KEK id); \
                Latchkey refuses to start rather than lose or replace its keys.
                """)
        }
    }

    /// The live keys, newest first, each opened with the KEK or named as unreadable.
    public func load() throws(SigningKeyError) -> [StoredSigningKey] {
        let kek = try requireKEK()
        let rows: [KeyRepository.StoredSigningKey]
        do { rows = try keys.signingKeys() } catch { throw SigningKeyError.storage(error) }
        return rows.map { row in
            guard let envelope = row.sealed else {
                return .unreadable(kid: row.kid, reason: "not sealed yet", sealedUnder: nil)
            }
            do {
                let pem = try SealedSecret.open(envelope, with: kek, binding: .signingKey(row.kid))
                let key = SigningKey(try PrivateKey(pkcs8PEM: String(decoding: pem, as: UTF8.self)))
                guard key.kid == row.kid else {
                    return .unreadable(kid: row.kid, reason: "holds the key of another kid", sealedUnder: nil)
                }
                return .key(key)
            } catch let failure as SealedSecret.Failure {
                return .unreadable(kid: row.kid, reason: failure.description, sealedUnder: failure.sealedUnder)
            } catch {
                return .unreadable(kid: row.kid, reason: "not a private key", sealedUnder: nil)
            }
        }
    }

    public func newestKeyAge() throws(SigningKeyError) -> TimeInterval? {
        do { return try keys.newestSigningKeyAge() } catch { throw SigningKeyError.storage(error) }
    }

    /// A new signing key, sealed and stored (the newest two stay live); returns its kid.
    public func addNewKey() throws(SigningKeyError) -> String {
        let key = SigningKey.generate()
        try add(key)
        return key.kid
    }

    /// Every stored key, retired ones too, newest first (for `latchkey keys list`).
    public func stored() throws(SigningKeyError) -> [KeyRepository.StoredSigningKey] {
        do { return try keys.signingKeys(includingRetired: true) } catch { throw SigningKeyError.storage(error) }
    }

    /// Stores `key` sealed under the KEK; the newest two stay live.
    public func add(_ key: SigningKey) throws(SigningKeyError) {
        let kek = try requireKEK()
        let sealed: [UInt8]
        do { sealed = try seal(key.privateKey.pkcs8PEM, kid: key.kid, under: kek) } catch {
            throw SigningKeyError(code: .storage, description: "cannot seal signing key \(key.kid): \(error)")
        }
        do { try keys.insertSigningKey(kid: key.kid, sealed: sealed) } catch { throw SigningKeyError.storage(error) }
    }

    /// `latchkey keys rotate --new-key`: every key, retired ones too, re-sealed under `newKEK` in one
    /// transaction, with the ceremony-sealing key the current KEK derives (`CeremonySeal`: accepted
    /// for LATCHKEY_CHALLENGE_TTL more). Returns how many. Every key must open under the current KEK first.
    public func reencrypt(to newKEK: KeyEncryptionKey) throws(SigningKeyError) -> Int {
        try prepare()  // seals leftovers, proves the current KEK opens every live key
        let kek = try requireKEK()
        let rows: [KeyRepository.StoredSigningKey]
        do { rows = try keys.signingKeys(includingRetired: true) } catch { throw SigningKeyError.storage(error) }
        var changes: [(kid: String, from: [UInt8], to: [UInt8])] = []
        for row in rows {
            guard let envelope = row.sealed else { continue }
            do {
                let plaintext = try SealedSecret.open(envelope, with: kek, binding: .signingKey(row.kid))
                changes.append((row.kid, envelope, try SealedSecret.seal(plaintext, under: newKEK, binding: .signingKey(row.kid),
                                                                         nonce: runtime.random(AESGCM.nonceSize))))
            } catch {
                throw SigningKeyError(code: .keyEncryptionKeyWrong, description: """
                    the current LATCHKEY_KEY_ENCRYPTION_KEY (\(kek.idText)) cannot decrypt signing key \(row.kid)\
                    \(row.retired ? " (retired)" : ""): \(error); nothing was re-encrypted
                    """)
            }
        }
        let retiring: (keyId: [UInt8], sealed: [UInt8])
        do { retiring = try Self.retiringCeremonyKey(from: kek, to: newKEK, random: runtime.random) } catch {
            throw SigningKeyError(code: .storage, description: "cannot seal the retiring ceremony-sealing key: \(error)")
        }
        let done: Bool
        do { done = try keys.reseal(changes, retiring: retiring) } catch { throw SigningKeyError.storage(error) }
        guard done else {
            throw SigningKeyError(code: .conflict, description: "the signing keys changed while re-encrypting them; nothing was written, run it again")
        }
        return changes.count
    }

    private func seal(_ pem: String, kid: String, under kek: KeyEncryptionKey) throws(CryptoError) -> [UInt8] {
        try SealedSecret.seal(Array(pem.utf8), under: kek, binding: .signingKey(kid), nonce: runtime.random(AESGCM.nonceSize))
    }
}
