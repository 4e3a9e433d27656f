internal import COpenSSL
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Hash functions used by WebAuthn and the attestation formats. `EVP_MD`s are fetched once.
public enum HashFunction: Sendable, Hashable {
    case sha1, sha256, sha384, sha512

    public var outputLength: Int {
        switch self { case .sha1: 20; case .sha256: 32; case .sha384: 48; case .sha512: 64 }
    }

    var md: OpaquePointer { FetchedDigests.shared.md(self) }

    public func hash(_ data: [UInt8]) -> [UInt8] { data.withUnsafeBufferPointer { hash($0) } }

    public func hash(_ data: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: outputLength)
        var length: UInt32 = 0
        let ok = out.withUnsafeMutableBufferPointer { o in
            EVP_Digest(data.baseAddress, data.count, o.baseAddress, &length, md, nil)
        }
        precondition(ok == 1 && Int(length) == outputLength, "EVP_Digest failed")
        return out
    }
}

public enum Digest {
    public static func sha256(_ data: [UInt8]) -> [UInt8] { HashFunction.sha256.hash(data) }
    public static func sha256<S: Sequence>(_ data: S) -> [UInt8] where S.Element == UInt8 { HashFunction.sha256.hash(Array(data)) }
}

/// `EVP_MD_fetch` is expensive and takes a global lock; do it once per process.
final class FetchedDigests: @unchecked Sendable {
    static let shared = FetchedDigests()
    let sha1: OpaquePointer, sha256: OpaquePointer, sha384: OpaquePointer, sha512: OpaquePointer

    private init() {
        sha1 = EVP_MD_fetch(nil, "SHA1", nil)!
        sha256 = EVP_MD_fetch(nil, "SHA256", nil)!
        sha384 = EVP_MD_fetch(nil, "SHA384", nil)!
        sha512 = EVP_MD_fetch(nil, "SHA512", nil)!
    }

    func md(_ f: HashFunction) -> OpaquePointer {
        switch f { case .sha1: sha1; case .sha256: sha256; case .sha384: sha384; case .sha512: sha512 }
    }
}

/// Bytes from OpenSSL's CSPRNG (its DRBG, seeded from getrandom).
///
/// Small requests (challenges, ids, tokens: a login takes five) are served from a block drawn with
/// one `RAND_bytes` call: each call pays the DRBG's fixed cost (~7 k instructions, a lock and a
/// CTR-DRBG update), which is most of the price of 32 bytes. Bytes leave the block once and are
/// erased from it as they go. The process never forks (`posix_spawn` only), so no copy of the block
/// can be handed out twice; the DRBG state in the same memory would predict its output as well.
/// Each thread draws from one of `shardCount` blocks, picked by its thread id, so the request
/// threads do not queue on one lock (on a small machine a preempted holder made every other
/// thread spin and then sleep).
public enum SecureRandom {
    /// The largest request served from the block; larger ones call `RAND_bytes` directly.
    static let pooledLimit = 64
    static let blockSize = 1024

    private struct Block: ~Copyable {
        let bytes = UnsafeMutablePointer<UInt8>.allocate(capacity: SecureRandom.blockSize)
        /// Bytes before `next` were handed out (and zeroed).
        var next = SecureRandom.blockSize

        mutating func take(_ count: Int) -> [UInt8] {
            if next + count > SecureRandom.blockSize {
                precondition(RAND_bytes(bytes, Int32(SecureRandom.blockSize)) == 1, "RAND_bytes failed")
                next = 0
            }
            let start = bytes + next
            next += count
            return [UInt8](unsafeUninitializedCapacity: count) { out, initialized in
                out.baseAddress!.update(from: start, count: count)
                start.update(repeating: 0, count: count)
                initialized = count
            }
        }

        deinit {
            bytes.update(repeating: 0, count: SecureRandom.blockSize)
            bytes.deallocate()
        }
    }

    private final class Shard: Sendable {
        let block = Mutex(Block())
    }

    static let shardCount = 16
    private static let shards = (0..<shardCount).map { _ in Shard() }

    private static var shard: Shard { shards[ThreadSlot.current(of: shardCount)] }

    public static func bytes(_ count: Int) -> [UInt8] {
        guard count > 0 else { return [] }
        if count <= pooledLimit { return shard.block.withLock { $0.take(count) } }
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            precondition(RAND_bytes(buffer.baseAddress, Int32(count)) == 1, "RAND_bytes failed")
            initialized = count
        }
    }
}

/// Comparison whose duration does not depend on where the inputs differ.
public func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var diff: UInt8 = 0
    for i in 0..<a.count { diff |= a[i] ^ b[i] }
    return diff == 0
}

/// SHA-256 over bytes that arrive in pieces (a file read a line at a time), without holding them.
public final class StreamingSHA256 {
    private let context: OpaquePointer

    public init() {
        context = EVP_MD_CTX_new()!
        precondition(EVP_DigestInit_ex(context, FetchedDigests.shared.md(.sha256), nil) == 1, "EVP_DigestInit_ex failed")
    }

    deinit { EVP_MD_CTX_free(context) }

    public func update(_ bytes: [UInt8]) {
        let ok = bytes.withUnsafeBufferPointer { EVP_DigestUpdate(context, $0.baseAddress, $0.count) }
        precondition(ok == 1, "EVP_DigestUpdate failed")
    }

    /// The digest of everything given so far (the context is spent: call once).
    public func finish() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let ok = out.withUnsafeMutableBufferPointer { EVP_DigestFinal_ex(context, $0.baseAddress, &length) }
        precondition(ok == 1 && length == 32, "EVP_DigestFinal_ex failed")
        return out
    }
}
