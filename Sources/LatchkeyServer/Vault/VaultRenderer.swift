import Crypto
import JSON
import Storage

/// The vault as the API shows it (SPEC "Portability").
enum VaultRenderer {
    /// `{"prfSalt","wrapped":[{"credentialId","wrappedKey","alg":"A256GCM"}],"recovery":{"wrappedKey"}|null}`.
    static func vault(_ v: ShownVault) -> JSONValue {
        let recovery: JSONValue = v.recoveryShown ? v.vault.recoveryWrappedKey.map { .object([("wrappedKey", .string(Base64URL.encode($0)))]) } ?? .null
                                                  : .null
        return .object([
            ("prfSalt", .string(Base64URL.encode(v.vault.prfSalt))),
            ("wrapped", .array(v.vault.wrapped.map { w in
                .object([("credentialId", .string(Base64URL.encode(w.credentialId))), ("wrappedKey", .string(Base64URL.encode(w.wrappedKey))),
                         ("alg", "A256GCM")])
            })),
            ("recovery", recovery),
        ])
    }
}
