import Crypto

/// RFC 9162 §2.1 Merkle tree hashing over SHA-256.
///
/// Proofs are built from *complete subtrees*: the node at `level` and `index` is the Merkle Tree Hash
/// of the `2^level` leaves starting at `index << level`. Every hash RFC 9162's recursions need is such
/// a node or is computed from them, so a store that keeps the complete subtrees of a tree can answer
/// any proof (`MerkleTree.inclusionProof`, `MerkleTree.consistencyProof`) without the leaves.
public enum MerkleTree {
    public static let hashLength = 32

    /// RFC 9162 §2.1.1: `SHA-256(0x00 || data)`.
    public static func leafHash(_ data: [UInt8]) -> [UInt8] { Digest.sha256([0x00] + data) }

    /// RFC 9162 §2.1.1: `SHA-256(0x01 || left || right)`.
    public static func nodeHash(_ left: [UInt8], _ right: [UInt8]) -> [UInt8] { Digest.sha256([0x01] + left + right) }

    /// MTH of the empty tree: SHA-256 of the empty string.
    public static let emptyRoot: [UInt8] = Digest.sha256([UInt8]())

    /// A complete subtree: `2^level` leaves starting at `index << level`.
    public struct Node: Hashable, Sendable, CustomStringConvertible {
        public let level: Int
        public let index: UInt64
        public init(level: Int, index: UInt64) { self.level = level; self.index = index }
        public var description: String { "(\(level), \(index))" }
    }

    /// The largest power of two strictly smaller than `n` (n ≥ 2), RFC 9162 §2.1.1's k.
    static func split(_ n: UInt64) -> UInt64 {
        precondition(n >= 2)
        return UInt64(1) << (63 - (n - 1).leadingZeroBitCount)
    }

    /// The complete subtrees whose hashes make MTH(D[start:end]) for a range RFC 9162's recursion
    /// visits (its start aligned to the largest power of two below its length), left to right.
    public static func decomposition(start: UInt64, end: UInt64) -> [Node] {
        var nodes: [Node] = []
        var a = start
        while a < end {
            let size = end - a
            // The largest power of two ≤ size that `a` is aligned to.
            var level = 63 - size.leadingZeroBitCount
            while level > 0 && a & ((UInt64(1) << level) - 1) != 0 { level -= 1 }
            nodes.append(Node(level: level, index: a >> level))
            a += UInt64(1) << level
        }
        return nodes
    }

    /// MTH(D[start:end]) from the complete subtrees it decomposes into (`decomposition`).
    public static func rangeHash(start: UInt64, end: UInt64, node: (Node) throws -> [UInt8]) rethrows -> [UInt8] {
        if start == end { return emptyRoot }
        let hashes = try decomposition(start: start, end: end).map(node)
        // Right to left: the RFC's recursion puts every smaller right part under the node on its left.
        var acc = hashes[hashes.count - 1]
        for h in hashes.dropLast().reversed() { acc = nodeHash(h, acc) }
        return acc
    }

    /// The root of a tree of `size` leaves.
    public static func root(size: UInt64, node: (Node) throws -> [UInt8]) rethrows -> [UInt8] {
        try rangeHash(start: 0, end: size, node: node)
    }

    /// The root of the tree whose leaf hashes are given.
    public static func root(leafHashes: [[UInt8]]) -> [UInt8] {
        let tree = CompleteSubtrees(leafHashes: leafHashes)
        return root(size: UInt64(leafHashes.count)) { tree.nodes[$0]! }
    }

    /// RFC 9162 §2.1.3.1: the inclusion proof of leaf `index` in the tree of `size` leaves, from the
    /// leaf's sibling up to the root's child.
    public static func inclusionProof(index: UInt64, size: UInt64, node: (Node) throws -> [UInt8]) throws -> [[UInt8]] {
        guard index < size else { throw TransparencyError("the index \(index) is not in a tree of size \(size)") }
        var proof: [[UInt8]] = []
        var (a, b, m) = (UInt64(0), size, index)
        // PATH(m, D[a:b]) appends its sibling's hash after the deeper part: collect top-down, reverse.
        while b - a > 1 {
            let k = split(b - a)
            if m < k {
                proof.append(try rangeHash(start: a + k, end: b, node: node))
                b = a + k
            } else {
                proof.append(try rangeHash(start: a, end: a + k, node: node))
                a += k
                m -= k
            }
        }
        return proof.reversed()
    }

    /// RFC 9162 §2.1.4.1: the consistency proof from the tree of `oldSize` leaves to that of `size`.
    /// Empty when `oldSize` is 0 or equals `size` (tlog-witness sends no lines for `old 0`).
    public static func consistencyProof(oldSize: UInt64, size: UInt64, node: (Node) throws -> [UInt8]) throws -> [[UInt8]] {
        guard oldSize <= size else { throw TransparencyError("the old size \(oldSize) is larger than \(size)") }
        if oldSize == 0 || oldSize == size { return [] }
        var proof: [[UInt8]] = []
        var (a, b, m, complete) = (UInt64(0), size, oldSize, true)
        // SUBPROOF(m, D[a:b], complete)
        while true {
            if m == b - a {
                if !complete { proof.append(try rangeHash(start: a, end: b, node: node)) }
                break
            }
            let k = split(b - a)
            if m <= k {
                proof.append(try rangeHash(start: a + k, end: b, node: node))
                b = a + k
            } else {
                proof.append(try rangeHash(start: a, end: a + k, node: node))
                a += k
                m -= k
                complete = false
            }
        }
        return proof.reversed()
    }

    /// The complete subtrees an inclusion proof of `index` in a tree of `size` reads, and those of the
    /// consistency proof from `oldSize`: what a store loads in one query to answer them.
    public static func nodesForInclusion(index: UInt64, size: UInt64) -> Set<Node> {
        var recorder = Set<Node>()
        _ = try? inclusionProof(index: index, size: size) { recorder.insert($0); return [] }
        return recorder
    }

    public static func nodesForConsistency(oldSize: UInt64, size: UInt64) -> Set<Node> {
        var recorder = Set<Node>()
        _ = try? consistencyProof(oldSize: oldSize, size: size) { recorder.insert($0); return [] }
        return recorder
    }

    /// RFC 9162 §2.1.3.2: does `proof` bind `leafHash` at `index` to `root` of a tree of `size`?
    public static func verifyInclusion(index: UInt64, size: UInt64, leafHash: [UInt8], proof: [[UInt8]], root: [UInt8]) -> Bool {
        guard index < size, let r = walk(fn: index, sn: size - 1, seed: leafHash, left: nil, path: proof) else { return false }
        return constantTimeEquals(r.right, root)
    }

    /// RFC 9162 §2.1.4.2: does `proof` show the tree of `oldSize` (root `oldRoot`) is a prefix of the
    /// tree of `size` (root `root`)? An old size of 0 is consistent with any tree (the proof empty).
    public static func verifyConsistency(oldSize: UInt64, size: UInt64, oldRoot: [UInt8], root: [UInt8], proof: [[UInt8]]) -> Bool {
        guard oldSize <= size else { return false }
        if oldSize == 0 { return proof.isEmpty }
        if oldSize == size { return proof.isEmpty && constantTimeEquals(oldRoot, root) }
        guard !proof.isEmpty, proof.allSatisfy({ $0.count == hashLength }) else { return false }
        var path = proof
        // Step 2: an old tree that is a complete subtree is its own first hash.
        if oldSize & (oldSize - 1) == 0 { path.insert(oldRoot, at: 0) }
        var fn = oldSize - 1, sn = size - 1
        while fn & 1 == 1 { fn >>= 1; sn >>= 1 }
        guard let r = walk(fn: fn, sn: sn, seed: path[0], left: path[0], path: path.dropFirst()), let fr = r.left else { return false }
        return constantTimeEquals(fr, oldRoot) && constantTimeEquals(r.right, root)
    }

    /// The walk both RFC 9162 verifications make (§2.1.3.2, §2.1.4.2): `path` climbed
    /// from node `fn` of a tree whose last node is `sn`. `right` (r, sr) takes every hash; `left`
    /// (fr, kept only when given) takes those on its left. Nil when a hash is not 32 bytes or the
    /// path's length does not fit the tree.
    private static func walk(fn: UInt64, sn: UInt64, seed: [UInt8], left: [UInt8]?,
                             path: some Sequence<[UInt8]>) -> (right: [UInt8], left: [UInt8]?)? {
        var (fn, sn, right, left) = (fn, sn, seed, left)
        for p in path {
            guard p.count == hashLength, sn != 0 else { return nil }
            if fn & 1 == 1 || fn == sn {
                right = nodeHash(p, right)
                left = left.map { nodeHash(p, $0) }
                if fn & 1 == 0 {
                    while fn & 1 == 0 && fn != 0 { fn >>= 1; sn >>= 1 }
                }
            } else {
                right = nodeHash(right, p)
            }
            fn >>= 1; sn >>= 1
        }
        return sn == 0 ? (right, left) : nil
    }
}

/// Every complete subtree of a tree, built from its leaf hashes; what an append adds
/// (`appending`) given the right edge the tree had.
public struct CompleteSubtrees: Sendable {
    public private(set) var nodes: [MerkleTree.Node: [UInt8]] = [:]

    public init(leafHashes: [[UInt8]]) {
        nodes = Self.appending(leafHashes: leafHashes, at: 0, rightEdge: [:])
    }

    /// The right edge of a tree of `size` leaves: the complete subtrees of its decomposition, the only
    /// existing nodes an append combines with new ones.
    public static func rightEdge(size: UInt64) -> [MerkleTree.Node] { MerkleTree.decomposition(start: 0, end: size) }

    /// The nodes that appending `leafHashes` to a tree of `size` leaves creates (level 0 included),
    /// given the hashes of that tree's right edge.
    public static func appending(leafHashes: [[UInt8]], at size: UInt64, rightEdge: [MerkleTree.Node: [UInt8]]) -> [MerkleTree.Node: [UInt8]] {
        var created: [MerkleTree.Node: [UInt8]] = [:]
        func hash(_ node: MerkleTree.Node) -> [UInt8] { created[node] ?? rightEdge[node]! }
        for (offset, leaf) in leafHashes.enumerated() {
            let index = size + UInt64(offset)
            created[.init(level: 0, index: index)] = leaf
            // A leaf at an odd position completes its parent; climb while the node is a right child.
            var level = 0, i = index
            while i & 1 == 1 {
                let parent = MerkleTree.nodeHash(hash(.init(level: level, index: i - 1)), hash(.init(level: level, index: i)))
                level += 1
                i >>= 1
                created[.init(level: level, index: i)] = parent
            }
        }
        return created
    }
}

public struct TransparencyError: Error, Equatable, CustomStringConvertible, Sendable {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}
