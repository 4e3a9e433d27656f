import Crypto
import Testing
import Transparency

/// RFC 6962's reference leaves and tree heads (the Certificate Transparency test data), then the
/// store-backed recursions checked against a naive recursive tree over random sizes.
@Suite struct MerkleTests {
    static let leaves: [[UInt8]] = ["", "00", "10", "2021", "3031", "40414243", "5051525354555657",
                                    "606162636465666768696a6b6c6d6e6f"].map { Hex.decode($0)! }
    static let roots = ["e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
                        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
                        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
                        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
                        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
                        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
                        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
                        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"]

    @Test func referenceRoots() {
        let hashes = Self.leaves.map(MerkleTree.leafHash)
        for n in 0...8 {
            #expect(Hex.encode(MerkleTree.root(leafHashes: Array(hashes[..<n]))) == Self.roots[n], "size \(n)")
        }
    }

    @Test func referenceInclusionProofs() throws {
        let tree = CompleteSubtrees(leafHashes: Self.leaves.map(MerkleTree.leafHash))
        let cases: [(UInt64, [String])] = [
            (0, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
                 "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                 "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
            (5, ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
                 "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
                 "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
        ]
        for (index, expected) in cases {
            let proof = try MerkleTree.inclusionProof(index: index, size: 8) { tree.nodes[$0]! }
            #expect(proof.map(Hex.encode) == expected)
            #expect(MerkleTree.verifyInclusion(index: index, size: 8, leafHash: MerkleTree.leafHash(Self.leaves[Int(index)]),
                                               proof: proof, root: Hex.decode(Self.roots[8])!))
        }
    }

    // A naive RFC 9162 §2.1 tree over the leaf hashes, written straight from the recursions.
    static func mth(_ d: ArraySlice<[UInt8]>) -> [UInt8] {
        if d.isEmpty { return MerkleTree.emptyRoot }
        if d.count == 1 { return d.first! }
        var k = 1
        while k * 2 < d.count { k *= 2 }
        return MerkleTree.nodeHash(mth(d.prefix(k)), mth(d.dropFirst(k)))
    }

    static func path(_ m: Int, _ d: ArraySlice<[UInt8]>) -> [[UInt8]] {
        if d.count <= 1 { return [] }
        var k = 1
        while k * 2 < d.count { k *= 2 }
        return m < k ? path(m, d.prefix(k)) + [mth(d.dropFirst(k))] : path(m - k, d.dropFirst(k)) + [mth(d.prefix(k))]
    }

    static func subproof(_ m: Int, _ d: ArraySlice<[UInt8]>, _ b: Bool) -> [[UInt8]] {
        if m == d.count { return b ? [] : [mth(d)] }
        var k = 1
        while k * 2 < d.count { k *= 2 }
        return m <= k ? subproof(m, d.prefix(k), b) + [mth(d.dropFirst(k))] : subproof(m - k, d.dropFirst(k), false) + [mth(d.prefix(k))]
    }

    @Test func agreesWithTheNaiveTreeOnRandomSizes() throws {
        var rng = SystemRandomNumberGenerator()
        let all = (0..<601).map { _ in MerkleTree.leafHash(SecureRandom.bytes(32)) }
        let tree = CompleteSubtrees(leafHashes: all)
        var sizes: [Int] = Array(1...20) + [31, 32, 33, 63, 64, 65, 255, 256, 257, 511, 512, 513, 600]
        for _ in 0..<12 { sizes.append(Int.random(in: 1...600, using: &rng)) }
        for n in sizes {
            let d = all[..<n]
            let root = Self.mth(d)
            #expect(MerkleTree.root(size: UInt64(n)) { tree.nodes[$0]! } == root, "root \(n)")
            for m in Set([0, n - 1, n / 2, Int.random(in: 0..<n, using: &rng)]) {
                let proof = try MerkleTree.inclusionProof(index: UInt64(m), size: UInt64(n)) { tree.nodes[$0]! }
                #expect(proof == Self.path(m, d), "path \(m) of \(n)")
                #expect(MerkleTree.verifyInclusion(index: UInt64(m), size: UInt64(n), leafHash: all[m], proof: proof, root: root))
                // Another leaf, another index or another size does not verify.
                #expect(!MerkleTree.verifyInclusion(index: UInt64(m), size: UInt64(n), leafHash: MerkleTree.leafHash([1]), proof: proof, root: root))
                if n > 1 {
                    #expect(!MerkleTree.verifyInclusion(index: UInt64((m + 1) % n), size: UInt64(n), leafHash: all[m], proof: proof, root: root))
                }
                // Nor against the root of the next tree, whatever size is claimed.
                let next = Self.mth(all[...n])
                #expect(!MerkleTree.verifyInclusion(index: UInt64(m), size: UInt64(n + 1), leafHash: all[m], proof: proof, root: next))
                #expect(!MerkleTree.verifyInclusion(index: UInt64(m), size: UInt64(n), leafHash: all[m], proof: proof, root: next))
                // The nodes a proof reads are the ones a store is asked for.
                #expect(MerkleTree.nodesForInclusion(index: UInt64(m), size: UInt64(n)).allSatisfy { tree.nodes[$0] != nil })
            }
            for old in Set([1, n / 3, n - 1, Int.random(in: 1...n, using: &rng)]) where old >= 1 && old <= n {
                let proof = try MerkleTree.consistencyProof(oldSize: UInt64(old), size: UInt64(n)) { tree.nodes[$0]! }
                #expect(proof == (old == n ? [] : Self.subproof(old, d, true)), "consistency \(old) → \(n)")
                let oldRoot = Self.mth(all[..<old])
                #expect(MerkleTree.verifyConsistency(oldSize: UInt64(old), size: UInt64(n), oldRoot: oldRoot, root: root, proof: proof))
                #expect(!MerkleTree.verifyConsistency(oldSize: UInt64(old), size: UInt64(n), oldRoot: MerkleTree.leafHash([9]), root: root, proof: proof))
                if old < n {
                    #expect(!MerkleTree.verifyConsistency(oldSize: UInt64(old), size: UInt64(n), oldRoot: oldRoot, root: MerkleTree.leafHash([9]), proof: proof))
                    #expect(!MerkleTree.verifyConsistency(oldSize: UInt64(old), size: UInt64(n), oldRoot: oldRoot, root: root, proof: Array(proof.dropLast())))
                }
            }
        }
        #expect(MerkleTree.verifyConsistency(oldSize: 0, size: 5, oldRoot: [], root: Self.mth(all[..<5]), proof: []))
        #expect(throws: TransparencyError.self) { try MerkleTree.inclusionProof(index: 3, size: 3) { tree.nodes[$0]! } }
    }

    @Test func appendingInBatchesBuildsTheSameNodes() {
        let all = (0..<300).map { _ in MerkleTree.leafHash(SecureRandom.bytes(32)) }
        let whole = CompleteSubtrees(leafHashes: all)
        var stored: [MerkleTree.Node: [UInt8]] = [:]
        var size = 0
        for batch in [1, 2, 5, 1, 100, 7, 140, 44] {
            let edge = Dictionary(uniqueKeysWithValues: CompleteSubtrees.rightEdge(size: UInt64(size)).map { ($0, stored[$0]!) })
            stored.merge(CompleteSubtrees.appending(leafHashes: Array(all[size..<(size + batch)]), at: UInt64(size), rightEdge: edge)) { a, _ in a }
            size += batch
        }
        #expect(size == 300)
        #expect(stored == whole.nodes)
    }
}
