import Crypto
import Tokens

/// Opaque bearer secrets (refresh tokens, tickets, cancel links): prefix + 32 random bytes from
/// `Runtime`, stored only as SHA-256.
struct OpaqueSecret {
    let token: String
    var hash: [UInt8] { OpaqueToken.hash(token) }

    init(prefix: String, runtime: Runtime) { token = prefix + Base64URL.encode(runtime.random(32)) }
    static func hash(_ presented: String) -> [UInt8] { OpaqueToken.hash(presented) }
}
