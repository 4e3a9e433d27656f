import Storage
import Synchronization

extension Mutex {
    /// `body` on a copy of the rows, stored back only if it returns: each in-memory store call
    /// writes all of its change or nothing, as its one statement does in PostgreSQL, and of
    /// concurrent callers one goes first.
    borrowing func allOrNothing<T: Sendable>(_ body: (inout Value) throws(StorageError) -> T) throws(StorageError) -> T {
        try withLock { (value: inout Value) throws(StorageError) -> T in
            var copy = value
            let result = try body(&copy)
            value = copy
            return result
        }
    }
}
