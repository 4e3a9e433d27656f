internal import COpenSSL
import Synchronization

/// Per key: one initialised signing or verifying context per algorithm, copied for each use (a
/// copy is independent of its template, so several threads may sign or verify at once).
/// `EVP_DigestSignInit` / `EVP_DigestVerifyInit` look up the key's provider, the signature and the
/// digest by name on every call in OpenSSL 3; copying a context skips all three.
final class ContextTemplates: Sendable {
    private struct Contexts: @unchecked Sendable {
        var byAlgorithm: [SignatureAlgorithm: OpaquePointer] = [:]
        var seen: Set<SignatureAlgorithm> = []
    }
    private let contexts = Mutex(Contexts())
    /// A key used once (a verification key imported for one login) gains nothing from a template:
    /// with this set, the template is made on the second use.
    private let fromSecondUse: Bool

    init(fromSecondUse: Bool) { self.fromSecondUse = fromSecondUse }

    deinit {
        contexts.withLock { state in
            for ctx in state.byAlgorithm.values { EVP_MD_CTX_free(ctx) }
        }
    }

    /// Copies the template for `algorithm` into `ctx`, creating it with `setUp` when it is due.
    /// False when there is none yet, or it cannot be set up or copied: the caller then
    /// initialises `ctx` itself.
    func copy(into ctx: OpaquePointer, algorithm: SignatureAlgorithm, setUp: (OpaquePointer) -> Bool) -> Bool {
        contexts.withLock { state in
            if let template = state.byAlgorithm[algorithm] { return EVP_MD_CTX_copy_ex(ctx, template) == 1 || Self.clearedFalse() }
            if fromSecondUse, state.seen.insert(algorithm).inserted { return false }
            guard let template = EVP_MD_CTX_new() else { return false }
            guard setUp(template) else {
                EVP_MD_CTX_free(template)
                return Self.clearedFalse()
            }
            state.byAlgorithm[algorithm] = template
            return EVP_MD_CTX_copy_ex(ctx, template) == 1 || Self.clearedFalse()
        }
    }

    private static func clearedFalse() -> Bool {
        CryptoError.clearQueue()
        return false
    }
}
