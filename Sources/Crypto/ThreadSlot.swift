#if canImport(Glibc)
import Glibc
#endif

/// Which of `count` shards the calling thread uses (`SecureRandom`'s buffers, the server's metric
/// counters): its id, the address of its control block, hashed (Fibonacci hashing), so threads
/// whose control blocks lie next to each other land apart.
public enum ThreadSlot {
    public static func current(of count: Int) -> Int {
        Int(truncatingIfNeeded: (UInt64(pthread_self()) &* 0x9E37_79B9_7F4A_7C15) >> 60) % count
    }
}
